"""The data format published as JSON Schemas (draft 2020-12), and stored files checked against them.

The ``*.schema.json`` files in this folder are generated from the code's own definitions
(:mod:`iolab.schemas.generate`, :mod:`iolab.schemas.params`) and committed; regenerate them
with ``python -m iolab.schemas`` after changing a definition (a test fails until then).
:func:`iolab.schemas.verify.verify` (``iolab verify``) validates the files under ``data/raw`` and the params
files against them.

Responsible for: naming the folder the schemas live in. Not responsible for: the definitions
themselves (the modules that write and read each file) or reading the data (``iolab.core``).
"""

from __future__ import annotations

from pathlib import Path

SCHEMA_DIR = Path(__file__).resolve().parent
