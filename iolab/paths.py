"""Where things live in the repository: the package root, notebooks, drivers and data.

Responsible for: default locations, overridable by every caller (``--data DIR``), and
resolving a path a user gives (:func:`resolve`).
Also: :func:`check_name`, for every name that becomes a folder (an experiment, an
environment), so that no name leads outside the data directory.
Also: where iolab keeps its own state (its state folder, its lock folders, the book's build
record), so that the lowest layer (``iolab.safefiles``) can refuse to write over them.
Not responsible for: creating or validating anything at those places.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
PARAMS_DIR = NOTEBOOKS_DIR / "params"
DRIVERS_DIR = REPO_ROOT / "scripts" / "drivers"
BOOK_DIR = REPO_ROOT / "book"
# the record of what the book was last built from (iolab.report.freshness)
BOOK_BUILD_RECORD = REPO_ROOT / "_build" / ".iolab-fresh.json"
# the system's lock folders, in the order tried (iolab.core.locks keeps its locks there)
HOST_LOCK_DIRS = (Path("/run/lock"), Path("/var/lock"))


def default_data_dir() -> Path:
    """The data folder: ``$IOLAB_DATA`` when set, else the repository's ``data/``."""
    env = os.environ.get("IOLAB_DATA")
    return _resolve(env, "$IOLAB_DATA") if env else REPO_ROOT / "data"


def resolve_data_dir(data_dir: str | os.PathLike | None) -> Path:
    """The data directory a ``--data`` option or a notebook's ``data_dir`` names, as an
    absolute path, or the default one (:func:`default_data_dir`) when it names none."""
    return _resolve(data_dir, "--data") if data_dir else default_data_dir()


def _resolve(path: str | os.PathLike, source: str) -> Path:
    return resolve(path, source, "a data directory, or a link to one")


def resolve(path: str | os.PathLike, source: str, allowed: str) -> Path:
    """``path`` (given as ``source``: an option, an argument) as the absolute path it names,
    links and ``..`` resolved, so that its name is the name of what it names (``dir/..`` is
    the parent, not a file called ``..``); InputError on a loop of links."""
    from iolab.errors import InputError

    try:
        return Path(path).resolve()
    except (RuntimeError, OSError) as exc:  # RuntimeError: a loop of symbolic links
        raise InputError(source, None, f"{os.fspath(path)!r} cannot be resolved "
                         f"({'a loop of symbolic links' if isinstance(exc, RuntimeError) else exc})",
                         allowed=allowed) from None


def checkout_of(folder: Path) -> Path | None:
    """The iolab checkout ``folder`` lies in (the nearest folder at or above it whose
    pyproject.toml names the project iolab), or None."""
    for place in [folder, *folder.parents]:
        project = place / "pyproject.toml"
        try:
            if project.is_file() and re.search(r'(?m)^name\s*=\s*"iolab"\s*$',
                                               project.read_text(errors="replace")):
                return place
        except OSError:
            return None
    return None


def foreign_checkout(cwd: Path | None = None) -> Path | None:
    """The iolab checkout the user works in, when it is not the one this package runs from
    (a virtualenv made in, or copied from, another checkout); else None."""
    try:
        here = checkout_of((cwd or Path.cwd()).resolve())
    except OSError:  # the working folder was removed
        return None
    return here if here is not None and here.resolve() != REPO_ROOT else None


NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# characters of a name at most: it names folders and, with a suffix, files (<environment>.parquet,
# <experiment>.yaml, a temporary name beside them), and a file system takes at most 255 bytes
# a name; a longer one failed deep inside a command with "File name too long", naming a
# temporary file
NAME_MOST = 100
NAME_RULE = (f"letters, digits, '.', '_' and '-', starting with a letter or digit, at most "
             f"{NAME_MOST} characters (it names a folder)")


def usable_name(name: object) -> bool:
    """Whether ``name`` is a safe folder name (:data:`NAME_RULE`; no separators, no '..',
    not longer than :data:`NAME_MOST`)."""
    return (isinstance(name, str) and len(name) <= NAME_MOST and NAME.fullmatch(name) is not None
            and ".." not in name)


def check_name(kind: str, name: object) -> str:
    """``name`` if it is a safe folder name (no separators, no '..', at most
    :data:`NAME_MOST` characters); else InputError naming ``kind`` (the key) and, for a
    name too long, its length and the limit."""
    from iolab.errors import InputError, excerpt

    if isinstance(name, str) and len(name) > NAME_MOST:  # quoted short: the line stays short
        raise InputError(None, kind, f"{excerpt(name, 40)} is {len(name)} characters long, "
                         f"more than the {NAME_MOST} a name may have", allowed=NAME_RULE)
    if not usable_name(name):
        raise InputError(None, kind, f"{name!r} is not a usable {kind} name", allowed=NAME_RULE)
    return name


def state_dir() -> Path:
    """This user's iolab state on this host (the registry of scratch files): ``$IOLAB_STATE_DIR``,
    else ``$XDG_STATE_HOME/iolab``, else ``~/.local/state/iolab``."""
    env = os.environ.get("IOLAB_STATE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_STATE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "state") / "iolab"


def lock_dir() -> Path:
    """Where the data and host locks live: ``$IOLAB_LOCK_DIR``, else the system's lock
    folder."""
    override = os.environ.get("IOLAB_LOCK_DIR")
    if override:
        return Path(override)
    return system_lock_dir()


def system_lock_dir() -> Path:
    """The first writable system lock folder (where the knob locks always live)."""
    for folder in HOST_LOCK_DIRS:
        if folder.is_dir() and os.access(folder, os.W_OK | os.X_OK):
            return folder
    # an unprivileged user on a host without a shared lock folder cannot change system
    # settings anyway; a per-user folder still keeps that user's campaigns apart
    return Path(f"/tmp/iolab-locks.{os.getuid()}")


def shown(path: str | os.PathLike) -> str:
    """A path of the checkout as the repository names it (``notebooks/params/...``); any
    other as it is. Where the checkout lies says nothing about a plan or a refusal, and a book
    built anywhere then reads the same."""
    text = os.fspath(path)
    root = f"{REPO_ROOT}{os.sep}"
    return text[len(root):] if text.startswith(root) else text
