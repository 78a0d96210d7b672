"""The GPU experiments (pcie_saturation, cuda_iosize, cuda_qdepth) and what they share:
their lab-server plans, invocations, counters, host checks, the GPU check and AiSIO imports."""

from __future__ import annotations

import json
import math
import subprocess

import pandas as pd
import pytest
from test_import_cijoe import make_cijoe, tar_gz

from iolab.collectors.dcgmi import DcgmDmon
from iolab.collectors.nvml import NvmlPcie
from iolab.collectors.quiet import Quiet
from iolab.core import registry
from iolab.core import spec as specmod
from iolab.errors import InputError, ToolError
from iolab.execution.campaign import Campaign
from iolab.host.inventory import fingerprint
from iolab.importers.cijoe import import_archive
from iolab.paths import REPO_ROOT
from iolab.shared import gpu_io
from iolab.tools.base import CpuRequest

GPU = ("pcie_saturation", "cuda_iosize", "cuda_qdepth")


def load(name, overrides=None):
    exp = registry.get(name)
    return exp, specmod.load(exp, "hpc-server", params_dir=exp.params_dir, overrides=overrides)


@pytest.mark.parametrize("name, points, values", [
    ("cuda_iosize", 64, {"iosize": [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536],
                         "qdepth": [1, 2, 4, 8, 16, 32, 64, 128], "nqueues": [1], "ndevs": [16]}),
    ("cuda_qdepth", 50, {"qdepth": [1, 2, 4, 8, 16, 32, 64, 128, 256, 512],
                         "nqueues": [1, 2, 4, 8, 16], "iosize": [512], "ndevs": [16]}),
])
def test_lab_server_plans_hold_the_seeds_grids(name, points, values, tmp_path):
    plan = Campaign(name, "hpc-server", data_dir=tmp_path).plan()
    assert len(plan.points()) == points and plan.spec.repetitions == 5
    for var, wanted in values.items():
        assert sorted({p.params[var] for p in plan.points()}) == wanted
    assert all(len(p.params) == 7 for p in plan.points())
    summary = plan.summary()
    assert f"{points} points (0 excluded) x 5 repetitions" in summary
    assert "grid " in summary and plan.eta_all_s > 0


def test_cuda_invocation_is_xnvmeperf_cuda_run():
    exp, spec = load("cuda_iosize")
    point = {**spec.base, "iosize": 4096, "qdepth": 32, "ndevs": 4}
    inv = exp.invocation(spec.settings, point)
    assert inv.tool == "xnvmeperf"
    assert inv.options == {"subcommand": "cuda-run", "devices": spec.settings["devices"][:4],
                           "iopattern": "randread", "qdepth": 32, "iosize": 4096, "runtime": 10,
                           "nqueues": 1, "be": "upcie-cuda", "gpu_id": 0}


def test_pcie_invocations_nvme_and_p2p():
    exp, spec = load("pcie_saturation")
    nvme = exp.invocation(spec.settings, dict(spec.base))
    assert nvme.options["subcommand"] == "run" and nvme.options["be"] == "upcie-cuda"
    assert nvme.options["cpumask"] == CpuRequest(1, siblings=False)
    assert len(nvme.options["devices"]) == 4
    p2p = exp.invocation(spec.settings, {**spec.base, "benchmark": "gpu_to_gpu"})
    assert p2p.tool == "p2p_bandwidth" and p2p.options["executable"].endswith("p2pBandwidthLatencyTest")
    assert exp.collectors(spec.settings, {**spec.base, "benchmark": "gpu_to_gpu"}, None, []) == []


@pytest.mark.parametrize("counter, kind", [("dcgmi", DcgmDmon), ("nvml", NvmlPcie), ("none", None)])
def test_the_gpu_counter_is_a_setting(counter, kind):
    exp, spec = load("cuda_qdepth", [f"gpu_counter={counter}", "sample_interval_ms=50"])
    found = exp.collectors(spec.settings, dict(spec.base), None, [])
    if kind is None:
        assert found == []
    else:
        assert [type(c) for c in found] == [kind] and found[0].interval_ms == 50


