"""The CLI: verbs print what the library computes and turn bad input into exit code 2, and
print recorded strings (a tool's stderr, a host's name) with their control characters
escaped."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import committed_environments, scratch_dir
from test_rounds import ENV, campaigns, fake_fio  # noqa: F401  (the fixture)

from iolab import paths
from iolab.cli import campaign as cli_campaign
from iolab.cli import main
from iolab.core.store import Store
from iolab.paths import REPO_ROOT, default_data_dir
from iolab.errors import InputError


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def test_plan_shows_counts_eta_and_where_the_params_come_from(tmp_path):
    code, out, _ = run(["plan", "smt_thp", "--env", "hpc-server", "--data", str(tmp_path)])
    assert code == 0
    assert "30 points (0 excluded) x 5 repetitions" in out  # the layout grid adds 2
    assert "time for the runs to do" in out
    # the checkout's own paths as the repository names them: a book built anywhere reads alike
    assert "params: notebooks/params/hpc-server/smt_thp.yaml" in out
    assert "scratch: /mnt/nvme0/iolab/smt_thp.dat" in out
    # the order design: a fixed count of repetitions runs point by point unless asked
    assert "order: sequential, each point's runs back to back" in out
    code, out, _ = run(["plan", "smt_thp", "--env", "hpc-server", "--data", str(tmp_path),
                        "--set", "order=interleaved"])
    assert code == 0 and "order: interleaved, rounds of one run per open point" in out


def test_plan_json_has_the_counts(tmp_path):
    code, out, _ = run(["plan", "smt_thp", "--env", "kvm-2vcpu", "--data", str(tmp_path),
                        "--format", "json", "--set", "repetitions=2", "--where", "engine=psync",
                        "--limit", "3", "--set", f"target_path={scratch_dir() / 't.dat'}"])
    doc = json.loads(out)
    assert code == 0 and doc["stored"] == 0 and doc["limit"] == 3 and doc["selected"] == 3
    assert doc["overrides"] == {"repetitions": 2, "target_path": str(scratch_dir() / "t.dat")}
    assert doc["where"] == {"engine": ["psync"]}
    assert doc["to_run"] + doc["blocked"] == 14 * 2 and doc["eta_s"] > 0
    assert {p["name"] for p in doc["programs"]} >= {"fio"}


def test_plan_json_with_its_runs_is_the_json_of_the_whole_object(tmp_path):
    """The run list is written row by row (a plan's runs are never all in memory); what comes
    out is what json.dumps gives for the plan with its list."""
    from iolab.cli.campaign import _print_json

    doc = {"experiment": "x", "n": [1, 2], "nested": {"a": None}}
    rows = [{"rep": 0, "run_id": "a-r0", "why": "é"}, {"rep": 1, "run_id": "a-r1", "why": ""}]
    for run_list in (rows, [], None):
        out = io.StringIO()
        with redirect_stdout(out):
            _print_json(doc, None if run_list is None else iter(run_list))
        whole = doc if run_list is None else {**doc, "run_list": run_list}
        assert out.getvalue() == json.dumps(whole, indent=2) + "\n"
    code, out, _ = run(["plan", "smt_thp", "--env", "kvm-2vcpu", "--data", str(tmp_path),
                        "--format", "json", "--runs", "--limit", "2"])
    doc = json.loads(out)
    # 28 points, and the layout grid's 2 fallocated points that kvm-2vcpu excludes
    assert code == 0 and len(doc["run_list"]) == doc["runs"] == 28 * 3 + 2 * 3
    assert [r["rep"] for r in doc["run_list"][:4]] == [0, 1, 2, 0]


def test_plan_table_has_one_line_per_run(tmp_path):
    code, out, _ = run(["plan", "smt_thp", "--env", "kvm-2vcpu", "--data", str(tmp_path),
                        "--format", "table"])
    lines = [line for line in out.splitlines() if "\t" in line]
    assert code == 0 and len(lines) == 1 + 28 * 3 + 2 * 3  # with the 2 excluded points
    assert lines[0].startswith("engine\tconcurrency")


@pytest.mark.parametrize("experiment", ["smt_thp", "cpu_search"])
def test_every_stored_run_folder_is_planned_as_stored(experiment):
    """The committed campaigns (version-1 or migrated manifests) all count as stored."""
    runs = default_data_dir() / "raw" / experiment / "kvm-2vcpu" / "runs"
    if not runs.exists():
        pytest.skip(f"no committed {experiment}/kvm-2vcpu campaign")
    folders = [d for d in runs.iterdir() if d.is_dir() and not d.name.startswith(".")]
    code, out, _ = run(["plan", experiment, "--env", "kvm-2vcpu", "--format", "json"])
    assert code == 0 and json.loads(out)["stored"] == len(folders)


def test_changing_analysis_keys_leaves_stored_unchanged(tmp_path, monkeypatch):
    """Every analysis key changed in a copy of the params: the same runs count as stored."""
    params = tmp_path / "params"
    # the committed environments only: a user may have made a 'mybox' already
    shutil.copytree(paths.PARAMS_DIR, params, ignore=lambda folder, names: [
        n for n in names if Path(folder) == paths.PARAMS_DIR
        and n not in committed_environments()])
    for experiment in ("smt_thp", "cpu_search"):
        before = json.loads(run(["plan", experiment, "--env", "kvm-2vcpu", "--format", "json"])[1])
        path = params / "kvm-2vcpu" / f"{experiment}.yaml"
        doc = yaml.safe_load(path.read_text())
        doc["analysis"] = {**doc.get("analysis", {}), "confidence": 0.8, "palette": "deep",
                           "figure_width": 7}
        path.write_text(yaml.safe_dump(doc))
        from iolab.core.registry import get
        monkeypatch.setattr(type(get(experiment)), "params_dir", params)
        after = json.loads(run(["plan", experiment, "--env", "kvm-2vcpu", "--format", "json"])[1])
        assert after["stored"] == before["stored"] and after["to_run"] == before["to_run"]


def test_a_misspelt_key_is_named(tmp_path):
    code, _, err = run(["plan", "smt_thp", "--env", "kvm-2vcpu", "--data", str(tmp_path),
                        "--set", "runtime=3"])
    assert code == 2 and "runtime" in err and "runtime_s" in err


def test_unknown_environment_is_a_clear_error(tmp_path):
    code, _, err = run(["plan", "smt_thp", "--env", "nowhere", "--data", str(tmp_path)])
    assert code == 2 and "nowhere/smt_thp.yaml" in err and "allowed:" in err and "kvm-2vcpu" in err
    assert "iolab env new nowhere" in err


def test_unknown_experiment_is_a_clear_error(tmp_path):
    code, _, err = run(["plan", "nope", "--env", "kvm-2vcpu", "--data", str(tmp_path)])
    assert code == 2 and "nope" in err and "smt_thp" in err


def test_env_help_lists_the_environments():
    # wide enough that argparse does not wrap a name at its hyphen
    proc = subprocess.run([sys.executable, "-m", "iolab", "plan", "--help"], capture_output=True,
                          text=True, cwd=REPO_ROOT, env={**os.environ, "COLUMNS": "400"})
    assert "kvm-2vcpu" in proc.stdout and "hpc-server" in proc.stdout and "env new" in proc.stdout


def test_experiments_lists_the_registry():
    code, out, _ = run(["experiments", "--format", "json"])
    rows = {r["name"]: r for r in json.loads(out)}
    assert code == 0 and rows["smt_thp"]["label"] == "sec-experiments-smt-thp"
    # the committed environments, in order, and any a user made (iolab env new) among them
    listed = rows["cpu_search"]["environments"]
    assert [e for e in listed if e in committed_environments()] == [
        "epyc-2vcpu-v782", "epyc-2vcpu-v782-adaptive", "epyc-2vcpu-v782-grid", "hpc-server",
        "kvm-2vcpu", "xeon-v657"]


def test_env_new_copies_a_template(tmp_path, monkeypatch):
    params = tmp_path / "params"
    # the committed environments only: a user may have made a 'mybox' already
    shutil.copytree(paths.PARAMS_DIR, params, ignore=lambda folder, names: [
        n for n in names if Path(folder) == paths.PARAMS_DIR
        and n not in committed_environments()])
    monkeypatch.setattr("iolab.cli.env.PARAMS_DIR", params)
    monkeypatch.setattr("iolab.cli.env.REPO_ROOT", tmp_path)
    code, out, _ = run(["env", "new", "mybox"])
    assert code == 0 and (params / "mybox" / "smt_thp.yaml").exists() and "iolab plan" in out
    code, _, err = run(["env", "new", "mybox"])
    assert code == 2 and "exists already" in err
    code, _, err = run(["env", "new", "../escape"])
    assert code == 2 and "environment" in err


def test_a_name_too_long_is_refused_naming_the_key_and_the_limit(tmp_path, monkeypatch):
    """Probe 13, P13-08: 'env new' with a 300-character name failed with "File name too
    long", naming a temporary folder, neither the key nor the longest name allowed."""
    params = tmp_path / "params"
    shutil.copytree(paths.PARAMS_DIR / "kvm-2vcpu", params / "kvm-2vcpu")
    monkeypatch.setattr("iolab.cli.env.PARAMS_DIR", params)
    monkeypatch.setattr("iolab.cli.env.REPO_ROOT", tmp_path)
    code, _, err = run(["env", "new", "a" * (paths.NAME_MOST + 1)])
    assert code == 2 and len(err.splitlines()) == 1, err
    assert (f"key 'environment': '{'a' * 38}… is {paths.NAME_MOST + 1} characters long, more "
            f"than the {paths.NAME_MOST} a name may have") in err
    assert f"at most {paths.NAME_MOST} characters" in err
    assert sorted(p.name for p in params.iterdir()) == ["kvm-2vcpu"]
    code, _, err = run(["env", "new", "a" * paths.NAME_MOST])  # the longest allowed
    assert code == 0 and (params / ("a" * paths.NAME_MOST) / "smt_thp.yaml").exists(), err
    with pytest.raises(InputError, match="key .experiment.: .* is 300 characters long"):
        paths.check_name("experiment", "x" * 300)


@pytest.mark.parametrize("plant", ["secret", "devnull", "fifo"])
def test_env_new_never_follows_a_link_in_the_params_it_copies(tmp_path, monkeypatch, plant):
    """copytree had copied a root-only file's content through a link, and made a link to
    /dev/null a world-writable (0666) params file."""
    params = tmp_path / "params"
    (params / "src").mkdir(parents=True)
    (params / "src" / "smt_thp.yaml").write_text("# params\n")
    secret = tmp_path / "secret"
    secret.write_text("SECRET-ROOT-ONLY\n")
    secret.chmod(0o600)
    planted = params / "src" / "notes.yaml"
    if plant == "secret":
        planted.symlink_to(secret)
    elif plant == "devnull":
        planted.symlink_to("/dev/null")
    else:
        os.mkfifo(planted)
    monkeypatch.setattr("iolab.cli.env.PARAMS_DIR", params)
    monkeypatch.setattr("iolab.cli.env.REPO_ROOT", tmp_path)
    code, _, err = run(["env", "new", "box", "--from", "src"])
    assert code == 2 and f"{planted}: is a" in err and "never followed" in err
    assert len(err.strip().splitlines()) == 1
    assert not (params / "box").exists(), "nothing of the copy is kept"


@pytest.mark.parametrize("linked", ["source", "params"])
def test_env_new_never_copies_from_or_into_a_linked_folder(tmp_path, monkeypatch, linked):
    """A source environment that was a link to a root-only folder had its files read and
    copied into the checkout; a params folder that is a link would take the copy elsewhere."""
    secret = tmp_path / "secret"
    secret.mkdir(mode=0o700)
    (secret / "id_rsa.yaml").write_text("SECRET-ROOT-ONLY\n")
    params = tmp_path / "params"
    if linked == "source":
        (params / "src").mkdir(parents=True)
        (params / "src" / "smt_thp.yaml").write_text("# params\n")
        (params / "evlink").symlink_to(secret)
        argv, refused = ["env", "new", "evcopy", "--from", "evlink"], params / "evlink"
    else:
        (secret / "src").mkdir()
        (secret / "src" / "smt_thp.yaml").write_text("# params\n")
        params.symlink_to(secret)
        argv, refused = ["env", "new", "evcopy", "--from", "src"], params
    monkeypatch.setattr("iolab.cli.env.PARAMS_DIR", params)
    monkeypatch.setattr("iolab.cli.env.REPO_ROOT", tmp_path)
    code, out, err = run(argv)
    assert code == 2 and f"{refused}: is a symbolic link to {secret}" in err, err
    assert "never followed" in err and len(err.strip().splitlines()) == 1 and not out
    assert not os.path.lexists(params / "evcopy") and not (secret / "evcopy").exists()


def test_env_new_keeps_the_files_modes_not_more(tmp_path, monkeypatch):
    params = tmp_path / "params"
    (params / "src" / "sub").mkdir(parents=True)
    (params / "src" / "smt_thp.yaml").write_text("# params\n")
    (params / "src" / "smt_thp.yaml").chmod(0o640)
    (params / "src" / "sub" / "x.yaml").write_text("x: 1\n")
    monkeypatch.setattr("iolab.cli.env.PARAMS_DIR", params)
    monkeypatch.setattr("iolab.cli.env.REPO_ROOT", tmp_path)
    assert run(["env", "new", "box", "--from", "src"])[0] == 0
    copy = params / "box" / "smt_thp.yaml"
    assert copy.read_text() == "# params\n" and copy.stat().st_mode & 0o7777 == 0o640
    assert (params / "box" / "sub" / "x.yaml").read_text() == "x: 1\n"


def _params_source(tmp_path, monkeypatch) -> Path:
    params = tmp_path / "params"
    (params / "src").mkdir(parents=True)
    (params / "src" / "smt_thp.yaml").write_text("# params\n")
    monkeypatch.setattr("iolab.cli.env.PARAMS_DIR", params)
    monkeypatch.setattr("iolab.cli.env.REPO_ROOT", tmp_path)
    return params


@pytest.mark.parametrize("bound", ["depth", "file size", "files"])
def test_env_new_copies_within_bounds_or_not_at_all(tmp_path, monkeypatch, bound):
    """Probe 11, B1 and B2: 'env new --from' a params folder 1,100 folders deep ended in a
    RecursionError (rc 70), and one with a 3 GiB sparse params file wrote 3 GiB of zeros for
    a file 'plan' refuses to read. Each is refused in one line, and nothing is left."""
    from iolab.cli import env as cli_env
    from iolab.core.spec import PARAMS_MOST

    params = _params_source(tmp_path, monkeypatch)
    src = params / "src"
    if bound == "depth":
        deep = src.joinpath(*["a"] * (cli_env.DEPTH_MOST + 1))
        deep.mkdir(parents=True)
        named, words = deep, f"lies {cli_env.DEPTH_MOST + 1} folders deep"
    elif bound == "file size":
        named = src / "irq_affinity.yaml"
        with open(named, "wb") as fh:
            fh.truncate(PARAMS_MOST + 1)  # sparse: no disk taken
        named, words = named, f"holds {PARAMS_MOST + 1:,} bytes"
    else:
        for i in range(cli_env.FILES_MOST):
            (src / f"f{i:04d}.yaml").write_text("x: 1\n")
        named = src / "smt_thp.yaml"  # the last in name order: file FILES_MOST + 1
        words = f"is file {cli_env.FILES_MOST + 1:,} of"
    code, out, err = run(["env", "new", "box", "--from", "src"])
    assert code == 2 and not out and len(err.strip().splitlines()) == 1, err
    assert f"{named}: {words}" in err and "nothing was copied" in err
    assert sorted(p.name for p in params.iterdir()) == ["src"], "a copy, or its temporary, left"


def test_a_folder_copy_of_any_depth_is_one_line_never_a_recursion_error(tmp_path):
    """Probe 11, B1 as found: 1,100 levels, past Python's recursion limit."""
    from iolab import safefiles

    levels = [tmp_path / "src"]
    for _ in range(sys.getrecursionlimit() + 100):  # os.mkdir: pathlib's parents recurse too
        levels.append(levels[-1] / "a")
    for level in levels:
        os.mkdir(level)
    try:
        with pytest.raises(safefiles.TooLarge, match="lies 33 folders deep in the folder, "
                                                     "deeper than iolab copies"):
            safefiles.copy_folder(levels[0], tmp_path / "dst", "the folder")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]
    finally:
        for level in reversed(levels):  # rmtree recurses as deep
            os.rmdir(level)


