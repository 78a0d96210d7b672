"""Execution: a campaign planned against this host and run, run by run, with its knobs set,
its collectors started, its signals answered and its stop requests honoured; and the
:class:`~iolab.execution.campaign.Campaign` that joins the registry, the spec, the store and the
runner for the CLI, the batch jobs and the chapters.

Responsible for: making runs. Not responsible for: what a run is or where it is stored
(``iolab.core``), what any tool or host setting does (``iolab.tools``, ``iolab.collectors``,
``iolab.host``), or what an experiment wants (``iolab.experiments``).
"""
