"""The README's commands and flags are the CLI's: every ``iolab VERB ... --flag`` it shows
is a flag of that verb, and every other flag it names belongs to some verb (or to the other
program it is quoted for)."""

from __future__ import annotations

import argparse
import re

from iolab.cli import make_parser
from iolab.paths import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text()
# flags the README quotes for other programs: sbatch/scancel's, jupyter-book's, make's
FOREIGN = {"--exclusive", "--nodes", "--dependency", "--batch", "--signal", "--mem",
           "--keep-going"}
COMMAND = re.compile(r"^(?:sudo\s+)?(?:\S*/)?iolab\s+(.*)$")


def _verbs() -> dict[str, set[str]]:
    """Each verb (``env new`` as one) with its flags, the global ones included."""
    parser = make_parser()
    top = {o for a in parser._actions for o in a.option_strings}
    out = {}

    def walk(p: argparse.ArgumentParser, prefix: str) -> None:
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    flags = {o for a in sub._actions for o in a.option_strings} | top
                    out[f"{prefix}{name}"] = flags
                    walk(sub, f"{prefix}{name} ")
    walk(parser, "")
    return out


VERBS = _verbs()
ALL_FLAGS = set().union(*VERBS.values())


def _commands() -> list[str]:
    """The iolab command lines of the README: lines of its code blocks, and inline code."""
    lines = []
    for block in re.findall(r"```sh\n(.*?)```", README, re.S):
        lines += [line.split("#", 1)[0].strip() for line in block.splitlines()]
    lines += re.findall(r"`([^`]*iolab [^`]*)`", README)
    return [m.group(1) for line in lines if (m := COMMAND.match(line.strip()))]


def test_the_readme_shows_iolab_commands():
    assert len(_commands()) >= 15


def test_every_flag_of_a_command_in_the_readme_is_a_flag_of_its_verb():
    wrong = []
    for rest in _commands():
        words = rest.split()
        verb = " ".join(words[:2]) if " ".join(words[:2]) in VERBS else words[0]
        if verb not in VERBS:
            wrong.append(f"iolab {rest}: no verb {words[0]!r}")
            continue
        for flag in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", rest):
            if flag not in VERBS[verb]:
                wrong.append(f"iolab {rest}: {verb} has no {flag}")
    assert wrong == []


def test_every_flag_the_readme_names_exists():
    named = set(re.findall(r"`[^`]*?(?<![\w-])(--[a-z][a-z-]*)", README))
    assert named - ALL_FLAGS - FOREIGN == set()


def test_a_verb_named_with_a_flag_in_prose_has_it():
    """Prose such as `tidy --skip-corrupt`, `verify --quarantine`."""
    wrong = [f"{verb} {flag}" for verb, flag in
             re.findall(r"`([a-z][a-z-]*(?: new)?) (--[a-z][a-z-]*)", README)
             if verb in VERBS and flag not in VERBS[verb]]
    assert wrong == []


FRAMEWORK = (REPO_ROOT / "book" / "framework.md").read_text()


def test_every_test_the_books_fault_catalogue_names_exists():
    """The catalogue in the framework chapter names, for each case, the test that shows it:
    a test function (``file.py::name``) or cases of the reliability catalogue (``case-*``)."""
    from tests.test_reliability import CASES

    named = re.findall(r"`(test_\w+\.py)::(test_\w+)`", FRAMEWORK)
    assert len(named) >= 20
    missing = [f"{f}::{t}" for f, t in named
               if not re.search(rf"^def {t}\(", (REPO_ROOT / "tests" / f).read_text(), re.M)]
    assert missing == []
    ids = {c.id for c in CASES}
    for pattern in re.findall(r"cases? ((?:`[a-z*-]+`(?:, )?)+)", FRAMEWORK):
        for case in re.findall(r"`([a-z*-]+)`", pattern):
            prefix = case.rstrip("*")
            assert any(i == case or (case.endswith("*") and i.startswith(prefix)) for i in ids), \
                f"no case {case!r} in test_reliability.CASES"
