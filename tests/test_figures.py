

def test_a_latency_spanning_a_decade_is_drawn_on_a_log_axis():
    import matplotlib.pyplot as plt

    from iolab.report import figures as fg

    fig, (wide, narrow) = plt.subplots(1, 2)
    wide.plot([1, 2, 3], [80.0, 115.0, 7000.0])
    wide.set_ylabel("p99 µs")
    narrow.plot([1, 2, 3], [80.0, 115.0, 300.0])
    assert fg.log_when_wide(wide) and wide.get_yscale() == "log"
    assert wide.get_ylabel() == "p99 µs (log scale)"
    assert not fg.log_when_wide(narrow) and narrow.get_yscale() == "linear"
    plt.close(fig)


def test_a_size_axis_reads_in_binary_units_not_raw_bytes():
    """A tick of 1048576 is read digit by digit: sizes are labelled in B, KiB, MiB, GiB, in
    the largest unit that divides them exactly."""
    import matplotlib.pyplot as plt

    from iolab.report import figures as fg

    assert [fg.size_label(n) for n in (512, 1024, 4096, 1536 * 1024, 2**20, 3 * 2**30, 1000)] \
        == ["512 B", "1 KiB", "4 KiB", "1536 KiB", "1 MiB", "3 GiB", "1000 B"]
    fig, ax = plt.subplots()
    ax.plot([4096, 2**20], [1, 2])
    fg.value_ticks(ax, [4096, 65536, 2**20], log2=True, sizes=True)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["4 KiB", "64 KiB", "1 MiB"]
    plt.close(fig)
