# Two entry points: `make demo` (the main job on the embedded engine) and `make test`.
# Everything else is a step they depend on; each step is idempotent and cached.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
STAMP := $(VENV)/.servebook-installed
JOURNAL ?= journal

.PHONY: setup engine browser demo site lab check test unit guard bench sample-journals clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test,router,real]"
	touch $(STAMP)

setup: $(STAMP)

# Builds llama-server once (4 to 8 minutes on 2 cores) into ~/.cache/servebook; later calls return at once.
engine: setup
	$(BIN)/servebook engine install llamacpp
	$(BIN)/servebook models tiny
	$(BIN)/servebook models real gemma3-270m

# The demo: chunk size and slots on the tiny model (5 candidates through notebooks/qualify.ipynb, papermill),
# judged; the drafter question on real weights (Gemma 3 270M: no drafter, four n-gram drafters, itself as its
# draft); the capacity under a service objective of the shipped 4 slots against one; then the journal published
# as a static site. A second call skips the candidates already recorded.
demo: engine
	$(BIN)/servebook sweep data/studies/tiny-demo.yaml --journal $(JOURNAL)
	$(BIN)/servebook sweep data/studies/real-drafters.yaml --journal $(JOURNAL)
	$(BIN)/servebook sweep data/studies/tiny-capacity.yaml --journal $(JOURNAL)
	$(BIN)/servebook site --journal $(JOURNAL) --out site

# Debian's Chromium for the browser tests; Playwright drives it (it never downloads a browser).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -q && apt-get install -y -q chromium; \
	  else sudo apt-get update -q && sudo apt-get install -y -q chromium; fi; }

site: setup
	$(BIN)/servebook site --journal $(JOURNAL) --out site

# JupyterLab on the notebooks (kernels start in notebooks/; servebook reads relative paths from there, then from
# the project root). In a container as root it needs --allow-root; LAB_FLAGS adds more (e.g. --ip 0.0.0.0).
LAB_FLAGS ?=
lab: engine
	$(BIN)/python -m pip install --quiet -e ".[lab]"
	$(BIN)/jupyter lab --notebook-dir notebooks --no-browser $$( [ "$$(id -u)" = 0 ] && echo --allow-root ) $(LAB_FLAGS)

# The code's own checks, before any test: layers (import-linter), types (mypy with the pydantic plugin, over the
# whole servebook package), lint and sorted imports (ruff).
check: setup
	$(BIN)/lint-imports --no-cache
	$(BIN)/mypy
	$(BIN)/ruff check lib tests benchmarks scripts tools

test: engine browser check
	$(BIN)/python -m pytest -q tests

unit: check
	$(BIN)/python -m pytest -q tests/unit

# every speed target at sizes that fit in a minute, each as figure / target (benchmarks/guard.py); run it alone,
# before and after a change to the journal, index, site, client or judge
guard: setup
	$(BIN)/python benchmarks/guard.py

bench: engine browser
	$(BIN)/python benchmarks/decode_rate_vs_server.py
	$(BIN)/python benchmarks/sweep_overhead.py
	$(BIN)/python benchmarks/sweep_parallel.py
	$(BIN)/python benchmarks/journal_ls.py
	$(BIN)/python benchmarks/site_build.py --runs 1000
	$(BIN)/python benchmarks/site_paint.py

# The sample journals live in one archive, data/sample-journals.tar.xz. To add one: `servebook journal samples`
# (extracts them into ./sample-journals), put the new journal's folder beside them, then `make sample-journals`
# (SAMPLES=DIR re-packs from another folder). Packing is deterministic: an unchanged set gives the same bytes.
SAMPLES ?= sample-journals
sample-journals: setup
	$(BIN)/python scripts/pack_sample_journals.py $(SAMPLES)

clean:
	rm -rf $(VENV) site .pytest_cache
