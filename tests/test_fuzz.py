"""Fuzzing the command line and params files: whatever the input, no traceback.

Hypothesis draws argv for every verb (its own flags with drawn values, names of things that
exist and do not, YAML snippets, stray words), params files (the committed ones with keys
replaced, removed or added, any YAML document, any bytes), and ``--set`` and ``--where``
values. The property, for every input:

* the exit status is 0 or 2;
* with 2, standard error is one line that says what is wrong (and no traceback anywhere);
* with 2, the data directory is byte for byte as it was (``cache/``, which readers may fill,
  aside).

The examples are drawn from a fixed seed (``derandomize``), so a failure is the same on every
machine, and their number is bounded so the suite stays fast; ``IOLAB_FUZZ_EXAMPLES`` raises
it for a longer hunt. Nothing here measures: ``run`` always gets ``--limit 0`` last (argparse
keeps the last), and the verbs that would build the book, execute a notebook or submit to
Slurm, write a new experiment into the checkout, or measure the replication packs have those
steps replaced by recorders, so only their argument handling is fuzzed.
Drawn paths never start with '/', and the working folder is a temporary one.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iolab import cli
from iolab.core.registry import get, names
from iolab.core.tidy import SKIP_CORRUPT_VAR
from iolab.paths import PARAMS_DIR
from tests.test_reliability import copy_committed, tree_digest

EXAMPLES = int(os.environ.get("IOLAB_FUZZ_EXAMPLES", "40"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=os.environ.get("IOLAB_FUZZ_RANDOM") != "1", database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow, HealthCheck.data_too_large])
# words a user might type: real names, near misses, and the awkward
WORDS = ["smt_thp", "cpu_search", "irq_affinity", "tool_comparison", "cuda_iosize", "gpu_pcie",
         "kvm-2vcpu", "hpc-server", "nowhere", "..", ".", "-", "--", "aisio-x", "", " ", "0",
         "-1", "1e309", "nan", "[]", "{}", "[1", "null", "~", "'on'", "yes", "💾", "a:b",
         "$HOME", "x\\y", "../x", "engine=io_uring", "engine=[]", "runtime_s=1", "base.x=1",
         "repetitions.max=0", "grids={g: {vary: {concurrency: []}}}", "=", "==", "k=v=w"]
KEYS = ["runtime_s", "ramp_s", "repetitions", "repetitions.min", "repetitions.max",
        "repetitions.metric", "repetitions.target_ci_pct", "order", "seed", "target_path",
        "target_size", "base", "base.engine", "base.concurrency", "base.thp", "grids",
        "grids.concurrency.vary.concurrency", "exclusions", "analysis", "analysis.confidence",
        "experiment", "tool", "file_dir", "x", "", "a.b.c", "base.nope"]
VARIABLES = ["engine", "concurrency", "affinity", "smt", "thp", "rw", "bs", "direct", "qdepth",
             "nope", ""]

# a word without '/' at its start: nothing drawn can name a path outside the working folder
text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
               max_size=24).filter(lambda s: not s.startswith("/"))
scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                    st.floats(allow_nan=True, allow_infinity=True), text)
yaml_values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.one_of(st.sampled_from(KEYS), text), inner,
                                                 max_size=4)), max_leaves=12)


def as_yaml(value) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=1000).strip().removesuffix(
        "\n...").removesuffix("...").strip()


snippets = st.one_of(st.sampled_from(WORDS), text, yaml_values.map(as_yaml))
assignments = st.one_of(
    st.tuples(st.sampled_from(KEYS), snippets).map(lambda kv: f"{kv[0]}={kv[1]}"),
    st.tuples(st.sampled_from(VARIABLES), snippets).map(lambda kv: f"{kv[0]}={kv[1]}"),
    snippets)


def _verbs() -> dict[str, argparse.ArgumentParser]:
    parser = cli.make_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


VERBS = _verbs()


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    # --debug asks for the traceback the property forbids; --data is the test's copy
    return [a for a in parser._actions if a.option_strings and not
            {"--help", "--data", "--debug"} & set(a.option_strings)]


@st.composite
def argvs(draw, verb: str | None = None):
    """A command line: a verb, drawn positionals, drawn options with drawn values."""
    verb = verb or draw(st.sampled_from(sorted(VERBS)))
    parser = VERBS[verb]
    argv = [verb]
    nested = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if nested:  # env new NAME
        sub = draw(st.sampled_from(sorted(nested[0].choices)))
        argv.append(sub)
        parser = nested[0].choices[sub]
    for action in parser._actions:
        if not action.option_strings and not isinstance(action, argparse._SubParsersAction):
            argv += draw(st.lists(st.one_of(st.sampled_from(names()), snippets),
                                  min_size=1, max_size=2))
    for action in draw(st.lists(st.sampled_from(_options(parser) or [None]), max_size=5)):
        if action is None:
            continue
        argv.append(draw(st.sampled_from(action.option_strings)))
        if action.nargs != 0:
            if action.choices:
                argv.append(draw(st.one_of(st.sampled_from(list(action.choices)), snippets)))
            elif action.dest in ("overrides", "where"):
                argv.append(draw(assignments))
            else:
                argv.append(draw(snippets))
    argv += draw(st.lists(snippets, max_size=1))  # a stray word
    if any("--data" in a.option_strings for a in parser._actions):
        argv.append("--data")  # its value is the test's copy, appended by check()
    if verb == "run":
        argv += ["--limit", "0"]  # parsed last, so it holds: nothing is ever measured
    return argv


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    return copy_committed(tmp_path_factory.mktemp("fuzz") / "data", 4)


@pytest.fixture
def sandbox(template, tmp_path, monkeypatch):
    """A data copy, a private params folder and state, a temporary working folder, and
    recorders in place of the book build, notebook execution and Slurm submission."""
    from iolab.batch import job, submit
    from iolab.cli import new_experiment
    from iolab.execution import replicate
    from iolab.report import book

    data = tmp_path / "data"
    shutil.copytree(template, data)
    params = tmp_path / "params"
    shutil.copytree(PARAMS_DIR, params)
    for name in names():
        monkeypatch.setattr(type(get(name)), "params_dir", params)
    monkeypatch.setattr("iolab.cli.env.PARAMS_DIR", params)
    monkeypatch.setenv("IOLAB_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv(SKIP_CORRUPT_VAR, "0")  # so that what "book --skip-corrupt" sets is undone
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    calls = []
    for module, attr in ((book, "render"), (book, "build"), (book, "clean"),
                         (book, "write_glue_snapshot"), (job, "run_notebook"),
                         (submit, "submit"), (submit, "resume")):
        monkeypatch.setattr(module, attr, lambda *a, _n=attr, **k: calls.append(_n) or 0)
    # nothing is written into the checkout (a new experiment's files) and nothing measured
    # (the replication packs): their argument handling is fuzzed, their work recorded
    monkeypatch.setattr(new_experiment, "new_experiment",
                        lambda *a, **k: calls.append("new_experiment") or [])
    monkeypatch.setattr(new_experiment, "publish_params_schema",
                        lambda name: calls.append("publish") or Path(f"{name}.schema.json"))
    monkeypatch.setattr(replicate, "run_packs", lambda *a, **k: calls.append("replicate") or [])
    monkeypatch.setattr(replicate, "measure_quiet", lambda: replicate.Quiet(0.0, 2, 0.0, 0.0))
    monkeypatch.setattr(replicate, "host_environment", lambda: "fuzz-v0")
    return {"data": data, "params": params, "work": work}


def check(argv: list[str], data: Path) -> tuple[int, str, str]:
    """Run ``argv`` (a trailing ``--data`` gets the copy) and assert the property."""
    if argv and argv[-1] == "--data" or argv[-3:-2] == ["--data"]:
        at = len(argv) - 1 - argv[::-1].index("--data")
        argv = [*argv[:at + 1], str(data), *argv[at + 1:]]
    before = tree_digest(data, with_cache=False)
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = cli.main(argv)
        except SystemExit as exc:  # argparse: --help, or a refusal
            code = exc.code
    out, err = out.getvalue(), err.getvalue()
    context = f"argv {argv!r}\nexit {code}\nstdout {out[-800:]}\nstderr {err[-800:]}"
    assert "Traceback" not in out + err, context
    assert code in (0, 2), context
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("iolab") and "error" in lines[0], context
        assert tree_digest(data, with_cache=False) == before, \
            "the data directory changed on an error\n" + context
    return code, out, err


@FUZZ
@given(argv=argvs())
def test_any_command_line_exits_0_or_2_with_one_line(sandbox, argv):
    check(argv, sandbox["data"])


@FUZZ
@given(argv=argvs("run"))
def test_any_run_command_line(sandbox, argv):
    check(argv, sandbox["data"])


@FUZZ
@given(overrides=st.lists(assignments, min_size=1, max_size=3),
       where=st.lists(assignments, max_size=2),
       experiment=st.sampled_from(["smt_thp", "cpu_search", "irq_affinity", "tool_comparison"]))
def test_any_set_and_where_values(sandbox, overrides, where, experiment):
    argv = ["plan", experiment, "--env", "kvm-2vcpu"]
    for o in overrides:
        argv += ["--set", o]
    for w in where:
        argv += ["--where", w]
    check([*argv, "--data"], sandbox["data"])


def _mutations(doc: dict):
    """The committed params with one key's value replaced, a key removed, or one added."""
    keys = sorted(doc)
    return st.one_of(
        st.tuples(st.sampled_from(keys), yaml_values).map(lambda kv: {**doc, kv[0]: kv[1]}),
        st.sampled_from(keys).map(lambda k: {x: v for x, v in doc.items() if x != k}),
        st.tuples(st.one_of(st.sampled_from(KEYS), text), yaml_values).map(
            lambda kv: {**doc, kv[0]: kv[1]}))


