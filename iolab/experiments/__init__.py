"""The experiments: one package per experiment (``<name>/__init__.py`` defining ``EXPERIMENT``,
an :class:`~iolab.core.experiment.Experiment`), with its analysis and its chapter's page.

The package itself holds no code: :mod:`iolab.core.registry` finds its experiments by name.

Responsible for: what each experiment measures, how it analyses it and what its chapter shows.
Not responsible for: finding experiments (``iolab.core.registry``), running them
(``iolab.execution``), or drawing and gluing (``iolab.report``).
"""
