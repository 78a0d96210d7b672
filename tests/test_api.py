"""The notebooks' API (``iolab.api``): every notebook imports from the package only that module,
and every name the module offers exists and says what it is."""

from __future__ import annotations

import ast
import inspect

import nbformat
import pytest

from iolab import api
from iolab.core import registry
from iolab.errors import InputError
from iolab.paths import NOTEBOOKS_DIR, REPO_ROOT


def notebooks() -> list:
    found = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
    found += sorted({e.notebook for e in registry.all_experiments()} - set(found))
    found += sorted((REPO_ROOT / "tests" / "fixtures").rglob("*.ipynb"))
    found += sorted((REPO_ROOT / "iolab").rglob("*.ipynb.tmpl"))  # the scaffold's template
    return found


def iolab_imports(source: str) -> list[str]:
    """Every ``iolab`` module a cell's code imports from, as written."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "iolab":
            out += [f"{node.module}.{a.name}" if node.module == "iolab" else node.module
                    for a in node.names]
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names if a.name.split(".")[0] == "iolab"]
    return out


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.name)
def test_a_notebook_imports_only_the_api(path):
    nb = nbformat.read(path, as_version=4)
    used = [m for cell in nb.cells if cell.cell_type == "code"
            for m in iolab_imports(cell.source)]
    assert used, f"{path.name} uses nothing of iolab: is it still a chapter?"
    assert set(used) <= {"iolab.api"}, \
        f"{path.name} imports {sorted(set(used) - {'iolab.api'})}: use iolab.api only"


def test_the_check_sees_each_form_of_import():
    assert iolab_imports("from iolab.report.chapter import Chapter") == ["iolab.report.chapter"]
    assert iolab_imports("import iolab.core.store as s") == ["iolab.core.store"]
    assert iolab_imports("from iolab import api, paths") == ["iolab.api", "iolab.paths"]
    assert iolab_imports("import pandas as pd\nfrom myst_nb import glue") == []


def test_every_name_of_the_api_exists_and_is_documented():
    assert len(api.__all__) == len(set(api.__all__))
    for name in api.__all__:
        obj = getattr(api, name)
        assert inspect.getdoc(obj), f"iolab.api.{name} has no docstring"


def test_page_finds_an_experiments_modules_and_names_what_is_wrong():
    assert api.page("smt_thp").__name__ == "iolab.experiments.smt_thp.page"
    assert api.page("cpu_search", "adaptive").__name__ == "iolab.experiments.cpu_search.adaptive"
    with pytest.raises(InputError, match="unknown experiment 'nope'"):
        api.page("nope")
    with pytest.raises(InputError, match="no module 'nope'"):
        api.page("smt_thp", "nope")