SIGTERM_MID_COPY = """
import os, signal, sys
from pathlib import Path
from iolab import safefiles
from iolab.cli import env, main
env.PARAMS_DIR, env.REPO_ROOT = Path(sys.argv[1]), Path(sys.argv[1]).parent
copy, copied = safefiles._copy_file, []
def copy_then_stop(*args, **kwargs):
    copy(*args, **kwargs)
    copied.append(args[0])
    if len(copied) == 2:  # mid-copy, as kill or a service manager would
        os.kill(os.getpid(), signal.SIGTERM)
safefiles._copy_file = copy_then_stop
sys.exit(main(["env", "new", "box", "--from", "src"]))
"""


def test_env_new_stopped_mid_copy_leaves_no_half_environment(tmp_path, monkeypatch):
    """Probe 11, E1: SIGTERM during 'env new' left box/ with some of the params files: 'env
    new box' then said it existed, and 'plan' found no params for the files not yet copied.
    The copy is made under a temporary name and renamed once whole; a stop signal removes it."""
    params = _params_source(tmp_path, monkeypatch)
    for name in ("cpu_search", "irq_affinity", "zz_last"):
        (params / "src" / f"{name}.yaml").write_text("# params\n")
    done = subprocess.run([sys.executable, "-c", SIGTERM_MID_COPY, str(params)],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert done.returncode == 128 + 15, (done.returncode, done.stderr)
    assert sorted(p.name for p in params.iterdir()) == ["src"], "a copy, or its temporary, left"


SIGTERM_AS_THE_COPY_IS_MADE = """
import os, signal, sys
from pathlib import Path
from iolab.cli import env, main
env.PARAMS_DIR, env.REPO_ROOT = Path(sys.argv[1]), Path(sys.argv[1]).parent
mkdir = os.mkdir
def made_then_stopped(path, *args, **kwargs):
    mkdir(path, *args, **kwargs)
    if Path(path).name.startswith(".iolab-"):  # the copy's folder made, nothing noted it yet
        os.kill(os.getpid(), signal.SIGTERM)
os.mkdir = made_then_stopped
sys.exit(main(["env", "new", "box", "--from", "src"]))
"""


def test_env_new_stopped_as_its_copys_folder_is_made_leaves_nothing(tmp_path, monkeypatch):
    """Probe 12, X4's class: a stop signal as the copy's temporary folder was made (before it
    was noted as the copy's) left that folder beside the environments. Making it and noting
    it is one step a stop signal does not split."""
    params = _params_source(tmp_path, monkeypatch)
    (params / "src" / "cpu_search.yaml").write_text("# params\n")
    done = subprocess.run([sys.executable, "-c", SIGTERM_AS_THE_COPY_IS_MADE, str(params)],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert done.returncode == 128 + 15, (done.returncode, done.stderr)
    assert sorted(p.name for p in params.iterdir()) == ["src"], "the copy's temporary left"


def test_status_and_restore_on_an_empty_data_folder(tmp_path):
    code, out, _ = run(["status", "--data", str(tmp_path)])
    assert code == 0 and "no campaigns" in out
    code, out, _ = run(["restore", "--data", str(tmp_path)])
    assert code == 0 and "nothing to restore" in out



@pytest.mark.parametrize("verb", [["status"], ["verify", "--fast"]])
def test_a_line_break_in_the_data_folders_name_is_printed_as_text(tmp_path, verb):
    """The folder is the user's ($IOLAB_DATA): a line break in its name made a line of its
    own in 'no campaigns under ...'."""
    data = tmp_path / "no\x1b[31mpe\nFAKE LINE"
    data.mkdir()
    code, out, err = run([*verb, "--data", str(data)])
    assert code == 0, err
    shown = str(tmp_path / r"no\x1b[31mpe\nFAKE LINE" / "raw")
    assert f"no campaigns under {shown}" in out.splitlines()[0]
    assert not any(line.startswith("FAKE") for line in out.splitlines())

@pytest.mark.parametrize("argv, said", [
    (["verify", "nosuchexp", "--fast"], "key 'experiment': 'nosuchexp' names no campaign"),
    (["verify", "--env", "nosuch", "--fast"], "key '--env': 'nosuch' names no campaign"),
    (["migrate", "nosuchexp"], "key 'experiment': 'nosuchexp' names no campaign"),
    (["migrate", "--env", "nosuch"], "key '--env': 'nosuch' names no campaign"),
    (["migrate", "smt_thp", "--env", "xeon-v657"],
     "key '--env': 'xeon-v657' names no campaign of experiment 'smt_thp'"),
    (["migrate", "--env", "x\x1b]0;pwn\x07\nFAKE"],
     r"key '--env': 'x\x1b]0;pwn\x07\nFAKE' names no campaign"),
], ids=["verify-experiment", "verify-env", "migrate-experiment", "migrate-env",
        "migrate-env-of-another", "migrate-escaped"])
def test_a_name_that_chooses_no_campaign_is_refused_in_one_line(tmp_path, argv, said):
    """Probe 11, X1: a misspelt experiment or environment given to verify or migrate chose
    nothing and said so with rc 0 ("0 files checked ...: no problems", or nothing at all):
    a typo read as a verified store."""
    for exp, env in (("smt_thp", "kvm-2vcpu"), ("cpu_search", "xeon-v657")):
        (tmp_path / "raw" / exp / env / "runs").mkdir(parents=True)
    code, out, err = run([*argv, "--data", str(tmp_path)])
    assert code == 2 and out == "", (out, err)
    assert said in err and len(err.strip().splitlines()) == 1, err
    assert "allowed: " in err


@pytest.mark.parametrize("argv", [["verify", "smt_thp", "--env", "kvm-2vcpu", "--fast"],
                                  ["verify", "--env", "hpc-server", "--fast"],
                                  ["migrate", "cpu_search"], ["migrate", "--env", "kvm-2vcpu"]])
def test_a_name_that_chooses_a_campaign_or_params_file_is_taken(tmp_path, argv):
    """hpc-server has params files but no stored campaign here: verify checks those."""
    for exp, env in (("smt_thp", "kvm-2vcpu"), ("cpu_search", "xeon-v657")):
        (tmp_path / "raw" / exp / env / "runs").mkdir(parents=True)
    code, out, err = run([*argv, "--data", str(tmp_path)])
    assert code == 0 and err == "", (out, err)


def test_output_into_a_closed_pipe_is_quiet():
    """`iolab tidy ... | head` ends without a traceback."""
    proc = subprocess.run(f"{sys.executable} -m iolab plan cpu_search --env hpc-server "
                          f"--format table | head -1", shell=True, capture_output=True,
                          text=True, cwd=REPO_ROOT)
    assert proc.stdout.startswith("cpu_governor") and "Traceback" not in proc.stderr


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "pipe"])
def test_tidy_on_a_terminal_shows_control_characters_escaped(tmp_path, monkeypatch, terminal):
    """A fake fio's version 'fio-3.33 ESC]0;PWNED BEL ESC[2J' went raw to the terminal
    (retitled and cleared it); to a pipe or a file the CSV stays the data as recorded."""
    from iolab.core import tidy

    version = "fio-3.33\x1b]0;PWNED\x07\x1b[2J"
    monkeypatch.setattr(tidy, "load", lambda *args, **kwargs: pd.DataFrame(
        {"fio.version": [version], "iops": [1.5], "ok": [True]}))
    out = _Terminal() if terminal else io.StringIO()
    with redirect_stdout(out):
        assert main(["tidy", "smt_thp", "--env", "kvm-2vcpu", "--data", str(tmp_path)]) == 0
    shown = version if not terminal else "fio-3.33\\x1b]0;PWNED\\x07\\x1b[2J"
    assert out.getvalue() == f"fio.version,iops,ok\n{shown},1.5,True\n"