SMT_THP = yaml.safe_load((PARAMS_DIR / "kvm-2vcpu" / "smt_thp.yaml").read_text())
params_texts = st.one_of(
    _mutations(SMT_THP).map(lambda d: yaml.safe_dump(d, sort_keys=False).encode()),
    yaml_values.map(lambda v: yaml.safe_dump(v).encode()),
    st.binary(max_size=200),
    st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")),
)


@FUZZ
@given(raw=params_texts, verb=st.sampled_from(["plan", "run"]))
def test_any_params_file(sandbox, raw, verb):
    folder = sandbox["params"] / "fz"
    folder.mkdir(exist_ok=True)
    (folder / "smt_thp.yaml").write_bytes(raw)
    argv = [verb, "smt_thp", "--env", "fz", "--data"]
    check(argv + (["--limit", "0"] if verb == "run" else []), sandbox["data"])


# -- what the fuzzing found, pinned --------------------------------------------------------

@pytest.mark.parametrize("argv,fragment", [
    (["plan", "smt_thp", "--env", "kvm-2vcpu", "--where", "engine=[]"],
     "--where: key 'engine': an empty list matches no point"),
])
def test_found_cases_are_one_line(sandbox, argv, fragment):
    code, _, err = check([*argv, "--data"], sandbox["data"])
    assert code == 2 and fragment in err


