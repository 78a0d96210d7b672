"""iolab: plan, run, store, parse and analyse storage I/O experiments.

The package holds the domain (experiment specs, plans, the run store, parsers, tidy
tables, statistics) and a thin CLI over it. It never renders the book itself; the
notebooks in ``notebooks/`` call into it and ``jupyter-book`` renders their output.
"""

__version__ = "0.1.0"
