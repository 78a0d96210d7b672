"""Every registered experiment is complete, and nothing outside its own files names it.

An experiment is its package under iolab/experiments/, its notebook, its params files for
this machine class and the lab server, and one chapter line in _toc.yml. These tests fail
when a registered experiment lacks any of them, or when another file of the package, the
Makefile or CI hard-codes an experiment's name instead of asking the registry.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest
import yaml
from conftest import committed_environments

from iolab.core import registry
from iolab.core import spec as specmod
from iolab.core import tool_registry
from iolab.paths import PARAMS_DIR, REPO_ROOT

EXPERIMENTS = registry.all_experiments()
REQUIRED_ENVS = ("kvm-2vcpu", "hpc-server")
# The GPU experiments need an NVIDIA GPU, which this machine class lacks: they have params for
# the lab server (and the GPU machine) only, and their chapters say what is measured where.
GPU_ONLY_ENVS = ("hpc-server",)
PARAMETERS = {"experiment", "environment", "mode", "data_dir", "overrides", "run_options"}


def toc_files() -> list[str]:
    toc = yaml.safe_load((REPO_ROOT / "_toc.yml").read_text())
    out = []

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:  # a glob takes in environment pages
                out.append(entry["file"])
            walk(entry.get("sections"))

    walk(toc["chapters"])
    return out


def test_the_registry_finds_the_experiments():
    assert {"smt_thp", "cpu_search"} <= set(registry.names())


@pytest.mark.parametrize("exp", EXPERIMENTS, ids=lambda e: e.name)
def test_notebook_params_and_chapter_exist(exp):
    assert exp.notebook.exists(), f"{exp.name}: no notebook {exp.notebook}"
    for env in GPU_ONLY_ENVS if exp.needs_gpu else REQUIRED_ENVS:
        assert specmod.params_path(exp.name, env, exp.params_dir).exists(), \
            f"{exp.name}: no params for {env}"
    assert exp.chapter in toc_files(), f"{exp.name}: chapter {exp.chapter} is not in _toc.yml"


@pytest.mark.parametrize("exp", EXPERIMENTS, ids=lambda e: e.name)
def test_notebook_is_thin_and_carries_the_label(exp):
    nb = nbformat.read(exp.notebook, as_version=4)
    assert nb.cells[0].source.startswith(f"({exp.label})="), "the chapter starts with its label"
    cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1
    names = {t.targets[0].id for t in ast.parse(cells[0].source).body}
    assert names <= PARAMETERS, f"the parameters cell holds only {sorted(PARAMETERS)}"
    assert f'experiment = "{exp.name}"' in cells[0].source
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    lines = sum(len(c.splitlines()) for c in code)
    assert lines <= 60, f"{lines} lines of code: the page belongs in the experiment's module"
    defined = [n.name for c in code for n in ast.walk(ast.parse(c))
               if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    assert not defined, f"definitions in the notebook ({defined}): they belong in the package"


@pytest.mark.parametrize("exp", EXPERIMENTS, ids=lambda e: e.name)
def test_declarations_are_consistent(exp):
    assert set(exp.knob_variables) <= set(exp.variables)
    namespaces = set(tool_registry.ADAPTERS) | set(tool_registry.COLLECTORS)
    for name, metric in exp.metrics.items():
        assert name not in exp.variables, f"metric {name} is also a variable"
        for source in metric.sources:
            assert source.split(".")[0] in namespaces, f"{name}: unknown source {source}"
        assert metric.interval in ("t", "lognormal")
    for env in specmod.environments(exp.name, exp.params_dir):
        if exp.params_dir == PARAMS_DIR and env not in committed_environments():
            continue  # a user's own params file (iolab env new) is not the suite's business
        spec = specmod.load(exp, env, params_dir=exp.params_dir)
        invocation = exp.invocation(spec.settings, spec.base)
        assert invocation.tool in tool_registry.ADAPTERS


def _names(exp) -> set[str]:
    return {exp.name, Path(exp.chapter).name}


def _names_it(text: str, exp) -> bool:
    """Whether ``text`` names the experiment as a word of its own: 'cpu_search' in
    'data/raw/cpu_search/' does, the tidy column 'gpu_pcie_rx_mean' does not name 'gpu_pcie'."""
    return any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", text)
               for n in _names(exp))


def _code_strings(path: Path) -> list[str]:
    """String constants of a Python file that are not docstrings."""
    tree = ast.parse(path.read_text())
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and isinstance(n.value, str) and id(n) not in docstrings]


def test_no_file_outside_an_experiments_own_names_it():
    from iolab.host.knobset import make_knobs

    own = {exp.name: REPO_ROOT / "iolab" / "experiments" / exp.name for exp in EXPERIMENTS}
    knobs = set(make_knobs())  # a knob may share an experiment's name (irq_affinity)
    offenders = []
    for path in sorted((REPO_ROOT / "iolab").rglob("*.py")) + \
            sorted((REPO_ROOT / "benchmarks").rglob("*.py")) + sorted((REPO_ROOT / "book" / "_ext").rglob("*.py")):
        for exp in EXPERIMENTS:
            if own[exp.name] in path.parents:
                continue
            if exp.name in knobs and path.parent == REPO_ROOT / "iolab" / "host":
                continue  # the knob of that name, in the knobs' own folder
            hits = [s for s in _code_strings(path) if _names_it(s, exp)]
            if hits:
                offenders.append(f"{path.relative_to(REPO_ROOT)} names {exp.name}: {hits[:2]}")
    for rel in ("Makefile", ".ci/run", ".gitignore", "pyproject.toml", "_config.yml",
                *[str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / "scripts").rglob("*")
                  if p.is_file()]):
        text = (REPO_ROOT / rel).read_text()
        for exp in EXPERIMENTS:
            if _names_it(text, exp):
                offenders.append(f"{rel} names {exp.name}")
    assert not offenders, "take the list of experiments from the registry:\n" + "\n".join(offenders)


@pytest.mark.parametrize("experiment", registry.all_experiments(), ids=lambda e: e.name)
def test_every_numeric_key_is_bounded_on_both_sides(experiment):
    """A runtime, a ramp or a count without an upper bound lets one typo plan for ever."""
    schema = experiment.schema()
    fields = {**schema.settings, **schema.variables, **schema.analysis}
    for name, field in fields.items():
        field = field.item if field.kind == "list" else field
        if field.kind in ("int", "number"):
            assert field.minimum is not None or field.positive, f"{name} has no lower bound"
            assert field.maximum is not None, f"{name} has no upper bound"
