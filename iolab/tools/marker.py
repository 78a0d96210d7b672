"""The output marker: a timestamp for the line where a tool announces its measurement.

Responsible for: watching the driver's stdout for a pattern, writing ``marker.json``, and
reading it back checked (:func:`read_marker`). Not responsible for: what the line means (the
tool adapter reads the window from it).
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

from iolab.parsers import CLOCK_NS_ALLOWED, is_clock_ns, record_object, record_value
from iolab.tools.base import Collector


class OutputMarker(Collector):
    """Timestamps the first line of the driver's stdout that matches ``pattern``.

    Tools announce their measurement (bdevperf prints "Running I/O for 10 seconds...") but do
    not timestamp it; a thread polls ``stdout`` every ``interval_s`` and writes
    ``marker.json`` = {"pattern", "line", "time_ns"} (time_ns at most ``interval_s`` late).
    """

    name = "marker"
    FILE = "marker.json"

    def __init__(self, pattern: str, interval_s: float = 0.05) -> None:
        self.pattern = re.compile(pattern)
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, run_dir: Path) -> None:
        self._thread = threading.Thread(target=self._loop, args=(Path(run_dir),), daemon=True)
        self._thread.start()

    def _loop(self, run_dir: Path) -> None:
        stdout = run_dir / "stdout"
        while not self._stop.is_set():
            try:
                text = stdout.read_text(errors="replace")
            except OSError:
                text = ""
            for line in text.replace("\r", "\n").splitlines():
                if self.pattern.search(line):
                    (run_dir / "marker.json").write_text(json.dumps(
                        {"pattern": self.pattern.pattern, "line": line.strip(),
                         "time_ns": time.time_ns()}) + "\n")
                    return
            self._stop.wait(self.interval_s)

    def stop(self, run_dir: Path) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def read_marker(run_dir: Path) -> tuple[str, int]:
    """The marked line and when it was seen (CLOCK_REALTIME ns), from ``marker.json``: the
    marker's own record, read back as any output is, so a cut-off or altered one fails the
    run naming the file and the key, and a time no clock gives is never a window's start."""
    path = Path(run_dir) / OutputMarker.FILE
    source = str(path)
    mark = record_object(path.read_text(), source)
    line = record_value(mark, "line", source, lambda v: isinstance(v, str),
                        "the text of the line the pattern matched")
    return line, record_value(mark, "time_ns", source, is_clock_ns, CLOCK_NS_ALLOWED)