def test_unknown_counter_is_refused_naming_the_key():
    with pytest.raises(InputError, match="gpu_counter"):
        load("cuda_iosize", ["gpu_counter=smi"])


def test_host_block_names_missing_devices():
    exp, spec = load("cuda_iosize")
    assert exp.host_block(spec.settings, dict(spec.base), []) is None
    assert "needs 17 devices" in exp.host_block(spec.settings, {**spec.base, "ndevs": 17}, [])


def test_a_campaign_without_the_gpu_or_its_counter_starts_nothing(tmp_path, monkeypatch):
    exp, spec = load("cuda_iosize", ["gpu_counter=nvml", "gpu=1"])
    monkeypatch.setattr(gpu_io, "GPU_DIR", str(tmp_path / "gpus"))
    with pytest.raises(ToolError, match="needs NVIDIA GPU 1, the NVIDIA driver lists none"):
        exp.prepare_host(spec.settings)
    for bus in ("0000:00:06.0", "0000:00:07.0"):
        (tmp_path / "gpus" / bus).mkdir(parents=True)
    monkeypatch.setattr(gpu_io.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ToolError, match="nvidia-ml-py"):
        exp.prepare_host(spec.settings)
    exp, spec = load("cuda_iosize", ["gpu_counter=none"])
    exp.prepare_host(spec.settings)


def test_campaign_binds_the_devices():
    exp, spec = load("pcie_saturation")
    knobs = exp.campaign_knobs(spec.settings)
    assert knobs == {"device_binding": {"devices": spec.settings["devices"],
                                        "driver": "uio_pci_generic"}}


@pytest.mark.parametrize("row, verdict", [
    ({"xnvmeperf.gpu_pci": "0000:00:06.0"}, "no GPU counter"),
    ({"dcgmi.samples": 90, "dcgmi.gpu_pci": "0000:00:06.0", "xnvmeperf.gpu_pci": "0000:00:06.0"},
     gpu_io.SAME_GPU),
    ({"nvml.samples": 90, "nvml.gpu_pci": "0000:00:06.0", "xnvmeperf.gpu_pci": "0000:c1:00.0"},
     "the counter watched 0000:00:06.0, the benchmark used 0000:c1:00.0"),
    ({"dcgmi.samples": 90, "dcgmi.gpu_pci": None, "xnvmeperf.gpu_pci": "0000:00:06.0"},
     "cannot compare: the counter did not record its GPU's PCI address"),
    ({"dcgmi.samples": 90, "dcgmi.gpu_pci": "0000:00:06.0", "xnvmeperf.gpu_pci": float("nan")},
     "cannot compare: the driver did not record the benchmark's GPU"),
])
def test_gpu_check_compares_pci_addresses(row, verdict):
    assert gpu_io.gpu_check(row) == verdict


def test_derive_gives_one_schema_whichever_counter_ran():
    exp = registry.get("cuda_iosize")
    for counter in ("dcgmi", "nvml"):
        row = {"xnvmeperf.iops": 1e6, "xnvmeperf.mibs": 488.28125, "xnvmeperf.failed": 0,
               f"{counter}.samples": 10, f"{counter}.rx_mean_bytes_per_s": 6e8,
               f"{counter}.rx_p95_bytes_per_s": 7e8, f"{counter}.gpu_pci": "0000:00:06.0",
               "xnvmeperf.gpu_pci": "0000:00:06.0"}
        out = exp.derive(row)
        assert out["gpu_pcie_rx_mean_bytes_per_s"] == 6e8
        assert out["gpu_pcie_rx_p95_bytes_per_s"] == 7e8
        assert math.isnan(out["gpu_pcie_tx_mean_bytes_per_s"])
        assert out["payload_bytes_per_s"] == 488.28125 * 2 ** 20
        assert out["gpu_check"] == gpu_io.SAME_GPU and out["run.source"] == "iolab"


@pytest.fixture
def archive(tmp_path):
    return tar_gz(make_cijoe(tmp_path / "src"), tmp_path / "mini.tar.gz"), tmp_path / "data"


