"""The GPU PCIe probe's parser and adapter, and the gpu_pcie experiment and its analysis (on
constructed rows, and the findings of the runs stored from an NVIDIA H200)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from iolab.core import registry
from iolab.core import spec as specmod
from iolab.errors import InputError, ParseError
from iolab.execution.campaign import Campaign
from iolab.experiments.gpu_pcie import analysis as an
from iolab.experiments.gpu_pcie import requests_per_warp
from iolab.parsers.gpu_pcie_probe import parse_gpu_pcie_probe
from iolab.tools import gpu_pcie_probe as probe
from iolab.tools.base import Invocation

FIX = Path(__file__).parent / "fixtures" / "gpu_pcie_probe"


def report(name: str) -> dict:
    return json.loads((FIX / name).read_text())


def test_golden_copy_report():
    parsed = parse_gpu_pcie_probe((FIX / "copy_h2d.json").read_text(), "copy")
    assert parsed["gbs"] == pytest.approx(3 * 1048576 / 0.00006 / 1e9)
    assert parsed["gbs_max"] == pytest.approx(1048576 / 0.000019 / 1e9)
    assert parsed["latency_us"] is None and parsed["timed_iterations"] == 3


def test_golden_read_report_gives_littles_law_latency():
    parsed = parse_gpu_pcie_probe((FIX / "read_4k.json").read_text(), "read")
    assert parsed["gbs"] == pytest.approx(2 * 536870912 / 0.0255 / 1e9)
    assert parsed["requests_per_s"] == pytest.approx(262144 / 0.0255)
    assert parsed["latency_us"] == pytest.approx(2048 / (262144 / 0.0255) * 1e6)


@pytest.mark.parametrize("change, message", [
    ({"schema_version": 2}, "key 'schema_version'"),
    ({"mode": "scan"}, "key 'mode'"),
    ({"inflight": 0}, "key 'inflight'"),
    ({"window_ns": [2, 1]}, "key 'window_ns'"),
    ({"iterations": []}, "key 'iterations'"),
    ({"iterations": [{"seconds": 0, "bytes": 1, "requests": 1}]}, r"iterations\[0\].seconds"),
    ({"iterations": [{"seconds": 1.0, "bytes": -1, "requests": 1}]}, "key 'bytes'"),
    ({"device": {"index": 0}}, "key 'device'"),
])
def test_malformed_reports_name_the_key(change, message):
    with pytest.raises(ParseError, match=message):
        parse_gpu_pcie_probe(json.dumps({**report("read_4k.json"), **change}), "r.json")


def test_a_cut_off_report_is_refused():
    with pytest.raises(ParseError, match="not JSON"):
        parse_gpu_pcie_probe((FIX / "read_4k.json").read_text()[:200], "r.json")


READ = {"mode": "read", "iosize": 4096, "inflight": 2048, "requests_per_warp": 32,
        "iterations": 5, "warmup": 2, "device": 0, "buffer": 2**30, "seed": 1}


@pytest.mark.parametrize("change, key", [
    ({"mode": "scan"}, "mode"), ({"iosize": 1000}, "iosize"), ({"inflight": 100}, "inflight"),
    ({"iterations": 0}, "iterations"), ({"direction": "h2d"}, "direction"),
    ({"bytes": 4096}, "bytes"), ({"seed": -1}, "seed"),
])
def test_bad_probe_options_name_the_key(change, key):
    with pytest.raises(InputError) as caught:
        probe.check({**READ, **change})
    assert caught.value.key == key


def test_launch_passes_every_option():
    argv = probe.GpuPcieProbe().launch(Invocation("gpu_pcie_probe", READ), []).argv
    assert argv[1:3] == ["--output", probe.OUTPUT]
    assert argv[3:] == ["--mode", "read", "--iosize", "4096", "--inflight", "2048",
                        "--requests-per-warp", "32", "--iterations", "5", "--warmup", "2",
                        "--device", "0", "--buffer", str(2**30), "--seed", "1"]


def test_parse_keeps_the_clocks_of_the_gpu_used(tmp_path):
    shutil.copy(FIX / "read_4k.json", tmp_path / probe.OUTPUT)
    (tmp_path / "stdout").write_text((FIX / "provenance.txt").read_text()
                                     + "iolab-gpu-clocks: 1, 00000000:01:00.0, 1, 2, 3, 4, 4, 8\n")
    metrics = probe.GpuPcieProbe().parse(tmp_path)
    assert metrics["gpu_pci"] == "0000:00:06.0" and metrics["problem"] is None
    assert (metrics["sm_clock_mhz"], metrics["link_gen"], metrics["link_width"]) == (1980, 5, 16)
    assert probe.GpuPcieProbe().window(tmp_path) == (1763900000000000000, 1763900000030000000)


def test_clocks_unavailable_and_malformed(tmp_path):
    assert probe.read_clocks("iolab-gpu-clocks: unavailable (nvidia-smi not found)\n", 0,
                             "s")["sm_clock_mhz"] is None
    assert probe.read_clocks("iolab-gpu-clocks: 0, 00000000:00:06.0, [N/A], 2, 3, 4, 5, 16\n",
                             0, "s")["sm_clock_mhz"] is None
    with pytest.raises(ParseError, match="line 1"):
        probe.read_clocks("iolab-gpu-clocks: 0, 1980\n", 0, "s")


def test_requests_per_warp_fills_a_launch():
    assert requests_per_warp(2**28, 2048, 4096) == 32
    assert requests_per_warp(2**28, 32768, 65536) == 1


def test_plan_of_the_gpu_machine(tmp_path):
    plan = Campaign("gpu_pcie", "h100-pcie5", data_dir=tmp_path).plan()
    points = plan.points()
    assert len(points) == 114 and plan.spec.repetitions == 3
    modes = pd.Series([p.params["mode"] for p in points]).value_counts().to_dict()
    assert modes == {"copy": 18, "read": 48, "write": 48}
    assert plan.eta_all_s < 600, "the campaign must fit one device call of 10 minutes"


def test_invocations():
    exp = registry.get("gpu_pcie")
    spec = specmod.load(exp, "h100-pcie5")
    copy = exp.invocation(spec.settings, {**spec.base, "mode": "copy", "direction": "d2h"})
    assert copy.options == {"mode": "copy", "iterations": 5, "warmup": 2, "device": 0,
                            "direction": "d2h", "bytes": 1048576}
    read = exp.invocation(spec.settings, dict(spec.base))
    assert read.options["requests_per_warp"] == 32 and read.options["buffer"] == 2**30
    assert "direction applies" in exp.host_block(spec.settings, {**spec.base, "direction": "h2d"}, [])


def test_derive_overhead_in_the_payloads_direction_from_the_counters():
    exp = registry.get("gpu_pcie")
    row = {"mode": "read", "direction": "none", "gpu_pcie_probe.gbs": 40.0,
           "nvml.rx_counter_bytes_per_s": 46e9, "nvml.tx_counter_bytes_per_s": 8e9,
           # the sampled throughput is no input of the ratio
           "nvml.rx_mean_bytes_per_s": 50e9, "nvml.tx_mean_bytes_per_s": 2e9}
    assert exp.derive(row)["total_over_payload"] == pytest.approx(1.15)
    assert exp.derive(row)["requests_over_payload"] == pytest.approx(0.2)
    row.update(mode="copy", direction="d2h")
    assert exp.derive(row)["total_over_payload"] == pytest.approx(0.2)
    assert math.isnan(exp.derive({"mode": "write", "direction": "none",
                                  "gpu_pcie_probe.gbs": 10.0})["total_over_payload"])


def test_a_rate_above_the_recorded_links_line_rate_is_left_out_with_its_reason():
    exp = registry.get("gpu_pcie")
    row = {"mode": "read", "direction": "none", "gpu_pcie_probe.gbs": 51.3,
           "gpu_pcie_probe.link_gen": 5, "gpu_pcie_probe.link_width": 16,
           "nvml.rx_mean_bytes_per_s": 114.4e9, "nvml.rx_counter_bytes_per_s": 59.3e9}
    out = exp.derive(row)
    assert math.isnan(out["gpu_pcie_rx_mean_bytes_per_s"])
    assert out["gpu_pcie_rx_counter_bytes_per_s"] == 59.3e9 and out["gbs"] == 51.3
    assert out["implausible"] == (
        "gpu_pcie_rx_mean_bytes_per_s: 114.4 GB/s is above the 63.0 GB/s line rate of the "
        "recorded link (PCIe Gen5 x16, one direction): no traffic over it")
    # a Gen4 x8 link carries 15.8 GB/s: the payload itself is then no measurement of it
    out = exp.derive({**row, "gpu_pcie_probe.link_gen": 4, "gpu_pcie_probe.link_width": 8})
    assert math.isnan(out["gbs"]) and out["implausible"].startswith("gbs: 51.3 GB/s")
    # no recorded link: nothing to hold the rates to
    out = exp.derive({**row, "gpu_pcie_probe.link_gen": None})
    assert out["gpu_pcie_rx_mean_bytes_per_s"] == 114.4e9 and out["implausible"] == ""


def test_a_long_copy_window_queues_copies_and_leaves_earlier_runs_one_configuration():
    exp = registry.get("gpu_pcie")
    settings = {name: field.default for name, field in exp.settings.items()}
    point = {"mode": "copy", "direction": "h2d", "bytes": 2**26, "iosize": 4096,
             "inflight": 2048}
    assert "copies" not in exp.invocation(settings, point).options
    assert "copy_bytes_per_iteration" not in exp.config_settings(settings)
    settings["copy_bytes_per_iteration"] = 2**34
    assert exp.invocation(settings, point).options["copies"] == 256
    assert exp.config_settings(settings)["copy_bytes_per_iteration"] == 2**34
    argv = probe.GpuPcieProbe().launch(exp.invocation(settings, point), []).argv
    assert argv[argv.index("--copies") + 1] == "256"
    with pytest.raises(InputError, match="copies"):
        probe.check({**exp.invocation(settings, point).options, "copies": 0})


def summary_rows():
    rows = []
    for mode in ("read", "write"):
        for iosize in (512, 4096):
            for inflight, gbs in ((32, 2.0), (512, 20.0), (8192, 45.0), (32768, 45.5)):
                scale = 1 if iosize == 4096 else 0.5
                rows.append({"mode": mode, "direction": "none", "iosize": iosize,
                             "inflight": inflight, "mean": gbs * scale,
                             "latency_us": 32 * iosize / (gbs * scale * 1e9) * 1e6})
    rows += [{"mode": "copy", "direction": "h2d", "iosize": 4096, "inflight": 2048, "mean": 52.0,
              "latency_us": float("nan")},
             {"mode": "copy", "direction": "d2h", "iosize": 4096, "inflight": 2048, "mean": 53.0,
              "latency_us": float("nan")}]
    return pd.DataFrame(rows)


def test_ceilings_are_the_best_point_of_each_kind_of_transfer():
    found = an.ceilings(summary_rows())
    assert found[("copy", "h2d")]["mean"] == 52.0 and found[("copy", "d2h")]["mean"] == 53.0
    assert (found[("read", "none")]["mean"], found[("read", "none")]["inflight"]) == (45.5, 32768)


def test_models_take_latency_from_the_fewest_warps_and_mark_that_point():
    summary = summary_rows()
    requests = summary[summary["mode"] != "copy"]
    models = an.models(requests, requests)
    model = models[("read", 4096)]
    assert model.latency_s == pytest.approx(32 * 4096 / 2e9)
    assert model.link_bytes_per_s == pytest.approx(45.5e9)
    assert model.bytes_per_s(32, 4096) == pytest.approx(2e9)
    res = an.residuals(requests, models, resident=8448).set_index(["mode", "iosize", "inflight"])
    fitted = res[res["fitted"]]
    assert sorted(fitted.index.get_level_values("inflight")) == [32] * 4
    assert (fitted["residual"].abs() < 1e-12).all(), "the fitting point matches by construction"
    # at 512 warps the model's latency term gives 16 x 2 GB/s = 32 GB/s; measured 20
    assert res.loc[("read", 4096, 512), "model"] == pytest.approx(32.0)
    assert res.loc[("read", 4096, 512), "residual"] == pytest.approx(20 / 32 - 1)
    assert res.loc[("read", 4096, 8192), "model"] == pytest.approx(45.5), "the plateau caps it"
    # residents cap the warps the model counts
    capped = an.residuals(requests, models, resident=256).set_index(["mode", "iosize", "inflight"])
    assert capped.loc[("read", 4096, 512), "model"] == pytest.approx(16.0)


def link_summary():
    out = summary_rows().assign(bytes=1048576, n=3)
    out.loc[out["mode"] == "copy", "bytes"] = 268435456
    return out.assign(ci_low=out["mean"] - 0.1, ci_high=out["mean"] + 0.1)


def test_link_use_orders_the_transfers_and_finds_the_fewest_warps():
    use = an.link_use(link_summary(), limit=63.0, tolerance=0.05)
    assert list(zip(use["mode"], use["direction"])) == [
        ("copy", "h2d"), ("copy", "d2h"), ("read", "none"), ("write", "none")]
    read = use.iloc[2]
    assert read["gbs"] == 45.5 and read["share"] == pytest.approx(45.5 / 63.0)
    # 45.0 at 8192 warps (4 KiB) is within 5 % of 45.5; no 512 B point is (their best is 22.75)
    assert (read["fewest_warps"], read["fewest_warps_iosize"]) == (8192, 4096)
    assert math.isnan(use.iloc[0]["fewest_warps"]), "copies have no warps"
    assert use.iloc[3]["fewest_tested"] == 32
    table = an.link_use_table(use, lambda var, value: str(value), 0.05, resident=4096)
    assert table.iloc[2]["at"] == "4,096 B requests, 32,768 warps (4,096 at once)"
    assert table.iloc[2].iloc[-1] == "8,192 (4,096 B requests)"
    assert table.iloc[3].iloc[-1] == "8,192 (4,096 B requests)"
    censored = an.link_use(fast_writes(), limit=63.0, tolerance=0.05)
    assert censored.iloc[3]["fewest_warps"] == censored.iloc[3]["fewest_tested"] == 32
    table = an.link_use_table(censored, lambda var, value: str(value), 0.05, resident=4096)
    assert table.iloc[3].iloc[-1] == "32 (512 B requests), the fewest tested"


def fast_writes():
    """Writes within 5 % of their ceiling from the fewest warps tested: censored."""
    out = link_summary()
    out.loc[(out["mode"] == "write") & (out["inflight"] == 32), "mean"] = 45.4
    return out


def test_warps_to_reach_a_ceiling_per_request_size():
    need = an.warps_to_reach(link_summary(), "read", 45.5, 0.05).set_index("iosize")
    assert math.isnan(need.loc[512, "warps"]) and math.isnan(need.loc[512, "bytes_in_flight"])
    assert need.loc[4096, "warps"] == 8192 and need.loc[4096, "bytes_in_flight"] == 8192 * 4096


def test_ceiling_sentence_and_answer_say_what_reached_the_ceiling_and_where():
    use = an.link_use(link_summary(), limit=63.0, tolerance=0.05)
    text = an.ceiling_sentence(use, 63.0, 0.05, "one GPU X in environment e")
    # the device-to-host copy (53.0) is faster, but it does not go into the GPU
    assert text.startswith("52.0 GB/s into the GPU by the copy engine (host-to-device copies "
                           "of 256 MiB), 83 % of the 63.0 GB/s line rate")
    assert "reads reach 45.5 GB/s (72 %), within 5 % of that from 8,192 warps" in text
    assert text.endswith("measured on one GPU X in environment e")
    assert an.ceiling_sentence(use[use["mode"] == "write"], 63.0, 0.05, "x") is None
    requests = link_summary()[lambda d: d["mode"] != "copy"]
    res = an.residuals(requests, an.models(requests, requests), 8448)
    answer = an.answer(use, 63.0, 0.05, "one GPU X in environment e", res, 0.95)
    assert "The copy engine reaches 52.0 GB/s into the GPU and 53.0 GB/s out of it" in answer
    assert "copies into the GPU and reads differ by 6.5 GB/s, outside both intervals" in answer
    assert "the two copy directions differ by 1.0 GB/s" in answer
    assert "fewest the grid tests" not in answer
    censored = an.link_use(fast_writes(), limit=63.0, tolerance=0.05)
    assert "as few as 32 warps in flight (512 B requests, the fewest the grid tests, so " \
        "fewer may do)" in an.answer(censored, 63.0, 0.05, "x", res, 0.95)
    close = use.copy()
    close.loc[1, ["gbs", "ci_low", "ci_high"]] = [52.05, 51.95, 52.15]
    assert "the two copy directions (52.00 and 52.05 GB/s) cannot be told apart" in \
        an.answer(close, 63.0, 0.05, "x", res, 0.95)


def test_machine_in_words_from_what_the_runs_recorded():
    rows = pd.DataFrame({"gpu_pcie_probe.gpu_name": ["NVIDIA H200"] * 2,
                         "gpu_pcie_probe.link_gen": [5, 5], "gpu_pcie_probe.link_width": [16, 16]})
    assert an.machine(rows, "e") == "one NVIDIA H200, PCIe Gen5 x16, in environment e"
    assert an.machine(pd.DataFrame(), "e") == "a GPU whose name was not recorded in environment e"


def test_findings_of_the_runs_stored_from_an_h200():
    """The chapter's numbers from the committed runs (data/raw/gpu_pcie/h200-pcie5)."""
    from iolab.report.chapter import Chapter

    ch = Chapter("gpu_pcie", "h200-pcie5", mode="replay")
    assert len(ch.df) == 342
    summary = ch.summarize(ch.df, ["mode", "direction", "bytes", "iosize", "inflight"], ["gbs"])
    assert (summary["n"] == 3).all()
    limit = an.physical_limit(ch.df)
    assert limit == pytest.approx(63.015, abs=1e-3)
    use = an.link_use(summary, limit, 0.05).set_index(["mode", "direction"])
    assert use.loc[("copy", "h2d"), "gbs"] == pytest.approx(55.28, abs=0.01)
    assert use.loc[("read", "none"), "gbs"] == pytest.approx(51.38, abs=0.01)
    assert use.loc[("write", "none"), "gbs"] == pytest.approx(52.63, abs=0.01)
    assert (use.loc[("read", "none"), "fewest_warps"],
            use.loc[("read", "none"), "fewest_warps_iosize"]) == (128, 1024)
    assert an.machine(ch.df, "h200-pcie5") == \
        "one NVIDIA H200, PCIe Gen5 x16, in environment h200-pcie5"
    # no window of this campaign held 20 counter readings: the long-window one measures them
    from iolab.experiments.gpu_pcie import counters as cn
    assert cn.counted(ch.df, 20).empty


