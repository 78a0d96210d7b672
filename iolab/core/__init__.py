"""The run core: specs and their schema, plans, run identity, the run store and its manifests,
the runner, the tidy table, and the migration of old manifests.

Responsible for: the path from a params file to stored runs and back to one table.
Not responsible for: any particular experiment, tool or host setting (``iolab.experiments``,
``iolab.tools``, ``iolab.host``), or presentation (``iolab.report``).
"""
