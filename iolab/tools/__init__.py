"""Tool adapters and collectors: one module per benchmark tool (how to find it, its argv for a
run, its parser) and per collector (what it samples around a run and how that is parsed).

Responsible for: everything this package knows about a program it runs or reads.
Not responsible for: which runs an experiment wants (``iolab.experiments``) or running them
(``iolab.core.runner``); the output formats themselves are parsed in ``iolab.parsers``.
"""