def test_import_into_an_experiment_keeps_it_apart(archive):
    path, data = archive
    report = import_archive(path, "pcie_saturation", "hpc-server", data, progress=False)
    assert (report.imported, report.failed) == (2, 0)
    df = Campaign("pcie_saturation", "hpc-server", data_dir=data).tidy()
    assert len(df) == 2
    assert set(df["run.source"]) == {"AiSIO archive mini.tar.gz"}
    assert set(df["benchmark"]) == {"nvme_to_gpu"} and set(df["ncores"]) == {2}
    assert set(df["iosize"]) == {512} and set(df["qdepth"]) == {64}
    assert (df["payload_bytes_per_s"] == df["mibs"] * 2 ** 20).all()
    assert df["gpu_pcie_rx_capture_p95_bytes_per_s"].notna().all()
    assert df["gpu_pcie_rx_mean_bytes_per_s"].isna().all(), "AiSIO's captures have no window"
    # this package's plan counts none of them as its own
    plan = Campaign("pcie_saturation", "hpc-server", data_dir=data).plan()
    assert plan.counts()["stored"] == 0 and len(plan.stored_outside) == 2


def test_import_of_nothing_the_experiment_takes_stores_nothing(archive):
    path, data = archive
    with pytest.raises(InputError, match="holds no benchmark that cuda_iosize takes") as caught:
        import_archive(path, "cuda_iosize", "hpc-server", data, progress=False)
    assert "does not take" in str(caught.value)
    assert not data.exists()


def test_an_import_never_blocks_the_experiments_own_campaign(archive):
    """The archive's host goes beside its extras: the experiment's host.json stays free for
    the host that runs it, before or after an import."""
    path, data = archive
    store = Campaign("pcie_saturation", "hpc-server", data_dir=data).store
    lab = {"cpu": {"model_name": "lab"}}
    store.check_or_record_host(lab, fingerprint(lab), [])
    import_archive(path, "pcie_saturation", "hpc-server", data, progress=False)
    assert store.read_host()["fingerprint"] == fingerprint(lab)
    extra = json.loads((store.root / "extras" / "mini" / "host.json").read_text())
    assert extra["source"] == "aisio-cijoe-import" and extra["fingerprint"]
    store.check_or_record_host(lab, fingerprint(lab), [])  # still this host's


def test_import_leaves_out_runs_whose_data_stayed_in_host_memory(tmp_path):
    folder = make_cijoe(tmp_path / "src")
    for state in (folder / "003_run").glob("*.state"):
        state.write_text(state.read_text().replace("--be upcie-cuda", "--be upcie"))
    with pytest.raises(InputError, match="back end 'upcie'"):
        import_archive(folder, "pcie_saturation", "hpc-server", tmp_path / "data", progress=False)


def test_import_into_an_experiment_without_imports_is_refused(archive):
    path, data = archive
    with pytest.raises(InputError, match="cannot take runs imported"):
        import_archive(path, "cpu_search", "hpc-server", data, progress=False)
    assert not (data / "raw" / "cpu_search").exists()


