"""Tool adapters: one module per benchmark tool (how to find it, its argv for a run, its
parser), and bdevperf's output marker (a collector its adapter starts). The registry of
adapters and collectors by name is :mod:`iolab.core.tool_registry`.

Responsible for: everything this package knows about a benchmark program it runs.
Not responsible for: the collectors that sample beside it (``iolab.collectors``), which runs
an experiment wants (``iolab.experiments``) or running them (``iolab.execution.runner``); the
output formats themselves are parsed in ``iolab.parsers``.
"""