STORED = Store(default_data_dir(), "smt_thp", "kvm-2vcpu")


@pytest.mark.skipif(not STORED.root.exists(), reason="no stored smt_thp/kvm-2vcpu campaign in data/")
def test_tidy_of_the_committed_campaign(tmp_path):
    out_csv = tmp_path / "t.csv"
    code, _, err = run(["tidy", "smt_thp", "--env", "kvm-2vcpu", "-o", str(out_csv)])
    assert code == 0 and "rows" in err
    df = pd.read_csv(out_csv)
    assert len(df) >= 20 and df["run.id"].is_unique
    for column in ("engine", "concurrency", "iops", "clat_p99_us", "fio.iops", "fio.version",
                   "run.host_fingerprint", "run.config", "config.runtime_s", "knob.thp"):
        assert column in df
    host = json.loads(STORED.host_path.read_text())
    assert set(df["run.host_fingerprint"]) == {host["fingerprint"]}
    code, _, err = run(["tidy", "smt_thp", "--env", "kvm-2vcpu", "--format", "parquet"])
    assert code == 2 and "needs -o" in err


@pytest.mark.parametrize("experiment, env", [("smt_thp", "kvm-2vcpu"), ("cpu_search", "kvm-2vcpu"),
                                             ("cpu_search", "epyc-2vcpu-v782")])