def test_a_cuda_run_through_driver_adapter_counter_and_derive(tmp_path, monkeypatch):
    """One cuda_iosize point end to end with fakes for what only the lab server has: the
    driver runs a fake xnvmeperf beside a fake nvidia-smi, NVML is a fake library, and the row
    the experiment derives says the counter watched the benchmark's GPU."""
    from test_nvml import FakeNvml
    from test_xnvmeperf import FIX, fake_path

    exp, spec = load("cuda_iosize", ["gpu_counter=nvml", "gpu=1"])
    point = {**spec.base, "qdepth": 128, "nqueues": 2, "ndevs": 2}
    launch, collectors, adapter = exp.launch(spec.settings, point, [])
    assert launch.argv[launch.argv.index("--") + 1] == "cuda-run"
    assert "--gpu_id" in launch.argv and [type(c) for c in collectors] == [NvmlPcie, Quiet]
    report = (FIX / "xnvmeperf_cuda_run.txt").read_text()
    (tmp_path / "report.txt").write_text(report)
    path = fake_path(tmp_path, {
        "xnvmeperf": f"cat {tmp_path / 'report.txt'}\n",
        # GPU 1 of this listing is the one NVML's fake reports (00000000:C1:00.0)
        "nvidia-smi": "echo '0, 00000000:4B:00.0, NVIDIA H100 PCIe, 5, 16'\n"
                      "echo '1, 00000000:C1:00.0, NVIDIA H100 PCIe, 5, 16'\n"})
    run = tmp_path / "run"
    run.mkdir()
    counter = NvmlPcie(1, 20, lib=FakeNvml())
    counter.start(run)
    done = subprocess.run(launch.argv, capture_output=True, text=True, env={"PATH": path},
                          timeout=60, cwd=run)  # the runner runs the driver in the run folder
    counter.stop(run)
    assert done.returncode == 0, done.stderr
    (run / "stdout").write_text(done.stdout)
    row = {f"xnvmeperf.{k}": v for k, v in adapter.parse(run).items()}
    start, end = adapter.window(run)
    assert end - start == 10 * 10**9, "the window is the elapsed time xnvmeperf reports"
    row.update({f"nvml.{k}": v for k, v in NvmlPcie.parse(run, (start, end)).items()})
    out = exp.derive(row)
    assert row["xnvmeperf.gpu_pci"] == row["nvml.gpu_pci"] == "0000:c1:00.0"
    assert out["gpu_check"] == gpu_io.SAME_GPU
    assert out["iops"] == 7699999.50 and out["payload_bytes_per_s"] == 3759.77 * 2 ** 20
    assert out["gpu_pcie_rx_mean_bytes_per_s"] > 0
    assert row["xnvmeperf.link_gbs"] == pytest.approx(32 * 16 * 128 / 130 / 8)


@pytest.mark.parametrize("grid, key", [("qdepth=[3, 4]", "qdepth"), ("iosize=[1000]", "iosize")])
def test_plan_refuses_what_cuda_run_cannot_take(tmp_path, grid, key):
    overrides = [f"grids.iosize-qdepth.vary.{grid}"]
    with pytest.raises(InputError, match="power of two") as caught:
        Campaign("cuda_iosize", "hpc-server", data_dir=tmp_path, overrides=overrides).plan()
    assert caught.value.key == key
    assert "cuda_iosize.yaml" in str(caught.value) and "grid(s) iosize-qdepth" in str(caught.value)


def test_at_base_keeps_one_set_of_curves():
    df = pd.DataFrame([{"iosize": 512, "ndevs": 4, "ncores": 1, "smt": "on"},
                       {"iosize": 4096, "ndevs": 4, "ncores": 1, "smt": None},
                       {"iosize": 4096, "ndevs": 8, "ncores": 1, "smt": "on"},
                       {"iosize": 4096, "ndevs": 4, "ncores": 2, "smt": "on"}])
    base = {"benchmark": "nvme_to_gpu", "iosize": 4096, "ndevs": 4, "ncores": 1, "smt": "on"}
    assert sorted(gpu_io.at_base(df, base, ("iosize",))["iosize"]) == [512, 4096], \
        "an unrecorded value (None) does not select"
    assert sorted(gpu_io.at_base(df, base, ("ndevs",))["ndevs"]) == [4, 8]
    assert len(gpu_io.at_base(df, base, ("iosize", "ndevs", "ncores"))) == 4


