"""The IRQ affinity experiment: what a point runs, what blocks it, its scratch file, its tidy
rows and analysis (on the committed runs of this machine class), the lab server's plan, and a
real run where the reader can be built."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from iolab.core.registry import get
from iolab.execution.campaign import Campaign
from iolab.experiments.irq_affinity import analysis as an
from iolab.host.irqs import IrqCpus
from iolab.host.scratch import ScratchFile
from iolab.paths import default_data_dir

EXP = get("irq_affinity")
SETTINGS = {"tool": "uring_reader", "device": "vda", "target_path": "/var/tmp/x.dat",
            "poll_queues": None, "stop_irqbalance": False, "irq_cpus": None,
            "target_size": "1M", "runtime_s": 3, "ramp_s": 1, "cpus_per_side": 1,
            "trace": "optional", "cpu_pool": "all"}
POINT = {"placement": "other_cores", "taskrun": "coop", "completion": "interrupt", "bs": 4096,
         "qdepth": 32}
STORED = default_data_dir() / "raw" / "irq_affinity" / "kvm-2vcpu"


def test_a_point_is_the_reader_with_its_ring_flags_and_cpus_by_side():
    options = EXP.invocation(SETTINGS, POINT).options
    assert options["coop_taskrun"] is True and options["iopoll"] is False and options["direct"]
    assert options["cpus"] == IrqCpus("vda", "other_cores", 1, "all")
    defer = EXP.invocation(SETTINGS, {**POINT, "taskrun": "defer", "completion": "polled"}).options
    assert defer["single_issuer"] and defer["defer_taskrun"] and defer["iopoll"]
    # the identity names the side, never CPU ids, so it is the same on any host
    ident = EXP.identity("kvm-2vcpu", SETTINGS, POINT)
    assert ident["invocation"]["options"]["cpus"] == {"device": "vda", "side": "other_cores",
                                                      "count": 1, "pool": "all"}
    assert ident["invocation"]["reader_version"] == "2"


def test_polled_points_need_poll_queues_and_a_missing_device_is_named(monkeypatch):
    import iolab.experiments.irq_affinity as module

    topo = [{"cpu": 0, "core": 0, "package": 0}, {"cpu": 1, "core": 1, "package": 0}]
    polled = {**POINT, "completion": "polled"}
    monkeypatch.setattr(IrqCpus, "cpus", lambda self, root, cpus: [0])
    monkeypatch.setattr(module, "_has_poll_queues", lambda device: False)
    assert EXP.host_block(SETTINGS, polled, topo).startswith(
        "polled completions need poll queues, and device vda has none")
    monkeypatch.setattr(module, "_has_poll_queues", lambda device: True)
    assert EXP.host_block(SETTINGS, polled, topo) is None
    monkeypatch.undo()
    message = EXP.host_block({**SETTINGS, "device": "nvme9"}, POINT, topo)
    assert message.startswith("key 'device': no block device or NVMe controller 'nvme9'")


def test_the_target_file_is_a_scratch_file_and_a_device_is_not(tmp_path):
    settings = {**SETTINGS, "target_path": str(tmp_path / "t.dat"), "target_size": "2M"}
    assert EXP.scratch_files(settings, [POINT]) == [
        ScratchFile("target_path", tmp_path / "t.dat", 2 << 20)]
    assert EXP.scratch_files({**settings, "target_path": "/dev/nvme0n1"}, [POINT]) == []


@pytest.fixture(scope="module")
def stored():
    if not STORED.exists():
        pytest.skip(f"no committed campaign at {STORED}")
    return Campaign("irq_affinity", "kvm-2vcpu").tidy()


def test_the_committed_runs_tidy_with_layout_and_per_read_counts(stored):
    assert len(stored) >= 12 and stored.groupby(EXP.spec_variables()
                                                 if hasattr(EXP, "spec_variables")
                                                 else list(EXP.variables)).size().min() >= 3
    assert (stored["irqtrace.traced"] == True).all()  # noqa: E712 - every run has its trace
    assert set(stored["layout.irq_cpus"].astype(str)) and set(stored["layout.other_cpus"].astype(str))
    # the per-read metrics are the bpftrace totals over the reader's I/Os
    row = stored.iloc[0]
    assert row["irqs_per_io"] == pytest.approx(row["irqtrace.irqs_total"] / row["uring_reader.ios"])
    assert np.isfinite(stored["iops"]).all() and (stored["iops"] > 0).all()
    # the run's CPU is on the side its point names
    for _, r in stored.iterrows():
        side = r["layout.irq_cpus"] if r["placement"] == "irq_cores" else r["layout.other_cpus"]
        assert str(r["run.cpus"]) in str(side).split(",")


def test_the_analysis_of_the_committed_runs(stored):
    effects = an.placement_effects(stored, "iops", 0.95)
    assert set(effects["taskrun"]) == {"default", "coop", "defer"}
    assert (effects["ci_low"] <= effects["pct"]).all() and (effects["pct"] <= effects["ci_high"]).all()
    long = an.per_cpu(stored, "irqtrace.irqs")
    # every (placement, mode) has a value for every CPU seen, zeros included
    assert len(long) == long[["placement", "taskrun"]].drop_duplicates().shape[0] * \
        long["cpu"].nunique()


def test_the_reader_s_interruptions_count_only_its_own_cpus():
    run = {"uring_reader.ios": 1000, "run.cpus": "0,2", "irqtrace.irqs": '{"1": 50, "2": 10}',
           "irqtrace.call_ipis": '{"0": 30, "1": 7}', "irqtrace.resched_ipis": '{"2": 5}'}
    untraced = {**run, "irqtrace.irqs": None}
    got = an.reader_interruptions(pd.DataFrame([run, untraced]))
    assert got.iloc[0] == pytest.approx((10 + 30 + 5) / 1000)  # CPU 1's 57 events are not its
    assert np.isnan(got.iloc[1])
    assert an.reader_interruptions(pd.DataFrame()).empty


def test_the_committed_runs_explain_the_defer_taskrun_effect(stored):
    """DEFER_TASKRUN's placement effect comes with twice the interrupts per read and with
    half the interruptions of the reader's CPU beside the interrupt CPUs; the deferred task
    work is counted by its own tracepoint (pinned on the committed runs)."""
    found = {f.id: f for f in an.findings(stored)}
    assert found["placement_defer_iops"].direction == "up"
    assert found["defer_irqs_on"].estimate == pytest.approx(1.94, abs=0.01)
    assert found["reader_load_defer"].estimate == pytest.approx(-51.1, abs=0.1)
    assert found["reader_load_defer"].direction == "down"
    assert found["reader_load_default"].direction == "up"
    assert found["reader_load_coop"].direction == "none"
    defer = stored[stored["taskrun"] == "defer"]
    assert (defer["task_run_per_io"] == 0).all() and (defer["local_run_per_io"] > 0.09).all()
    assert (stored[stored["taskrun"] != "defer"]["local_run_per_io"] == 0).all()


def test_the_committed_iops_comparisons_are_judged_as_one_family(stored):
    """Seven comparisons of mean IOPS; after Holm's correction only the placement effect of
    DEFER_TASKRUN stays significant (pinned on the committed runs)."""
    family = an.iops_family(an.interrupt_driven(stored), 0.95)
    assert len(family) == 7
    assert (family["p_holm"] >= family["p"]).all()
    kept = family[family["verdict"] == "significant"]
    assert kept["comparison"].tolist() == ["beside vs on the interrupt CPUs, DEFER_TASKRUN"]
    assert an.family_text(family).startswith(
        "after Holm's correction for testing the 7 comparisons of mean IOPS together, 1 "
        "remains significant: beside vs on the interrupt CPUs, DEFER_TASKRUN (+10.1 %")
    # with this campaign's noise floor (pinned: 4.6 % for two points of three runs)
    from iolab.report.chapter import Chapter

    floor = Chapter("irq_affinity", "kvm-2vcpu", mode="replay").noise_floor()
    assert floor.floor == pytest.approx(0.046, abs=0.001) and floor.n == 3
    from iolab.analysis import noise

    below = sum(noise.inside(r.pct / 100, floor.floor) for r in family.itertuples()
                if r.verdict == "not significant")
    assert 0 < below < 6
    text = an.family_text(family, floor.floor)
    assert text.endswith(f"; of the other 6, {below} {'is' if below == 1 else 'are'} smaller "
                         "than this campaign's noise floor of 4.6 %: not distinguishable on "
                         "this machine")


def test_per_cpu_counts_absent_cpus_as_zero_and_verdicts_read_intervals():
    rows = pd.DataFrame([
        {"placement": "irq_cores", "taskrun": "default", "run.id": "a", "uring_reader.ios": 100,
         "c": json.dumps({"1": 10})},
        {"placement": "irq_cores", "taskrun": "default", "run.id": "b", "uring_reader.ios": 100,
         "c": json.dumps({"0": 4, "1": 20})}])
    long = an.per_cpu(rows, "c")
    assert long.set_index("cpu")["value"].to_dict() == pytest.approx({0: 0.02, 1: 0.15})
    assert an.verdict({"ci_low": 1, "ci_high": 3}) == "higher"
    assert an.verdict({"ci_low": -3, "ci_high": -1}) == "lower"
    assert an.verdict({"ci_low": -1, "ci_high": 1}) == "no clear change"
    assert an.seed_share_prediction(0.165) == pytest.approx(0.1976, abs=1e-4)


def test_the_lab_server_plan_describes_the_notes_set_up(tmp_path):
    camp = Campaign("irq_affinity", "hpc-server", data_dir=tmp_path)
    s = camp.spec
    assert (s.settings["device"], s.settings["cpu_pool"], s.settings["cpus_per_side"]) == \
        ("nvme2", "10-13", 2)
    assert (s.base["bs"], s.base["qdepth"], s.repetitions) == (512, 64, 5)
    plan = camp.plan()
    assert len(plan.points()) == 10 and plan.counts()["blocked"] + plan.counts()["to run"] == 50


CAN_RUN = shutil.which("cc") is not None and Path("/usr/include/liburing.h").exists() \
    and Path("/sys/block/vda").exists()


@pytest.mark.slow
@pytest.mark.skipif(not CAN_RUN, reason="needs a C compiler, liburing and the virtio disk vda")
def test_a_real_run_stores_the_layout_and_counts(tmp_path):
    camp = Campaign("irq_affinity", "kvm-2vcpu", data_dir=tmp_path / "data", overrides=[
        f"target_path={tmp_path / 't.dat'}", "target_size=16M", "runtime_s=1", "ramp_s=0",
        "grids={g: {vary: {placement: [other_cores]}}}", "repetitions=1"])
    result = camp.run(progress=False)
    assert result.completed == 1 and not result.failed, result.messages
    [run] = camp.store.complete_runs()
    layout = json.loads((run.path / "irqs.json").read_text())
    assert layout["device"] == "vda" and run.manifest.cpus == layout["other_cpus"][:1]
    row = camp.tidy().iloc[0]
    assert row["uring_reader.ios"] > 0 and row["interrupts.device_irqs_total"] > 0


def test_the_lab_server_campaign_reloads_nvme_and_stops_irqbalance(monkeypatch):
    import iolab.experiments.irq_affinity as module

    settings = {**SETTINGS, "poll_queues": 20, "stop_irqbalance": True}
    assert EXP.campaign_knobs(settings) == {"irqbalance": "stopped", "nvme_poll_queues": 20}
    assert EXP.campaign_knobs({**SETTINGS, "poll_queues": None, "stop_irqbalance": False}) == {}

    class Refusing:
        def available(self):
            return False, "not here"

    monkeypatch.setattr(module, "make_knobs", lambda: {"irqbalance": Refusing(),
                                                       "nvme_poll_queues": Refusing()})
    reason = EXP.host_block({**settings, "device": "nvme9"}, POINT,
                            [{"cpu": 0, "core": 0, "package": 0}])
    # every reason at once: the knobs this host cannot control, and the missing device
    assert reason.split("; ")[:2] == [
        "needs knob irqbalance=stopped for the campaign, which this host cannot control (not here)",
        "needs knob nvme_poll_queues=20 for the campaign, which this host cannot control "
        "(not here)"]
    assert "no block device or NVMe controller 'nvme9'" in reason


def test_the_campaign_s_system_settings_are_part_of_every_run_s_identity():
    plain = EXP.identity("kvm-2vcpu", SETTINGS, POINT)
    assert "campaign" not in plain  # the committed runs keep their ids
    moved = EXP.identity("kvm-2vcpu", {**SETTINGS, "irq_cpus": [0]}, POINT)
    reloaded = EXP.identity("kvm-2vcpu", {**SETTINGS, "poll_queues": 20,
                                          "stop_irqbalance": True}, POINT)
    assert moved["campaign"] == {"irq_cpus": [0]}
    assert reloaded["campaign"] == {"poll_queues": 20, "stop_irqbalance": True}
    knobs = EXP.campaign_knobs({**SETTINGS, "device": "nvme9", "irq_cpus": [11, 13]})
    assert knobs == {"irq_affinity": {"irqs": "^nvme9 is not on this host$", "cpus": [11, 13]}}
