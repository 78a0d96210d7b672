"""iolab: plan, run, store, parse and analyse storage I/O experiments.

The folders, in their layers from the bottom (``tests/test_layout.py`` holds the order, and
``book/architecture.md`` says why): ``errors``, ``paths``, ``streams``, ``durable`` (crash-safe
writes) and ``procs`` (the processes a campaign owns); ``parsers`` (pure parsers of output
formats) and ``analysis`` (statistics); ``tools`` (one adapter per benchmark tool),
``collectors`` (one module per sampler beside a tool) and ``host`` (the inventory, the
journaled knobs); ``core`` (specs, the experiment interface and registry, plans and the search,
run identity, the store, the tidy table); ``importers`` (AiSIO archives); ``execution`` (the
plan against this host, making runs, ``Campaign``); ``report`` (what the chapters share, and
rendering the book); ``experiments`` (one package per experiment, found by the registry);
``batch`` (Slurm jobs), ``status``, ``scaffold`` (``iolab new-experiment``) and ``schemas`` (the
published JSON Schemas); ``cli`` (one module per verb) and ``api`` (what notebooks import).

Responsible for: the domain and a thin CLI over it. Not responsible for: the book's prose (the
notebooks in ``notebooks/`` and the pages in ``book/``).
"""

__version__ = "0.2.0"
