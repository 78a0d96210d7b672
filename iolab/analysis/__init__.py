"""Statistics shared by every experiment's analysis (each experiment's own analysis lives in
its package, e.g. ``iolab.experiments.<name>.analysis``).

Responsible for: summaries and intervals that name their method.
Not responsible for: loading data (``iolab.core.tidy``) or presenting it (``iolab.report``).
"""