def test_the_committed_campaigns_have_settled_every_point_they_can(experiment, env):
    """The committed local campaigns ran to their repetition rule's end, confirmation step
    included: nothing certain and nothing possible is left to run; only blocked points are
    open."""
    if not (default_data_dir() / "raw" / experiment / env / "runs").exists():
        pytest.skip(f"no committed {experiment}/{env} campaign")
    code, out, _ = run(["plan", experiment, "--env", env, "--format", "json"])
    doc = json.loads(out)
    assert code == 0 and doc["to_run"] == 0 and doc["to_run_max"] == 0
    assert isinstance(doc["repetitions"], dict) and doc["order"] == "interleaved"
    rule = doc["repetitions"]
    for d in doc["decisions"]:
        if d["reason"] == "target":
            assert rule["min"] <= d["n"] <= rule["max"] and d["rel_half_pct"] <= rule["target_ci_pct"]
        elif d["reason"] == "max":
            assert d["n"] == rule["max"]
        else:
            assert d["blocked"] and d["n"] == 0, d
    if "confirm" in doc:
        assert not doc["confirm"]["waiting"] and doc["confirm"]["points"]
    code, out, _ = run(["tidy", experiment, "--env", env, "--decisions"])
    table = pd.read_csv(io.StringIO(out))
    assert code == 0 and len(table) == len(doc["decisions"])
    assert {"n", "mean", "rel_half_pct", "reason"} <= set(table.columns)


