

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
