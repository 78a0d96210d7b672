"""Print the package's shape: folder-level import loops, the largest modules, the longest
functions, and how many functions pass 60 lines.

Responsible for: measuring, the same way at any commit (``git worktree add`` an old one and
run this script of that checkout, from any folder), what issue 29's before/after table
reports.
Not responsible for: judging it; the layer rules are ``tests/test_layout.py``'s.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

# the checkout this script lies in, whatever the working folder: its package and its tests
ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from test_layout import folder_of, graph  # noqa: E402  (the test's own import graph)


def main() -> None:
    edges: dict[tuple[str, str], set[str]] = {}
    for source, targets in graph().items():
        for target in targets:
            pair = (folder_of(source), folder_of(target))
            if pair[0] != pair[1]:
                edges.setdefault(pair, set()).add(f"{source} -> {target}")
    loops = sorted({tuple(sorted(p)) for p in edges if (p[1], p[0]) in edges})
    print(f"folder-level two-way imports: {len(loops)}")
    for a, b in loops:
        print(f"  {a} <-> {b}: {len(edges[(a, b)])} + {len(edges[(b, a)])} module imports")
    files = sorted(((len(p.read_text().splitlines()), str(p.relative_to(ROOT)))
                    for p in (ROOT / "iolab").rglob("*.py")), reverse=True)
    print("largest modules (lines):")
    for n, path in files[:6]:
        print(f"  {n:5d}  {path}")
    funcs = []
    for p in (ROOT / "iolab").rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                n_args = len(args.posonlyargs) + len(args.args) + len(args.kwonlyargs)
                funcs.append((node.end_lineno - node.lineno + 1,
                              f"{p.relative_to(ROOT)}:{node.name}", n_args))
    funcs.sort(reverse=True)
    print("longest functions (lines, parameters):")
    for n, name, n_args in funcs[:8]:
        print(f"  {n:5d}  {n_args:3d}  {name}")
    print(f"functions over 60 lines: {sum(1 for f in funcs if f[0] > 60)}")


if __name__ == "__main__":
    main()