def test_status_states_the_rules_outcome(tmp_path):
    if not (default_data_dir() / "raw" / "smt_thp" / "kvm-2vcpu" / "runs").exists():
        pytest.skip("no committed smt_thp/kvm-2vcpu campaign")
    code, out, _ = run(["status"])
    line = next(line for line in out.splitlines() if line.strip().startswith("rule (of the params file):")
                and "iops" in line)
    assert code == 0 and "met the target" in line and "0 to 0 runs still to do" in line


@pytest.mark.parametrize("override", ["repetitions.max=abc", "repetitions.min=1",
                                      "repetitions.target_ci_pct=0", "repetitions.confidence=1",
                                      "repetitions.metric=nope", "runtime_s.max=3"])
def test_a_bad_rule_is_refused_before_the_data_folder_is_touched(tmp_path, override):
    data = tmp_path / "data"
    code, _, err = run(["run", "smt_thp", "--env", "kvm-2vcpu", "--data", str(data),
                        "--set", override])
    key = override.split("=")[0]
    assert code == 2 and "--set" in err and f"key '{key}'" in err and "allowed" in err
    assert not data.exists()


def test_a_virtualenv_of_another_checkout_says_so(tmp_path, monkeypatch):
    """Run from inside another iolab checkout, the package (whose paths are its own
    checkout's) warns once, naming both; elsewhere it says nothing."""
    other = tmp_path / "other-checkout"
    (other / "notebooks").mkdir(parents=True)
    (other / "pyproject.toml").write_text('[project]\nname = "iolab"\nversion = "0.2.0"\n')
    monkeypatch.chdir(other / "notebooks")
    code, _, err = run(["experiments", "--format", "json"])
    assert code == 0
    assert err.startswith(f"iolab: warning: this is the iolab of {REPO_ROOT}, not of the "
                          f"checkout you are in ({other.resolve()})")
    assert "make setup venv" in err
    (other / "pyproject.toml").write_text('[project]\nname = "not-iolab"\n')
    assert run(["experiments", "--format", "json"])[2] == ""
    monkeypatch.chdir(REPO_ROOT / "notebooks")
    assert run(["experiments", "--format", "json"])[2] == ""


