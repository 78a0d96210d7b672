"""The package's shape: no import cycle, and every module says what it is responsible for.

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
