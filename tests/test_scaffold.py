"""``iolab new-experiment`` (iolab.scaffold): a new experiment that works as written.

A scaffolded experiment outside the package is registered, planned, run with fio, tidied and
rendered, and nothing else of the repository changes; in the package (a temporary copy of its
_toc.yml stands for the repository) it writes exactly the files book/architecture.md lists.
Bad names and existing files are refused before anything is written.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from iolab import scaffold
from iolab.core import registry
from iolab.errors import InputError
from iolab.paths import REPO_ROOT
from iolab.safefiles import NotOurs
from iolab.scaffold import new_experiment, template_environments

NAME = "disk_probe"


@pytest.fixture
def repo(tmp_path) -> Path:
    """A stand-in for the repository: its _toc.yml, and nothing else yet."""
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy2(REPO_ROOT / "_toc.yml", root / "_toc.yml")
    return root


def git_status() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"],
                          cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout


def listed_in_the_book() -> set[str]:
    """The files book/architecture.md says `iolab new-experiment <name>` writes."""
    # whitespace as one space: where the prose wraps must not move the end of the list
    doc = re.sub(r"\s+", " ", (REPO_ROOT / "book" / "architecture.md").read_text())
    section = doc.split("## Adding an experiment: the files", 1)[1].split("Its author then")[0]
    return {p for p in re.findall(r"`([^`\s]+)`", section)
            if "<name>" in p or p.endswith(".yml")}


def test_the_books_list_is_what_it_writes(repo):
    written = new_experiment(NAME, repo=repo)
    assert {str(p.relative_to(repo)).replace(NAME, "<name>") for p in written} \
        == listed_in_the_book()


def test_in_the_package_it_keeps_the_defaults_and_its_chapter_is_in_the_toc(repo):
    before = (repo / "_toc.yml").read_text()
    new_experiment(NAME, repo=repo)
    module = (repo / "iolab" / "experiments" / NAME / "__init__.py").read_text()
    compile(module, "__init__.py", "exec")
    assert "notebook_dir" not in module and "params_dir" not in module
    assert 'chapter = "experiments/disk_probe"' in module and "class DiskProbe(" in module
    notebook = (repo / "notebooks" / f"{NAME}.ipynb").read_text()
    assert 'page(experiment, \\"analysis\\")' in notebook and "iolab.experiments" not in notebook
    assert "(sec-experiments-disk-probe)=" in notebook
    toc = yaml.safe_load((repo / "_toc.yml").read_text())
    index = next(e for e in toc["chapters"] if e["file"] == "experiments/index")
    assert index["sections"][-1] == {"file": "experiments/disk_probe",
                                     "sections": [{"glob": "experiments/disk_probe/*"}]}
    lines = (repo / "_toc.yml").read_text().splitlines()
    at = lines.index("      - file: experiments/disk_probe")
    assert lines[:at] + lines[at + 3:] == before.splitlines(), \
        "only the chapter's entry is added; comments and order stay"


@pytest.mark.parametrize("name, message", [
    ("DiskProbe", "'DiskProbe' is not a usable experiment name"),
    ("1probe", "'1probe' is not a usable experiment name"),
    ("disk-probe", "'disk-probe' is not a usable experiment name"),
    ("class", "'class' is not a usable experiment name"),
    ("smt_thp", "'smt_thp' is an experiment already"),
    ("json", "'json' is the name of a module Python finds already"),
    ("path", "'path' would name its class Path, which its module imports"),
])
def test_a_bad_name_is_refused_and_nothing_is_written(tmp_path, name, message):
    with pytest.raises(InputError, match="key 'experiment'.*allowed: ") as err:
        new_experiment(name, where=tmp_path)
    assert message in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_an_existing_file_is_never_replaced(repo):
    mine = repo / "notebooks" / "params" / "hpc-server" / f"{NAME}.yaml"
    mine.parent.mkdir(parents=True)
    mine.write_text("# mine\n")
    toc = (repo / "_toc.yml").read_text()
    with pytest.raises(InputError, match=rf"{mine}: key 'experiment': exists already"):
        new_experiment(NAME, repo=repo)
    assert mine.read_text() == "# mine\n" and (repo / "_toc.yml").read_text() == toc
    assert not (repo / "iolab").exists() and not (repo / "notebooks" / f"{NAME}.ipynb").exists()
    new_experiment("probe_two", where=repo / "elsewhere")
    with pytest.raises(InputError, match="probe_two: key 'experiment': exists already"):
        new_experiment("probe_two", where=repo / "elsewhere")


def test_a_linked_environment_folder_is_never_written_through(repo, tmp_path):
    """A params folder of an environment that was a link had the new params file written
    wherever it pointed."""
    victim = tmp_path / "victim"
    victim.mkdir()
    linked = repo / "notebooks" / "params" / "hpc-server"
    linked.parent.mkdir(parents=True)
    linked.symlink_to(victim)
    toc = (repo / "_toc.yml").read_text()
    with pytest.raises(InputError, match=rf"{linked}: is a symbolic link to {victim}.*never "
                                         "followed"):
        new_experiment(NAME, repo=repo)
    assert list(victim.iterdir()) == [] and (repo / "_toc.yml").read_text() == toc
    assert not (repo / "iolab").exists() and not (repo / "notebooks" / f"{NAME}.ipynb").exists()


@pytest.mark.parametrize("through_a_link", [False, True])
def test_where_another_user_decides_is_refused_before_anything_is_written(tmp_path,
                                                                          through_a_link):
    """--where a folder others may write into (without the sticky bit), or a link to one:
    another user could put a link in place of the new folder and take the files elsewhere."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    where = shared
    if through_a_link:
        where = tmp_path / "link"
        where.symlink_to(shared)
    with pytest.raises(NotOurs) as err:
        new_experiment(NAME, where=where)
    message = str(err.value)
    assert message.startswith(f"--where: {where}: {where}, a folder of its path, ")
    assert "\n" not in message
    assert "is writable by every user (mode 0777) without the sticky bit" in message
    assert list(shared.iterdir()) == []


