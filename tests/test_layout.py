"""The package's shape: no import cycle, imports only down the layers, the experiments
reached from below only through the registry, and every module says what it is responsible
for.

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
# time (test_only_the_registry_imports_experiments_by_name), so nothing below them names one.
LAYERS = [
    {"errors", "paths", "streams", "durable", "procs", "workers", "safefiles", "lockfile",
     "yamlfile", "children", "__init__"},
    {"parsers", "analysis"},
    {"tools", "collectors", "host"},
    {"core"},
    {"importers"},
    {"execution"},
    {"report"},
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
