"""The error types keep their message, type and fields across a process boundary (the tidy
table's worker processes pickle what they raise)."""

from __future__ import annotations

import pickle

from iolab.errors import InputError, ParseError


def test_errors_survive_pickling():
    for exc in (ParseError("/d/fio.json", "no report"),
                InputError("p.yaml", "runtime_s", "is negative", allowed="1..86400")):
        back = pickle.loads(pickle.dumps(exc))
        assert type(back) is type(exc) and str(back) == str(exc)
        assert vars(back) == vars(exc)