# -- recorded strings reach the terminal as text ----------------------------------------------
# A failed run's reason quotes its tool's stderr; a host's name, a lock holder's command line
# and a file's name are recorded strings too. An escape sequence among them (clear the screen,
# set the window's title) was printed as it is: a command to the user's terminal.

GARBLE = "\x1b[2J\x1b]0;owned\x07scripted failure"  # the fake fio's "garble" on its stderr
SHOWN = r"\x1b[2J\x1b]0;owned\x07scripted failure"  # how iolab prints it
ONE_POINT = """experiment: demo
tool: fio
runtime_s: 1
repetitions: 3
base: {engine: psync, concurrency: 1, thp: asis, pinned: false}
grids:
  one: {vary: {concurrency: [1]}}
"""


@pytest.fixture
def garbled(demo, params_dir, tmp_path, fake_fio, monkeypatch):
    """Factory: the campaign that ``iolab run`` runs, of one point whose second run's tool
    fails with escape sequences on its stderr."""
    make = campaigns(demo, params_dir, tmp_path, ONE_POINT)

    def campaign(name: str):
        camp = make(name)
        fake_fio(camp, {1: [1000, "garble", 1000]})
        monkeypatch.setattr(cli_campaign, "_campaign", lambda args: camp)
        return camp
    return campaign


def failures(camp) -> list[str]:
    return [json.loads((d / "run.json").read_text())["failure"]
            for d in camp.store.failed_runs()]


def test_a_tools_escape_sequences_in_a_failed_run_are_printed_as_text(garbled):
    camp = garbled("data")
    code, out, err = run(["run", "demo", "--env", ENV, "--keep-going", "--no-progress"])
    assert code == 1 and "completed 2 runs, 1 failed" in out
    assert SHOWN in out and "\x1b" not in out + err
    assert len(failures(camp)) == 1 and GARBLE in failures(camp)[0]  # recorded as it was


def test_a_failed_runs_reason_is_printed_on_one_line(monkeypatch):
    """A reason may quote what a tool or a parser read (a job's name, a line of stderr): its
    line breaks are printed as text, so that it cannot print a line of its own."""
    from iolab.execution.runner import CampaignResult

    class Recorded:
        def run(self, **options):
            return CampaignResult(completed=1, failed=["r1"],
                                  messages=["run r1 (c=1) failed: fio said\ncompleted 9 runs"])
    monkeypatch.setattr(cli_campaign, "_campaign", lambda args: Recorded())
    code, out, err = run(["run", "demo", "--env", ENV, "--keep-going", "--no-progress"])
    assert code == 1
    assert out.splitlines() == [r"run r1 (c=1) failed: fio said\ncompleted 9 runs",
                                "completed 1 runs, 1 failed"]


