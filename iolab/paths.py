"""Where things live in the repository: the package root, notebooks, drivers and data.

Responsible for: default locations, overridable by every caller (``--data DIR``).
Not responsible for: creating or validating anything at those places.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
PARAMS_DIR = NOTEBOOKS_DIR / "params"
DRIVERS_DIR = REPO_ROOT / "scripts" / "drivers"
BOOK_DIR = REPO_ROOT / "book"


def default_data_dir() -> Path:
    """The data folder: ``$IOLAB_DATA`` when set, else the repository's ``data/``."""
    env = os.environ.get("IOLAB_DATA")
    return Path(env).resolve() if env else REPO_ROOT / "data"


def resolve_data_dir(data_dir: str | os.PathLike | None) -> Path:
    return Path(data_dir).resolve() if data_dir else default_data_dir()
