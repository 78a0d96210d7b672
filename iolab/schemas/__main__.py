"""``python -m iolab.schemas``: write the JSON Schemas from the code's definitions;
``--check``: only say which committed schema files differ (exit status 1 if any).

Responsible for: the regeneration command. Not responsible for: the schemas
(``iolab.schemas.generate``).
"""

from __future__ import annotations

import sys

from iolab.errors import printable
from iolab.paths import shown
from iolab.schemas import SCHEMA_DIR, generate


def main(argv: list[str]) -> int:
    if argv not in ([], ["--check"]):
        print("usage: python -m iolab.schemas [--check]", file=sys.stderr)
        return 2
    if argv:
        stale = generate.differences()
        print("\n".join(map(printable, stale)) if stale
              else f"{printable(shown(SCHEMA_DIR))}: up to date")
        return 1 if stale else 0
    names = generate.write()
    print(f"wrote {len(names)} schemas to {printable(shown(SCHEMA_DIR))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
