"""The example experiment of the architecture appendix, run end to end.

The example is the template of ``iolab new-experiment`` (``iolab/templates/experiment/``),
written under its own name, ``blocksize``, into a temporary folder outside the package: its
module, analysis, notebook and params files, registered through ``$IOLAB_EXPERIMENTS``. These
tests are the proof that the files the appendix lists are all a new experiment needs: the
registry finds it, its params validate, the CLI plans it, a real fio campaign runs and tidies,
and its notebook renders from the stored runs.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from iolab.cli import main
from iolab.core import registry
from iolab.execution.campaign import Campaign
from iolab.scaffold import new_experiment


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> Path:
    """A folder holding the example, written from the template as a new experiment is."""
    where = tmp_path_factory.mktemp("example")
    new_experiment("blocksize", where=where)
    return where


@pytest.fixture
def blocksize(example, monkeypatch):
    monkeypatch.syspath_prepend(str(example))
    monkeypatch.setenv(registry.EXTRA, "blocksize")
    # the kernel papermill starts inherits the environment
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(example),
                                                                    os.environ.get("PYTHONPATH")])))
    registry.reload()
    yield registry.get("blocksize")
    monkeypatch.delenv(registry.EXTRA)
    registry.reload()


def test_registered_from_outside_the_package(blocksize, capsys):
    assert "blocksize" in registry.names()
    assert main(["experiments"]) == 0
    out = capsys.readouterr().out
    assert "blocksize" in out and "hpc-server, kvm-2vcpu" in out


def test_a_module_that_is_not_there_is_named(monkeypatch):
    monkeypatch.setenv(registry.EXTRA, "no_such_module")
    registry.reload()
    try:
        with pytest.raises(Exception, match="IOLAB_EXPERIMENTS.*no_such_module"):
            registry.names()
    finally:
        monkeypatch.delenv(registry.EXTRA)
        registry.reload()


COPY_OF_SMT_THP = """
import copy
from iolab.experiments.smt_thp import EXPERIMENT as BUILT_IN
EXPERIMENT = copy.copy(BUILT_IN)
EXPERIMENT.title = "another design"
"""


@pytest.mark.parametrize("modules, first", [
    ("my_smt_thp", "iolab.experiments.smt_thp"),
    ("blocksize,blocksize_again", "blocksize"),
])
def test_an_outside_experiment_with_a_name_already_taken_is_refused(
        example, tmp_path, monkeypatch, capsys, modules, first):
    """An outside module whose experiment was named smt_thp silently replaced the built-in
    one: 'plan smt_thp' read its params, and 'run' would have stored its runs in the built-in
    campaign's store. Refused in one line naming both modules."""
    (tmp_path / "my_smt_thp.py").write_text(COPY_OF_SMT_THP)
    (tmp_path / "blocksize_again.py").write_text(
        "import copy\nfrom blocksize import EXPERIMENT as E\nEXPERIMENT = copy.copy(E)\n")
    monkeypatch.syspath_prepend(str(example))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(registry.EXTRA, modules)
    registry.reload()
    try:
        assert main(["experiments"]) == 2
        err = capsys.readouterr().err
        second = modules.split(",")[-1]
        name = "smt_thp" if first.endswith("smt_thp") else "blocksize"
        assert err == (f"iolab: error: $IOLAB_EXPERIMENTS: key '{second}': defines the "
                       f"experiment '{name}', which {first} defines already (allowed: a name "
                       "no other experiment has)\n")
    finally:
        monkeypatch.delenv(registry.EXTRA)
        registry.reload()
    assert registry.get("smt_thp").title != "another design"


def test_a_module_named_twice_registers_its_experiment_once(blocksize, monkeypatch):
    monkeypatch.setenv(registry.EXTRA, "blocksize,blocksize")
    registry.reload()
    assert registry.names().count("blocksize") == 1


def test_it_plans(blocksize, tmp_path, capsys):
    assert main(["plan", "blocksize", "--env", "hpc-server", "--data", str(tmp_path),
                 "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["points"] == 5 and doc["to_run"] == 25 and doc["stored"] == 0


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
def test_it_runs_tidies_and_renders(blocksize, tmp_path):
    from iolab.report.book import execute

    overrides = {"target_path": str(tmp_path / "blocksize.dat"), "target_size": "16M"}
    camp = Campaign(blocksize, "kvm-2vcpu", data_dir=tmp_path / "data", overrides=overrides)
    result = camp.run(progress=False)
    assert result.completed == 8 and not result.failed
    df = camp.tidy()
    assert len(df) == 8 and (df["mibs"] > 0).all() and (df["fio.mibs"] == df["mibs"]).all()
    out = tmp_path / "blocksize.ipynb"
    execute(blocksize.notebook, out, {"data_dir": str(camp.data_dir), "overrides": overrides})
    cells = json.loads(out.read_text())["cells"]
    outputs = [o for c in cells for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    glued = {o["metadata"]["scrapbook"]["name"]: o["data"] for o in outputs
             if "scrapbook" in o.get("metadata", {})}
    assert glued["n_runs"]["application/papermill.record/text/plain"] == "'8'"
    assert "application/papermill.record/image/png" in glued["fig_bandwidth"]


def test_the_example_analysis(blocksize):
    import pandas as pd
    from blocksize.analysis import saturation
    summary = pd.DataFrame({"metric": ["mibs"] * 3, "bs": [4096, 65536, 16384],
                            "mean": [10.0, 100.0, 95.0]})
    assert saturation(summary) == 16384 and saturation(summary.iloc[0:0]) is None