def test_shown_prefers_own_runs_and_says_what_it_left_out():
    own = pd.DataFrame([{"qdepth": 1, "ndevs": 16, "gpu_check": gpu_io.SAME_GPU, "run.source": "iolab"},
                        {"qdepth": 2, "ndevs": 16, "gpu_check": "cannot compare: x", "run.source": "iolab"},
                        {"qdepth": 2, "ndevs": 8, "gpu_check": gpu_io.SAME_GPU, "run.source": "iolab"}])
    imported = own.assign(**{"run.source": "AiSIO archive a.tar.gz"})
    rows, origin, notes = gpu_io.shown(own, imported, {"qdepth": 1, "ndevs": 16}, ("qdepth",))
    assert origin == "this package's runs" and list(rows["qdepth"]) == [1]
    assert notes == ["1 run(s) left out: cannot compare: x",
                     "1 run(s) of other points than this chapter's curves not shown"]
    rows, origin, _ = gpu_io.shown(own.iloc[0:0], imported, {"qdepth": 1, "ndevs": 16}, ("qdepth",))
    assert origin.startswith("AiSIO's runs") and sorted(rows["qdepth"]) == [1, 2]
    assert gpu_io.shown(own.iloc[0:0], imported.iloc[0:0], {}, ())[1] is None


@pytest.mark.slow
@pytest.mark.parametrize("name", GPU)
def test_chapter_without_runs_or_references_still_renders(tmp_path, name):
    """A data folder with nothing in it: the chapter says so instead of failing."""
    from iolab.report.book import execute

    exp = registry.get(name)
    execute(exp.notebook, tmp_path / "out.ipynb", {"environment": "hpc-server",
                                                   "data_dir": str(tmp_path / "empty")})
    text = (tmp_path / "out.ipynb").read_text()
    assert "no stored run in environment hpc-server" in text


def test_the_device_initiated_model_is_fitted_and_says_so():
    """The Little's-law line of the device-initiated chapters: its latency is fitted to the
    lightest load in the data (named as such), the fitting point is marked, and its error on
    the other points is the residual."""
    from iolab.analysis import queueing

    points = pd.DataFrame({"outstanding": [16, 64, 256], "iosize": [512] * 3,
                           "iops": [640_000.0, 2_000_000.0, 3_000_000.0]})
    capacity = {"iops": 1_000_000.0, "source": "a test"}
    model = queueing.fitted_model(points, "outstanding", "iops", capacity, 45e9, "a test link", 4)
    assert model.latency_s == pytest.approx(16 / 640_000)  # 25 µs, the smallest N / X
    assert "taken at 16 commands in flight (640,000 IOPS)" in model.sources["latency_s"]
    assert "not a command's latency at light load" in model.sources["latency_s"]
    res = queueing.residuals(points, model, "outstanding", "iops", "iosize")
    res = res.set_index("outstanding")
    assert res["fitted"].tolist() == [True, False, False]
    assert res.loc[16, "residual"] == pytest.approx(0)
    # 64 in flight: min(64 / 25 µs = 2.56 M, 4 x 1 M, 45e9 / 512) = 2.56 M
    assert res.loc[64, "model"] == pytest.approx(2.56e6)
    assert res.loc[64, "residual"] == pytest.approx(2.0 / 2.56 - 1)
    assert res.loc[256, "model"] == pytest.approx(4e6), "the devices term binds"
    from iolab.analysis.queueing import worst_residual

    worst = worst_residual(res.reset_index())
    assert worst["outstanding"] == 256 and worst["residual"] == pytest.approx(-0.25)
    one_size = queueing.residuals(points, model, "outstanding", "iops", 512)
    assert one_size["model"].tolist() == res["model"].tolist()
    assert worst_residual(res.reset_index().iloc[:1]) is None, "only the fitting point"
    assert queueing.fitted_model(points, "outstanding", "iops",
                                 {"iops": float("nan"), "source": "x"}, 45e9, "x", 4) is None


def test_one_link_term_for_both_device_initiated_chapters(tmp_path):
    """B is a payload ceiling from one definition: the I/O-size campaign's highest mean
    payload where stored, else AiSIO's published plateau; never a line rate."""
    from iolab.shared import gpu_sources as an
    from iolab.paths import default_data_dir

    terms = set()
    for name in ("cuda_iosize", "cuda_qdepth"):
        spec = specmod.load(registry.get(name), "hpc-server")
        terms.add(an.link_term(spec.analysis, "hpc-server", default_data_dir()))
    assert terms == {(45e9, "the payload plateau AiSIO published for device-initiated reads, "
                             "not measured here")}
    spec = specmod.load(registry.get("cuda_qdepth"), "hpc-server")
    value, why = an.link_term(spec.analysis, "hpc-server", tmp_path)
    assert value == float("inf") and "no published reference aisio_cuda_iosize" in why