@pytest.mark.parametrize("inside", ["raw", "raw/smt_thp", "", "git", "state"])
def test_where_among_the_files_iolab_or_git_keep_is_refused(tmp_path, monkeypatch, inside):
    """Probe 11, F3: --where $IOLAB_DATA/raw (or a campaign's experiment folder in it) wrote
    the module, notebooks and params into the store, where 'iolab status' then listed them
    as campaigns; as an output is, a new experiment is refused inside a data directory, a
    .git folder or iolab's state folder."""
    data = tmp_path / "data"
    (data / "raw" / "smt_thp").mkdir(parents=True)
    (tmp_path / "checkout" / ".git").mkdir(parents=True)
    (tmp_path / "state").mkdir(mode=0o700)
    monkeypatch.setenv("IOLAB_DATA", str(data))
    monkeypatch.setenv("IOLAB_STATE_DIR", str(tmp_path / "state"))
    where = {"git": tmp_path / "checkout" / ".git",
             "state": tmp_path / "state"}.get(inside, data / inside)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with pytest.raises(NotOurs) as err:
        new_experiment(NAME, where=where)
    message = str(err.value)
    assert message.startswith(f"--where: {where}: {where / NAME} is ") and "\n" not in message
    assert {"git": "inside git's own folder", "state": "inside iolab's state folder"}.get(
        inside, f"inside the data directory {data}") in message
    assert "never written among the files iolab or git keep" in message
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


SIGTERM_MID_WRITE = """
import os, signal, sys
from iolab import scaffold
from iolab.cli import main
refuse, calls = scaffold.refuse_linked, []
def refuse_then_stop(*args, **kwargs):
    calls.append(args[0])
    if len(calls) == 6:  # some files written, as kill or a service manager would
        os.kill(os.getpid(), signal.SIGTERM)
    return refuse(*args, **kwargs)
scaffold.refuse_linked = refuse_then_stop
sys.exit(main(["new-experiment", "disk_probe", "--where", sys.argv[1]]))
"""