def test_a_failure_that_ends_the_campaign_is_printed_as_text(garbled):
    camp = garbled("data")
    code, out, err = run(["run", "demo", "--env", ENV, "--no-progress"])
    assert code == 2 and SHOWN in err and "Use --keep-going" in err
    assert "\x1b" not in out + err
    assert GARBLE in failures(camp)[0]


@pytest.mark.parametrize("verb", [["status"], ["verify", "--fast"]])
def test_a_folder_no_campaign_can_be_named_is_reported_and_the_others_still_are(garbled, verb):
    """A folder under raw/ named as no experiment or environment can be (a line break, a
    space) stopped status and verify with an error on its name, hiding every campaign."""
    camp = garbled("data")
    run(["run", "demo", "--env", ENV, "--keep-going", "--no-progress"])
    raw = camp.data_dir / "raw"
    (raw / "demo" / "bad\nname").mkdir()
    (raw / "not mine").mkdir()
    code, out, err = run([*verb, "--data", str(camp.data_dir)])
    assert code == 0 and err == ""
    assert any(line.startswith(f"demo/{ENV}: 2 ") for line in out.splitlines())
    assert r"not a campaign: raw/demo/bad\nname (" in out and "not a campaign: raw/not mine (" in out
    assert not any(line.startswith("name") for line in out.splitlines())


def test_status_prints_a_recorded_host_name_as_text(garbled):
    camp = garbled("data")
    run(["run", "demo", "--env", ENV, "--keep-going", "--no-progress"])
    host = json.loads(camp.store.host_path.read_text())
    camp.store.host_path.write_text(json.dumps({**host, "hostname": "\x1b]0;owned\x07node"}))
    code, out, err = run(["status", "--data", str(camp.data_dir)])
    assert code == 0 and r"host \x1b]0;owned\x07node fingerprint" in out
    assert "\x1b" not in out + err
    # a line break in it would print a line of its own
    camp.store.host_path.write_text(json.dumps({**host, "hostname": "vm\nFAKE: all intact"}))
    code, out, err = run(["status", "--data", str(camp.data_dir)])
    assert code == 0 and r"host vm\nFAKE: all intact fingerprint" in out
    assert not any(line.startswith("FAKE") for line in out.splitlines())


def test_a_lock_holders_command_line_is_printed_as_text(tmp_path, monkeypatch):
    """The holder's command line is read from the lock file: another process's words."""
    from iolab.core import locks

    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setattr(sys, "argv", ["iolab", "run", "\x1b]0;owned\x07"])
    lock = locks.data_lock(data).acquire()
    try:
        code, out, err = run(["status", "--data", str(data)])
    finally:
        lock.release()
    assert code == 0 and r"iolab run \x1b]0;owned\x07" in out
    assert "\x1b" not in out + err


def test_a_line_of_megabytes_is_printed_cut_and_says_so(capsys):
    """A recorded string of megabytes (a host name, a stop request's reason) is printed as a
    screenful, not whole; shorter lines and line breaks as they are."""
    from iolab.cli.common import LINE_MOST, say

    say("first\n" + "H" * 10_000_000 + "\x1b[2J\nlast")
    out = capsys.readouterr().out
    first, long, last = out.rstrip("\n").split("\n")
    assert first == "first" and last == "last"
    assert long.startswith("H" * 100) and len(long) < LINE_MOST + 100
    assert long.endswith(f"… ({10_000_004 - LINE_MOST:,} more characters not shown)")
    assert "\x1b" not in out


def test_a_bad_experiments_variable_is_one_line_not_a_traceback(monkeypatch, capsys):
    from iolab.core import registry

    monkeypatch.setenv("IOLAB_EXPERIMENTS", "nosuchmod_for_this_test")
    registry.reload()  # as a new process finds it: the session's registry is filled already
    try:
        code, out, err = run(["plan", "smt_thp", "--env", "kvm-2vcpu"])
    finally:
        monkeypatch.delenv("IOLAB_EXPERIMENTS")
        registry.reload()
    assert code == 2 and err.startswith("iolab: error: $IOLAB_EXPERIMENTS")
    assert "Traceback" not in err and len(err.splitlines()) == 1


HOSTILE = "x\x1b]0;pwn\x07\nFAKE LINE: all good"  # retitles a terminal, then a line of its own


def _hostile_case(case: str, tmp_path: Path, monkeypatch) -> list[str]:
    """The argv of ``case``, with what it needs put in place: a name holding ``HOSTILE``
    where the command prints a path, a file's name or a folder the user gave."""
    hostile = tmp_path / HOSTILE
    hostile.mkdir()
    data = tmp_path / "data"
    data.mkdir()
    if case == "tidy -o":
        return ["tidy", "smt_thp", "--env", "kvm-2vcpu", "--decisions", "--data", str(data),
                "-o", str(hostile / "t.csv")]
    if case == "env new":
        params = tmp_path / "params"
        (params / "src").mkdir(parents=True)
        (params / "src" / f"{HOSTILE}.yaml").write_text("# params\n")
        monkeypatch.setattr("iolab.cli.env.PARAMS_DIR", params)
        monkeypatch.setattr("iolab.cli.env.REPO_ROOT", tmp_path)
        return ["env", "new", "box", "--from", "src"]
    if case == "new-experiment --where":
        return ["new-experiment", "hostile_probe", "--where", str(hostile)]
    if case == "another checkout":
        (hostile / "pyproject.toml").write_text('[project]\nname = "iolab"\n')
        monkeypatch.chdir(hostile)
        return ["experiments", "--format", "json"]
    if case == "stop":
        return ["stop", "--data", str(hostile)]
    if case == "clean --under":
        monkeypatch.setenv("IOLAB_STATE_DIR", str(hostile / "state"))
        return ["clean", "--dry-run", "--under", str(hostile)]
    if case == "a refusal":  # an error naming a path: printed on its one line
        from iolab.host import scratch

        monkeypatch.setenv("IOLAB_STATE_DIR", str(hostile / "state"))
        registry = scratch.Registry().path
        registry.parent.mkdir(mode=0o700)
        registry.write_text("[]\n")
        return ["clean", "--dry-run"]
    return ["status", "--data", str(hostile)]