def test_physical_limit_from_the_recorded_link():
    rows = pd.DataFrame({"gpu_pcie_probe.link_gen": [5, 5], "gpu_pcie_probe.link_width": [16, 16]})
    assert an.physical_limit(rows) == pytest.approx(32 * 16 * 128 / 130 / 8)
    assert an.physical_limit(pd.DataFrame()) is None


@pytest.mark.parametrize("link", ["99, 16", "5, 1024", "0, 16", "5, 3"])
def test_a_link_no_pcie_has_is_refused(link):
    """A clocks line saying Gen 99 x1024 raised the line-rate ceiling, and 1 TB/s was stored."""
    line = f"iolab-gpu-clocks: 0, 00000000:00:06.0, 1980, 3201, 1980, 3201, {link}\n"
    with pytest.raises(ParseError, match=r"line 1: the PCIe link's link_(gen|width) is "):
        probe.read_clocks(line, 0, "s")
    assert probe.read_clocks(line.replace(link, "6, 32"), 0, "s")["link_width"] == 32


def test_an_iteration_moving_other_than_its_requests_is_refused():
    doc = report("read_4k.json")
    doc["iterations"][0]["bytes"] *= 20
    with pytest.raises(ParseError, match=r"key 'iterations\[0\].bytes': .* \(allowed: exactly "):
        parse_gpu_pcie_probe(json.dumps(doc), "r.json")


