"""iolab: plan, run, store, parse and analyse storage I/O experiments.

Folders: ``core`` (specs, plans, run identity, the store, the runner, the tidy table),
``experiments`` (one package per experiment, found by a registry), ``tools`` (one adapter per
benchmark tool and collector), ``parsers`` (pure parsers of output formats), ``host`` (the
inventory and the journaled knobs), ``analysis`` (statistics), ``report`` (what the book's
notebooks share, and rendering the book), ``importers`` (AiSIO archives); ``campaign`` joins
them for the CLI (``cli``) and the notebooks.

Responsible for: the domain and a thin CLI over it. Not responsible for: the book's prose (the
notebooks in ``notebooks/`` and the pages in ``book/``).
"""

__version__ = "0.2.0"
