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
     "yamlfile", "children", "checks", "__init__"},
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



LONGEST_FUNCTION = 60  # lines: a function a reader takes in at one look (issue 29's measure)


def test_no_function_of_the_package_is_longer_than_one_screen():
    """The shape script's count of functions over 60 lines is held at none, as issue 29 left
    it: a long function is split into named steps, not allowed to grow back."""
    import ast

    long = [f"{path.relative_to(REPO_ROOT)}:{node.name} ({node.end_lineno - node.lineno + 1})"
            for path in sorted((REPO_ROOT / "iolab").rglob("*.py"))
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > LONGEST_FUNCTION]
    assert not long, "functions over 60 lines: " + ", ".join(long)

# --- private names stay in their module ---------------------------------------------------
# A name with a leading underscore is its module's own: another module that imports it (or
# reads it as ``module._name``) depends on what its owner may change without a word. What two
# modules share gets a public name. Tests are exempt: a unit test reaches a module's private
# helpers on purpose (and patches them), and nothing in the package depends on a test.
PRIVATE_IMPORTS_LEFT: set[str] = set()  # "importer -> module._name" still to be made public


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _resolved(node: ast.ImportFrom, package: str) -> str:
    base = node.module or ""
    if node.level:
        parent = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join(parent + ([base] if base else []))
    return base


def private_uses(path: Path, name: str) -> set[str]:
    """``importer -> module._name`` for every private name of another iolab module that the
    file imports (``from iolab.x import _y``, at any depth, relative imports too) or reads
    as an attribute of a module it imported (``x._y``, ``iolab.x._y``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    modules = {module_name(p) for p in PACKAGE.rglob("*.py")}
    tree = ast.parse(path.read_text())
    found, aliases = set(), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = _resolved(node, package)
            if not base.startswith("iolab") or base == name:
                continue
            for alias in node.names:
                if _is_private(alias.name):
                    found.add(f"{name} -> {base}.{alias.name}")
                elif f"{base}.{alias.name}" in modules:
                    aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("iolab"):
                    aliases[alias.asname or alias.name] = alias.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            owner = ast.unparse(node.value)
            module = aliases.get(owner, owner if owner in modules else None)
            if module is not None and module != name:
                found.add(f"{name} -> {module}.{node.attr}")
    return found


def test_no_module_uses_another_modules_private_names():
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        found |= private_uses(path, module_name(path))
    assert not found - PRIVATE_IMPORTS_LEFT, (
        "private names used outside their module (give what is shared a public name): "
        + ", ".join(sorted(found - PRIVATE_IMPORTS_LEFT)))
    assert not PRIVATE_IMPORTS_LEFT - found, (
        "made public already; strike from PRIVATE_IMPORTS_LEFT: "
        + ", ".join(sorted(PRIVATE_IMPORTS_LEFT - found)))


def test_private_uses_sees_imports_attributes_and_relative_imports(tmp_path):
    pkg = tmp_path / "iolab" / "host"
    pkg.mkdir(parents=True)
    f = pkg / "m.py"
    f.write_text("from iolab.host.knobs import Knob, _echo\n"
                 "from . import knobs as k\n"
                 "import iolab.core.spec\n"
                 "def f():\n"
                 "    from .knobs import _cpus_value\n"
                 "    return k._echo, iolab.core.spec._assign, k.parse_cpulist, _own()\n")
    assert private_uses(f, "iolab.host.m") == {
        "iolab.host.m -> iolab.host.knobs._echo", "iolab.host.m -> iolab.host.knobs._cpus_value",
        "iolab.host.m -> iolab.core.spec._assign"}


def test_a_module_may_use_its_own_private_names(tmp_path):
    f = tmp_path / "knobs.py"
    f.write_text("import iolab.host.knobs\nx = iolab.host.knobs._echo\n")
    assert private_uses(f, "iolab.host.knobs") == set()


# --- one positive-whole-number check -------------------------------------------------------
# "A positive whole number" was written out by hand in five adapters (isinstance int, not bool,
# >= 1), each a place to forget the bool; iolab.checks says it once, below every layer.
_POSITIVE_BOUNDS = {(ast.Lt, 1), (ast.LtE, 0), (ast.Gt, 0), (ast.GtE, 1)}


def _int_tested(node: ast.AST) -> str | None:
    """The expression ``isinstance(x, int)`` or ``type(x) is int`` tests, else None."""
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" \
            and len(node.args) == 2 and getattr(node.args[1], "id", None) == "int":
        return ast.unparse(node.args[0])
    if isinstance(node, ast.Compare) and isinstance(node.left, ast.Call) \
            and getattr(node.left.func, "id", None) == "type" \
            and getattr(node.comparators[0], "id", None) == "int":
        return ast.unparse(node.left.args[0])
    return None


def _bounded_below(node: ast.AST) -> str | None:
    """The expression ``x < 1``, ``x <= 0``, ``x > 0`` or ``x >= 1`` compares, else None."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1 \
            and isinstance(node.comparators[0], ast.Constant) \
            and (type(node.ops[0]), node.comparators[0].value) in _POSITIVE_BOUNDS:
        return ast.unparse(node.left)
    return None


def hand_written_positive_ints(path: Path) -> list[int]:
    """Lines of ``path`` where one condition tests a value both for int and for >= 1."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.BoolOp):
            parts = list(ast.walk(node))
            ints = {_int_tested(p) for p in parts} - {None}
            if ints & ({_bounded_below(p) for p in parts} - {None}):
                lines.append(node.lineno)
    return sorted(set(lines))


def test_no_hand_written_positive_whole_number_check():
    found = [f"{path.relative_to(REPO_ROOT)}:{line}"
             for path in sorted(PACKAGE.rglob("*.py")) if path.name != "checks.py"
             for line in hand_written_positive_ints(path)]
    assert not found, "positive whole numbers checked by hand (use iolab.checks): " \
        + ", ".join(found)


def test_the_positive_check_finder_sees_each_spelling(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("a = isinstance(v, bool) or not isinstance(v, int) or v < 1\n"
                 "b = isinstance(w, int) and w > 0\n"
                 "c = type(x) is int and x >= 1\n"
                 "d = not isinstance(y, int) or y <= 0\n"
                 "e = isinstance(z, int) and z >= 0\n"           # a GPU id: 0 is allowed
                 "f = isinstance(q, (int, float)) and q > 0\n")  # a number, not a whole one
    assert hand_written_positive_ints(f) == [1, 2, 3, 4]