@pytest.mark.parametrize("key, value, reason", [
    ("mode", "write", "its mode is 'write', the run gave the probe --mode 'read'"),
    ("seed", 7, "its seed is 7, the run gave the probe --seed '1'"),
    ("buffer_bytes", 2**31, "its buffer_bytes is 2147483648, the run gave the probe --buffer "),
])
def test_a_report_of_other_options_is_foreign(tmp_path, key, value, reason):
    """probe.json of a write run was stored as a run asked to read."""
    doc = report("read_4k.json")
    argv = ["gpu_pcie_probe.sh", "--output", probe.OUTPUT, "--mode", "read", "--iosize",
            str(doc["iosize"]), "--inflight", str(doc["inflight"]), "--requests-per-warp",
            str(doc["requests_per_warp"]), "--iterations", str(len(doc["iterations"])),
            "--warmup", str(doc["warmup"]), "--device", "0", "--buffer",
            str(doc["buffer_bytes"]), "--seed", "1"]
    (tmp_path / probe.OUTPUT).write_text(json.dumps(doc))
    assert probe.GpuPcieProbe().foreign_report(tmp_path, argv) == ""
    (tmp_path / probe.OUTPUT).write_text(json.dumps({**doc, key: value}))
    assert probe.GpuPcieProbe().foreign_report(tmp_path, argv).startswith(
        f"probe.json is not this run's report: {reason}")
