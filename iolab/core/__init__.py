"""The run core: specs and their schema, the experiment interface and registry, plans and
the search, run identity, the run store and its manifests, the tidy table, and the migration of
old manifests.

Responsible for: the path from a params file to planned runs, and from stored runs back to one
table. Not responsible for: making runs (``iolab.execution``), any particular experiment, tool
or host setting (``iolab.experiments``, ``iolab.tools``, ``iolab.collectors``, ``iolab.host``),
or presentation (``iolab.report``).
"""
