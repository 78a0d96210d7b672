"""The package's shape: no import cycle, imports only down the layers, the experiments
reached from below only through the registry, no experiment importing another, no analysis
loading a campaign, and every module says what it is responsible for.

The import graph counts every import of an iolab module, at the top of a file or inside a
function, so a cycle cannot hide behind a late import.
"""

from __future__ import annotations

import ast
from pathlib import Path

from iolab.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "iolab"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, name: str) -> set[str]:
    """The iolab modules a file imports (``from x import y`` counts y when it is a module)."""
    modules = {module_name(p) for p in PACKAGE.rglob("*.py")}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("iolab")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            if not base.startswith("iolab"):
                continue
            subs = {f"{base}.{a.name}" for a in node.names} & modules
            out |= subs or {base}
    return {m for m in out if m in modules and m != name}


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports(p, module_name(p)) for p in PACKAGE.rglob("*.py")}


def test_no_import_cycle():
    edges = graph()
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


# The layers, lowest first: a folder (or top-level module) of iolab may import its own layer
# and those below it, never one above (book/architecture.md, "The package", says why each sits
# where it does). The experiments are plugins: the registry in core finds them by name at run
# time (test_only_the_registry_imports_experiments_by_name), so nothing below them names one;
# what two of them share sits in "shared", below them (test_no_experiment_imports_another).
LAYERS = [
    {"errors", "paths", "streams", "durable", "procs", "workers", "safefiles", "lockfile",
     "yamlfile", "children", "__init__"},
    {"parsers", "analysis"},
    {"tools", "collectors", "host"},
    {"core"},
    {"importers"},
    {"execution"},
    {"report"},
    {"shared"},
    {"experiments"},
    {"batch", "status", "scaffold", "schemas"},
    {"cli", "api", "__main__"},
]


def folder_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_imports_go_down_the_layers():
    rank = {name: i for i, layer in enumerate(LAYERS) for name in layer}
    found = set()
    for source, targets in graph().items():
        src = folder_of(source)
        assert src in rank, f"{source}: folder {src} is in no layer of LAYERS"
        for target in targets:
            dst = folder_of(target)
            assert dst in rank, f"{target}: folder {dst} is in no layer of LAYERS"
            if rank[dst] > rank[src]:
                found.add((src, dst))
    assert not found, "imports up the layers (see LAYERS): " + ", ".join(
        f"{a} -> {b}" for a, b in sorted(found))


