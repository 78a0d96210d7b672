"""``python -m iolab`` and the ``iolab`` command: the CLI (``iolab.cli``), where Ctrl-C while
the libraries are still being imported ends as quietly as Ctrl-C anywhere else."""

import sys


def run() -> int:
    try:
        from iolab.cli import main

        return main()
    except KeyboardInterrupt:
        print("iolab: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(run())