def test_the_link_term_is_the_iosize_campaigns_best_point_where_stored(monkeypatch, tmp_path):
    """With runs stored: the highest mean payload of a point, not of a single run."""
    from types import SimpleNamespace

    from iolab.shared import gpu_sources as an

    runs = pd.DataFrame({"iosize": [512, 512, 4096, 4096], "qdepth": [64] * 4,
                         "payload_bytes_per_s": [40e9, 42e9, 44e9, 50e9]})
    fake = SimpleNamespace(tidy=lambda: runs, plan=lambda as_recorded: None,
                           spec=SimpleNamespace(base={"iosize": 512, "qdepth": 1, "ndevs": 16}))
    monkeypatch.setattr(an, "_campaign", lambda name, env, data: fake)
    monkeypatch.setattr(an.Campaign, "split", staticmethod(lambda rows, plan: (rows, None)))
    spec = specmod.load(registry.get("cuda_qdepth"), "hpc-server")
    value, why = an.link_term(spec.analysis, "hpc-server", tmp_path)
    assert value == pytest.approx(47e9), "the mean of the best point, not its best run"
    assert why == "measured: the highest mean payload of cuda_iosize in hpc-server"


def test_a_residual_table_marks_the_fitting_point():
    from iolab.report.tables import residual_table

    res = pd.DataFrame({"n": [1, 1, 2, 2], "q": [8, 16, 8, 16],
                        "residual": [0.0, -0.125, 0.05, -1.2e-9], "fitted": [True, False, False, False]})
    table = residual_table(res, ["n"], "q", lambda n: f"{n} queue(s)", lambda q: f"depth {q}",
                           "queues")
    assert table.columns.tolist() == ["queues", "depth 8", "depth 16"]
    assert table.values.tolist() == [["1 queue(s)", "fit", "-12.5 %"],
                                     ["2 queue(s)", "+5.0 %", "-0.0 %"]]


def test_a_gpu_rate_above_the_line_rate_the_run_recorded_is_left_out_with_its_reason():
    exp = registry.get("cuda_iosize")
    row = {"xnvmeperf.mibs": 40_000.0, "xnvmeperf.link_gbs": 63.015,
           "dcgmi.rx_mean_bytes_per_s": 114.4e9, "dcgmi.rx_p95_bytes_per_s": 50e9}
    out = exp.derive(row)
    assert math.isnan(out["gpu_pcie_rx_mean_bytes_per_s"])
    assert out["gpu_pcie_rx_p95_bytes_per_s"] == 50e9 and out["mibs"] == 40_000.0
    assert out["implausible"] == (
        "gpu_pcie_rx_mean_bytes_per_s: 114.4 GB/s is above the 63.0 GB/s line rate of the "
        "recorded link (the GPU's link as the run recorded it, one direction): no traffic "
        "over it")
    # AiSIO's archives record no link: nothing to hold the rates to
    out = exp.derive({**row, "xnvmeperf.link_gbs": None})
    assert out["gpu_pcie_rx_mean_bytes_per_s"] == 114.4e9 and out["implausible"] == ""


def test_a_gpu_experiments_tidy_cache_follows_its_own_code_and_the_shared_modules_only():
    """The tidy cache's code digest (``code_files``): the experiment's package and the shared
    modules its class is built from; another experiment's package changes none of its rows."""
    shared = REPO_ROOT / "iolab" / "shared"
    files = registry.get("cuda_qdepth").code_files()
    assert {shared / "gpu_io.py", shared / "cuda_run.py"} <= set(files)
    assert {p.parent.name for p in files} == {"shared", "cuda_qdepth"}
    assert {p.parent.name for p in registry.get("pcie_saturation").code_files()} == \
        {"shared", "pcie_saturation"}
    assert shared / "cuda_run.py" not in registry.get("pcie_saturation").code_files()