def test_the_graph_sees_imports_inside_functions(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from iolab.core import store\n")
    assert "iolab.core.store" in imports(f, "iolab.x")


def test_every_module_says_what_it_is_responsible_for_and_what_not():
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "__main__.py":
            continue
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        if "esponsible for" not in doc or "ot responsible" not in doc:
            missing.append(str(path.relative_to(REPO_ROOT)))
    assert not missing, "modules without a 'Responsible for ... Not responsible for' docstring: " \
        + ", ".join(missing)


def test_only_the_registry_imports_experiments_by_name():
    """The registry's dynamic import is the one way below the experiments to reach them; any
    other ``import_module`` or ``__import__`` would hide an upward import from the table."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr",
                                                      getattr(node.func, "id", None)) in (
                    "import_module", "__import__"):
                found.append(str(path.relative_to(PACKAGE)))
    assert sorted(set(found)) == ["core/registry.py"], found


EXPERIMENTS = "iolab.experiments"


def experiment_of(module: str) -> str | None:
    """The experiment a module belongs to: the package (or module) right under
    ``iolab/experiments/``; None outside it and for ``iolab.experiments`` itself."""
    parts = module.split(".")
    return parts[2] if module.startswith(EXPERIMENTS + ".") else None


def between_experiments(edges: dict[str, set[str]]) -> list[str]:
    """Every import from one experiment's package (at any depth) into another's, or into a
    module directly under ``iolab/experiments/`` other than its own: the experiments are
    plugins, and what two of them share lives below them (``iolab/shared/``,
    ``iolab/analysis/``). ``iolab.experiments`` itself (no code) is no experiment's."""
    return sorted(f"{source} -> {target}" for source, targets in edges.items()
                  for target in targets
                  if experiment_of(source) and experiment_of(target)
                  and experiment_of(source) != experiment_of(target))


def test_no_experiment_imports_another():
    found = between_experiments(graph())
    assert not found, "imports between experiments (move what they share below them): " \
        + ", ".join(found)


def test_the_experiments_folder_holds_only_experiment_packages():
    """A module beside the packages would be shared by experiments that then import it; what
    they share lives below them."""
    assert sorted(p.name for p in (PACKAGE / "experiments").glob("*.py")) == ["__init__.py"]


def test_an_import_between_experiments_fails_at_any_depth_and_inside_a_function(tmp_path):
    """Planted modules: a lazy import deep in one package, and an import of a module that
    sits directly under ``iolab/experiments/``, each reported; an import of its own package
    and of the package ``iolab.experiments`` are not."""
    planted = tmp_path / "deep.py"
    planted.write_text("def f():\n    from iolab.experiments.cpu_search import analysis\n"
                       "    from iolab.experiments.tool_comparison.analysis import at\n")
    deep = "iolab.experiments.cuda_iosize.sub.deep"
    edges = {deep: imports(planted, deep),
             "iolab.experiments.pcie_saturation.page": {"iolab.experiments.gpu_helpers",
                                                       "iolab.experiments.pcie_saturation",
                                                       "iolab.experiments"},
             "iolab.experiments.gpu_helpers": {"iolab.experiments.cuda_iosize.analysis"}}
    assert between_experiments(edges) == [
        f"{deep} -> iolab.experiments.cpu_search.analysis",
        f"{deep} -> iolab.experiments.tool_comparison.analysis",
        "iolab.experiments.gpu_helpers -> iolab.experiments.cuda_iosize.analysis",
        "iolab.experiments.pcie_saturation.page -> iolab.experiments.gpu_helpers"]


def campaign_imports(path: Path) -> list[str]:
    """The imports in a file of ``Campaign`` or of a module named ``campaign`` of iolab, at
    the top or inside a function."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names
                      if a.name.startswith("iolab") and a.name.split(".")[-1] == "campaign"]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("iolab"):
            found += [f"{node.module}.{a.name}" for a in node.names
                      if a.name in ("Campaign", "campaign")
                      or node.module.split(".")[-1] == "campaign"]
    return found


def test_no_analysis_module_imports_campaign():
    """An analysis is functions over the tables it is given: it never loads a campaign (its
    own or another experiment's); whoever calls it does."""
    found = {str(path.relative_to(REPO_ROOT)): campaign_imports(path)
             for path in sorted(PACKAGE.rglob("*.py"))
             if "analysis" in path.relative_to(PACKAGE).with_suffix("").parts}
    found = {path: names for path, names in found.items() if names}
    assert not found, f"analysis modules importing Campaign: {found}"


def test_an_analysis_importing_campaign_is_found(tmp_path):
    planted = tmp_path / "analysis.py"
    planted.write_text("from iolab.analysis import stats\n"
                       "def f():\n    from iolab.execution.campaign import Campaign\n"
                       "def g():\n    from iolab.execution import campaign\n"
                       "import iolab.core.campaign\n")
    assert sorted(campaign_imports(planted)) == [
        "iolab.core.campaign", "iolab.execution.campaign", "iolab.execution.campaign.Campaign"]


def test_experiments_never_parse_tool_output():
    """An experiment's analysis works on the tidy table; reading raw files is the parsers',
    the tool adapters' and the importers' (book/architecture.md, "The package")."""
    found = sorted(f"{source} -> {target}" for source, targets in graph().items()
                   if source.startswith("iolab.experiments") for target in targets
                   if target.startswith("iolab.parsers"))
    assert not found, "experiments importing parsers: " + ", ".join(found)


def test_the_shape_script_runs_from_any_folder_without_a_python_path(tmp_path):
    """scripts/code_shape.py measured only when run from the checkout with PYTHONPATH set."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "code_shape.py")],
                          cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("folder-level two-way imports: ")