@pytest.mark.parametrize("case", ["tidy -o", "env new", "new-experiment --where",
                                  "another checkout", "stop", "clean --under", "status",
                                  "a refusal"])
def test_a_hostile_name_reaches_the_terminal_as_text(tmp_path, monkeypatch, case):
    """A path, a file's name or a folder printed raw retitled the terminal (ESC ] ... BEL)
    and made a line of its own ('FAKE LINE: ...') in what the command said."""
    code, out, err = run(_hostile_case(case, tmp_path, monkeypatch))
    assert code == (2 if case == "a refusal" else 0), err
    said = out + err
    assert "FAKE LINE" in said, "the name is shown"
    assert [c for c in said if not c.isprintable() and c != "\n"] == []
    assert not [line for line in said.splitlines() if line.startswith("FAKE")]


def _actions(parser):
    """Every option of ``parser`` and of its subcommands, as (prog, action)."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _actions(sub)
        else:
            yield parser.prog, action


def test_every_number_option_reads_ascii_digits_only():
    """Probe 10, B13: 'plan --max-runs ３' (a fullwidth digit) was taken as 3, and
    'search-replay --seeds ٢' ran: argparse's type=int reads any script's digits, '1_000' and
    '+3' too. Every integer option has the one type that reads ASCII digits only."""
    from iolab.cli import make_parser
    from iolab.cli.common import int_arg

    numeric = [(prog, a.option_strings) for prog, a in _actions(make_parser())
               if a.type in (int, float)]
    assert numeric == [], "an option read by int or float, not by int_arg"
    assert sum(a.type is int_arg for _, a in _actions(make_parser())) >= 8


@pytest.mark.parametrize("argv", [
    ["plan", "smt_thp", "--env", "kvm-2vcpu", "--max-runs"],
    ["plan", "smt_thp", "--env", "kvm-2vcpu", "--limit"],
    ["search-replay", "cpu_search", "--env", "epyc-2vcpu-v782-grid", "--seeds"],
    ["search-replay", "cpu_search", "--env", "epyc-2vcpu-v782-grid", "--jobs"],
    ["migrate", "--show"],
    ["notebook", "smt_thp", "--env", "kvm-2vcpu", "--limit"],
    ["submit", "smt_thp", "--env", "kvm-2vcpu", "--limit"],
    ["submit", "smt_thp", "--env", "kvm-2vcpu", "--signal-before"],
])
@pytest.mark.parametrize("number", ["３", "٢", "1_000", "+3", " 3", "1" * 19, "", "3.0"])
def test_a_number_in_other_digits_is_refused_in_one_line_naming_the_option(argv, number,
                                                                          tmp_path, monkeypatch):
    from test_reliability import cli

    monkeypatch.setenv("IOLAB_DATA", str(tmp_path))  # were one taken, nothing stored is touched
    code, out, err = cli([*argv, number])
    assert code == 2 and out == "" and len(err.splitlines()) == 1, err
    assert f"argument {argv[-1]}: " in err and "is not a whole number" in err
    assert "the ASCII digits 0-9" in err


def test_a_number_in_ascii_digits_is_read():
    from iolab.cli.common import int_arg

    assert [int_arg(t) for t in ("3", "0", "-2", "007", "1" * 18)] == [3, 0, -2, 7, int("1" * 18)]


@pytest.mark.parametrize("argv, option, what", [
    (["restore", "--journal", ""], "--journal", "a file"),
    (["tidy", "smt_thp", "--env", "kvm-2vcpu", "-o", ""], "-o/--output", "a file"),
    (["notebook", "smt_thp", "--env", "kvm-2vcpu", "-o", ""], "-o/--output", "a file"),
    (["book", "--glue-snapshot", ""], "--glue-snapshot", "a file"),
    (["new-experiment", "probe_x", "--where", ""], "--where", "a folder"),
], ids=["restore journal", "tidy output", "notebook output", "glue snapshot", "where"])
def test_an_empty_path_option_is_refused_not_taken_for_the_default(capsys, argv, option,
                                                                   what):
    """An empty path (an unset shell variable) was read as the option left out: restore read
    the default journal, tidy wrote to stdout, notebook to its default file (probe 12's
    CL1, as --data '' already was). Only parsed: without the refusal nothing is run."""
    from iolab.cli import make_parser

    with pytest.raises(SystemExit) as exited:
        make_parser().parse_args(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}: empty: give {what} (or leave the option out" in err, err
