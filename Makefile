# Two commands on a fresh machine: `make book` and `make test`.
# Both bootstrap .venv with the pinned stack from pyproject.toml on first use; `make test`
# first does the system set-up its tests need (scripts/setup.py).

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# SPDK and xNVMe sources (tarballs or folders) for `make tools`; see the README
TOOLS_SRC ?= $(or $(IOLAB_TOOLS_SRC),../shared/tools-src)

.PHONY: book pdf test test-fast bench venv clean setup tools

venv: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "error: Python >= 3.11 is needed ($(PYTHON) is older); set PYTHON=/path/to/python3.11"; exit 1; }
	@$(PYTHON) -m venv $(VENV) || \
	  { echo "error: '$(PYTHON) -m venv' failed; on Debian/Ubuntu run: apt-get install python3-venv"; exit 1; }
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	@touch $@

# Replay every notebook from data/ (never touches hardware) and build the book strictly.
book: $(STAMP)
	$(VENV)/bin/iolab book

# The same book as one PDF, _build/pdf/book.pdf (XeLaTeX from TeX Live, which `make setup`
# installs as root); about five minutes on 2 vCPUs with the notebooks already replayed.
pdf: $(STAMP)
	$(VENV)/bin/iolab book --pdf

# System packages (installed when root, named otherwise) from scripts/system-packages.txt,
# then the SPDK and xNVMe builds when their sources are at hand; done, it does nothing.
setup:
	$(PYTHON) scripts/setup.py --tools-src $(TOOLS_SRC)

# Build xnvmeperf and bdevperf into .tools/ (cached: the same sources are not rebuilt).
tools:
	$(PYTHON) scripts/build_tools.py --from $(TOOLS_SRC)

# The set-up, then the whole suite: tiny real fio, bdevperf and xnvmeperf campaigns and the
# strict book build included.
test: setup $(STAMP)
	$(PY) -m pytest

# Everything except tests marked slow (real tools, papermill, the book build).
test-fast: $(STAMP)
	$(PY) -m pytest -m "not slow"

# The harness's own costs against their targets (benchmarks/run.py says what each key is),
# written to benchmarks/results/<machine-class>.json; about five minutes on 2 vCPUs. Needs fio.
bench: setup $(STAMP)
	$(PY) -m pip install --quiet -e '.[bench]'
	$(PY) benchmarks/run.py

# The executed notebooks in book/ (every registered experiment's chapter), the HTML, caches.
clean:
	rm -rf _build data/cache
	find book -name '*.ipynb' -delete