@pytest.mark.parametrize("raw,fragment", [
    (b"experiment: smt_thp\nrepetitions: 3\nruntime_s: 1\nrepetitions: {min: 2, max: 3}\n",
     "key 'repetitions' is given twice, on line 2 and on line 4: keep one"),
    (b"experiment: smt_thp\n# caf\xe9 latin-1\n", "is not UTF-8 text (byte 0xe9 on line 2)"),
    (b"\xef\xbb\xbfexperiment: smt_thp\n", "key 'runtime_s': missing"),  # a BOM is fine
])
def test_params_files_with_duplicate_keys_or_other_encodings_are_refused(sandbox, raw,
                                                                         fragment):
    folder = sandbox["params"] / "fz"
    folder.mkdir()
    (folder / "smt_thp.yaml").write_bytes(raw)
    code, _, err = check(["plan", "smt_thp", "--env", "fz", "--data"], sandbox["data"])
    assert code == 2 and fragment in err and str(folder / "smt_thp.yaml") in err


def test_a_data_directory_that_is_a_loop_of_links_is_one_line(sandbox, tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    for verb in (["status"], ["plan", "smt_thp", "--env", "kvm-2vcpu"]):
        code, _, err = check([*verb, "--data", str(tmp_path / "a")], sandbox["data"])
        assert code == 2 and "a loop of symbolic links" in err
