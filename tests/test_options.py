"""The run options, defined once (``iolab.execution.options``): every command offers the flags
the definition gives it, a batch job's script passes on what ``iolab notebook`` reads back,
an option added to the definition alone reaches the runner from the CLI, a chapter and a
batch job, and a chapter runs its campaign in a step of its own, never in its constructor."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from iolab import api
from iolab.batch import script
from iolab.cli import main, make_parser
from iolab.errors import InputError
from iolab.execution import options
from iolab.execution.runner import CampaignResult
from iolab.execution.signals import Interrupted
from iolab.report.chapter import Chapter

ENV = "kvm-2vcpu"
# a value for each kind of option, and the command-line words that give it
SAMPLE = {"flag": (True, lambda flag: [flag]), "off": (False, lambda flag: [flag]),
          "count": (7, lambda flag: [flag, "7"]),
          "list": (["engine=psync"], lambda flag: [flag, "engine=psync"])}
# what each command needs besides its options
BASE = {"plan": ["plan", "smt_thp", "--env", ENV], "run": ["run", "smt_thp", "--env", ENV],
        "replicate": ["replicate"], "notebook": ["notebook", "smt_thp", "--env", ENV],
        "submit": ["submit", "smt_thp", "--env", ENV]}


@dataclass(frozen=True)
class WithThrowaway(options.RunOptions):
    """The run options with one more, added as a new option is: in the definition only."""

    throwaway: bool = options.choice(False, "--throwaway", "a throwaway option",
                                     options.RUNNING)


@pytest.fixture
def runner(monkeypatch):
    """The runner replaced by one that keeps the options it is given and runs nothing."""
    given: list = []

    def run_campaign(experiment, spec, data_dir, opts):
        given.append(opts)
        return CampaignResult()

    monkeypatch.setattr("iolab.execution.campaign.run_campaign", run_campaign)
    return given


def sample_words(command: str) -> tuple[dict, list[str]]:
    """A value for every option ``command`` offers, and the words that give them."""
    values, words = {}, []
    for name, c in options.choices(command).items():
        value, give = SAMPLE[c.kind]
        values[name] = value
        words += give(c.flag)
    return values, words


@pytest.mark.parametrize("command", options.COMMANDS)
def test_each_command_reads_every_option_the_definition_gives_it(command):
    values, words = sample_words(command)
    assert values, f"iolab {command} offers no run option"
    args = make_parser().parse_args(BASE[command] + words)
    assert options.given(args, command) == values
    assert options.given(make_parser().parse_args(BASE[command]), command) == {}


def test_the_notebooks_run_options_are_those_of_iolab_notebook():
    assert options.names() == ("where", "limit", "allow_host_change", "allow_shared_node")
    assert set(options.names("submit")) <= set(options.names("notebook"))
    with pytest.raises(InputError, match="unknown option 'keep_going'.*allowed: where, limit"):
        api.chapter("smt_thp", ENV, run_options={"keep_going": True})


def test_a_batch_jobs_script_passes_on_what_iolab_notebook_reads_back():
    values, words = sample_words("submit")
    given = options.given(make_parser().parse_args(BASE["submit"] + words), "submit")
    job = script.JobSpec(experiment="smt_thp", environment=ENV, mode="run",
                         data_dir=Path("/d"), jobs_dir=Path("/d/jobs"), python="python",
                         repo=Path("/r"), run_options=given)
    argv = [word for group in script.command(job) for word in group][3:]  # after -m iolab
    assert options.given(make_parser().parse_args(argv), "notebook") == values


def test_a_new_option_in_the_definition_reaches_the_runner_from_cli_chapter_and_job(
        monkeypatch, tmp_path, runner):
    monkeypatch.setattr(options, "RunOptions", WithThrowaway)
    data = tmp_path / "data"

    assert main(["run", "smt_thp", "--env", ENV, "--data", str(data), "--throwaway"]) == 0
    assert runner.pop().throwaway is True

    api.chapter("smt_thp", ENV, mode="run", data_dir=data, run_options={"throwaway": True})
    assert runner.pop().throwaway is True

    # iolab submit: the job's script runs iolab notebook, which gives it to the notebook
    submitted = options.given(make_parser().parse_args(BASE["submit"] + ["--throwaway"]),
                              "submit")
    job = script.JobSpec(experiment="smt_thp", environment=ENV, mode="run", data_dir=data,
                         jobs_dir=data / "jobs", python="python", repo=Path("/r"),
                         run_options=submitted)
    argv = [word for group in script.command(job) for word in group][3:]
    params: dict = {}

    def execute(src, dst, given, **_):
        params.update(given)
        nbformat.write(nbformat.v4.new_notebook(), dst)

    monkeypatch.setattr("iolab.report.book.execute", execute)
    assert main(argv + ["--output", str(tmp_path / "out.ipynb")]) == 0
    assert params["run_options"] == {"throwaway": True}
    # what the notebook does with its parameters
    api.chapter("smt_thp", ENV, mode=params["mode"], data_dir=params["data_dir"],
                overrides=params["overrides"], run_options=params["run_options"])
    assert runner.pop().throwaway is True and not runner


def test_a_chapter_never_runs_its_campaign_in_its_constructor(tmp_path, runner):
    ch = Chapter("smt_thp", ENV, mode="run", data_dir=tmp_path)
    assert runner == [] and ch.df.empty
    api.chapter("smt_thp", ENV, mode="replay", data_dir=tmp_path)
    api.chapter("smt_thp", ENV, mode="plan", data_dir=tmp_path)
    assert runner == []
    api.chapter("smt_thp", ENV, mode="run", data_dir=tmp_path, run_options={"limit": 2})
    (opts,) = runner
    assert opts.limit == 2 and opts.keep_going is True
    with pytest.raises(TypeError, match="run_options"):  # an old call is refused, not ignored
        Chapter("smt_thp", ENV, mode="run", data_dir=tmp_path, run_options={"limit": 2})


def test_a_campaign_stopped_by_a_signal_stops_the_notebook(monkeypatch, tmp_path):
    monkeypatch.setattr("iolab.execution.campaign.run_campaign",
                        lambda *a: CampaignResult(interrupted=True, signal=15))
    with pytest.raises(Interrupted):
        api.chapter("smt_thp", ENV, mode="run", data_dir=tmp_path)


def test_an_option_of_submit_must_be_one_of_notebook_too():
    """A batch job's script runs 'iolab notebook': an option it could not pass on is a
    mistake in the definition, found when the module is imported."""
    with pytest.raises(ValueError, match="must be one of 'notebook' too"):
        options.Choice("--x", "x", ("run", "submit"))
    with pytest.raises(ValueError, match="kind 'number'"):
        options.Choice("--x", "x", ("run",), kind="number")