def test_a_new_experiment_stopped_mid_write_leaves_none_of_its_files(tmp_path):
    """Probe 11, E1's pattern: the files made are removed on an exception, which SIGTERM's
    default action never raises: a stop signal mid-write left half an experiment."""
    where = tmp_path / "where"
    where.mkdir()
    done = subprocess.run([sys.executable, "-c", SIGTERM_MID_WRITE, str(where)],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert done.returncode == 128 + 15, (done.returncode, done.stderr)
    assert list(where.iterdir()) == [], "files of the new experiment were left"


SIGTERM_AS_A_FILE_IS_MADE = """
import builtins, os, signal, sys
from iolab import scaffold
from iolab.cli import main
def stopping(real):
    def made_then_stopped(path, *args, **kwargs):
        made = real(path, *args, **kwargs)
        if "params" in str(path) and str(path).endswith(".yaml"):
            # the signal comes as the open returns: the file is made, nothing noted it yet
            os.kill(os.getpid(), signal.SIGTERM)
        return made
    return made_then_stopped
scaffold.open = stopping(builtins.open)
os.open = stopping(os.open)
sys.exit(main(["new-experiment", "disk_probe", "--where", sys.argv[1]]))
"""


def test_a_stop_as_a_file_is_made_leaves_none_of_its_files_and_is_what_is_said(tmp_path):
    """Probe 12, X4: SIGTERM as new-experiment's open of its params file returned (the file
    made, not yet noted as made) left five files, and the clean-up's rmdir of their folder
    failed: 'Directory not empty', exit 2, instead of the stop. Making a file (or a folder)
    and noting it is one step a stop signal does not split."""
    where = tmp_path / "where"
    where.mkdir()
    done = subprocess.run([sys.executable, "-c", SIGTERM_AS_A_FILE_IS_MADE, str(where)],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert done.returncode == 128 + 15, (done.returncode, done.stderr)
    assert done.stderr == "iolab: interrupted\n"
    assert list(where.iterdir()) == [], "files of the new experiment were left"


def test_what_cannot_be_removed_again_is_noted_and_the_error_still_said(tmp_path,
                                                                        monkeypatch):
    """The clean-up of a failed write goes on past what it cannot remove, and the error that
    ended the write is the one raised, with the leftover as a note."""
    where = tmp_path / "where"
    where.mkdir()
    real = scaffold._create

    def create_then_fail(path, made):
        fd = real(path, made)
        if path.suffix == ".ipynb":
            (path.parent / "theirs.txt").write_text("someone else's\n")
            os.close(fd)
            raise InputError(path, None, "a test's failure")
        return fd

    monkeypatch.setattr(scaffold, "_create", create_then_fail)
    with pytest.raises(InputError, match="a test's failure") as info:
        new_experiment(NAME, where=where)
    assert any("could not be removed again" in note for note in info.value.__notes__)
    assert sorted(p.relative_to(where).as_posix() for p in where.rglob("*")) == [
        NAME, f"{NAME}/notebooks", f"{NAME}/notebooks/theirs.txt"]


def test_one_environment_of_its_own(tmp_path):
    written = new_experiment(NAME, where=tmp_path, environment="h100-pcie5")
    params = [p for p in written if p.suffix == ".yaml" and p.parent.parent.name == "params"]
    assert [p.parent.name for p in params] == ["h100-pcie5"]
    assert "h100-pcie5" not in template_environments()
    with pytest.raises(InputError, match="key 'environment'"):
        new_experiment("probe_two", where=tmp_path, environment="../x")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_new_experiment_plans_runs_tidies_and_renders(tmp_path, monkeypatch, capsys):
    from iolab.execution.campaign import Campaign
    from iolab.cli import main
    from iolab.report.book import execute

    before = git_status()
    assert main(["new-experiment", NAME, "--where", str(tmp_path / "lab")]) == 0
    monkeypatch.syspath_prepend(str(tmp_path / "lab"))
    monkeypatch.setenv(registry.EXTRA, NAME)
    # the kernel papermill starts inherits the environment
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        filter(None, [str(tmp_path / "lab"), os.environ.get("PYTHONPATH")])))
    registry.reload()
    try:
        exp = registry.get(NAME)
        # its params schema, published as the package's own are, takes its params file
        monkeypatch.setattr(scaffold, "SCHEMA_DIR", tmp_path)
        schema = json.loads(scaffold.publish_params_schema(NAME).read_text())
        params = yaml.safe_load((tmp_path / "lab" / NAME / "notebooks" / "params" / "kvm-2vcpu"
                                 / f"{NAME}.yaml").read_text())
        jsonschema.validate(params, schema)
        capsys.readouterr()
        assert main(["plan", NAME, "--env", "kvm-2vcpu", "--data", str(tmp_path / "data"),
                     "--format", "json"]) == 0
        assert json.loads(capsys.readouterr().out)["to_run"] == 8
        overrides = {"target_path": str(tmp_path / "probe.dat"), "target_size": "16M"}
        camp = Campaign(exp, "kvm-2vcpu", data_dir=tmp_path / "data", overrides=overrides)
        result = camp.run(progress=False)
        assert result.completed == 8 and not result.failed
        df = camp.tidy()
        assert len(df) == 8 and (df["mibs"] > 0).all()
        out = tmp_path / f"{NAME}.ipynb"
        execute(exp.notebook, out, {"data_dir": str(camp.data_dir), "overrides": overrides})
    finally:
        monkeypatch.delenv(registry.EXTRA)
        registry.reload()
    outputs = [o for c in json.loads(out.read_text())["cells"] for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    glued = {o["metadata"]["scrapbook"]["name"] for o in outputs
             if "scrapbook" in o.get("metadata", {})}
    assert {"n_runs", "saturation_bs", "fig_bandwidth", "claims"} <= glued
    claims = next(o for c in json.loads(out.read_text())["cells"] for o in c.get("outputs", [])
                  if o.get("metadata", {}).get("scrapbook", {}).get("name") == "claims")
    # the template's one claim gets a verdict from the eight runs (which one is the machine's)
    assert "The source's one claim is " in json.dumps(claims)
    assert git_status() == before, "the scaffold wrote nothing into the repository"


def test_a_link_at_the_params_schemas_name_is_refused_and_its_target_kept(repo, tmp_path):
    """new-experiment had written the published params schema through a link at its name,
    over the file the link named."""
    victim = tmp_path / "victim"
    victim.write_text("victim\n")
    schema = repo / "iolab" / "schemas" / f"params.{NAME}.schema.json"
    schema.parent.mkdir(parents=True)
    schema.symlink_to(victim)
    toc = (repo / "_toc.yml").read_text()
    with pytest.raises(InputError, match=rf"{schema}: key 'experiment': exists already"):
        new_experiment(NAME, repo=repo)
    assert victim.read_text() == "victim\n" and (repo / "_toc.yml").read_text() == toc
    assert not (repo / "iolab" / "experiments").exists()


def test_the_params_schema_is_written_only_where_nothing_is(tmp_path, monkeypatch):
    import iolab.scaffold as scaffold

    victim = tmp_path / "victim"
    victim.write_text("victim\n")
    monkeypatch.setattr(scaffold, "SCHEMA_DIR", tmp_path)
    (tmp_path / "params.smt_thp.schema.json").symlink_to(victim)
    with pytest.raises(InputError, match="exists already"):
        scaffold.publish_params_schema("smt_thp")
    assert victim.read_text() == "victim\n"


def test_a_link_at_the_tocs_name_is_refused_and_its_target_never_copied(repo, tmp_path):
    """new-experiment followed a link at _toc.yml, read its 0600 target outside the checkout
    and wrote it back into the checkout as a new world-readable regular file."""
    outside = tmp_path / "outside-toc.yml"
    outside.write_text((repo / "_toc.yml").read_text() + "# SECRET token=hunter2\n")
    outside.chmod(0o600)
    (repo / "_toc.yml").unlink()
    (repo / "_toc.yml").symlink_to(outside)
    with pytest.raises(InputError, match=r"_toc.yml.*symbolic link"):
        new_experiment(NAME, repo=repo)
    assert (repo / "_toc.yml").is_symlink() and "SECRET" in outside.read_text()
    assert not (repo / "iolab" / "experiments").exists()


def test_a_toc_larger_than_any_book_is_refused_before_it_is_read(repo):
    """A 3 GB _toc.yml was read whole: MemoryError, an internal error (rc 70)."""
    toc = repo / "_toc.yml"
    with open(toc, "r+b") as fh:
        fh.truncate(3 << 30)  # sparse: no disk used
    with pytest.raises(InputError, match=r"_toc.yml.*3,221,225,472 bytes"):
        new_experiment(NAME, repo=repo)
    assert toc.stat().st_size == 3 << 30 and not (repo / "iolab" / "experiments").exists()


def test_the_toc_keeps_its_permissions_when_the_chapter_is_added(repo):
    toc = repo / "_toc.yml"
    toc.chmod(0o640)
    new_experiment(NAME, repo=repo)
    assert toc.stat().st_mode & 0o777 == 0o640 and f"glob: experiments/{NAME}/*" in toc.read_text()
