# dpkit — make test | make demo | make bench
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BENCH_VENV := .venv-bench
BENCH_PY := $(BENCH_VENV)/bin/python
SYNTH_VENV := .venv-synth
SYNTH_PY := $(SYNTH_VENV)/bin/python
DEMO_VENV := .venv-demo
DEMO_PY := $(DEMO_VENV)/bin/python
SNSQL_VENV := .venv-snsql
SNSQL_PY := $(SNSQL_VENV)/bin/python
PGM_VENV := .venv-pgm
PGM_PY := $(PGM_VENV)/bin/python
REF_ARGS ?= --datasets fair randhie --methods mst

.PHONY: test demo bench reference lint typecheck pytest docs clean system-deps

# setup.py and the C source: the editable install builds the compiled sum in place, so a change
# to either must rebuild it (a stale module would sum with old code).
KERNEL := setup.py src/dpkit/stats/_fixedsum.c

$(VENV)/.installed: pyproject.toml $(KERNEL)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check src tests benchmarks tools
	$(VENV)/bin/ruff format --check src tests benchmarks tools

typecheck: $(VENV)/.installed
	$(VENV)/bin/mypy --strict src

# The curator's dashboard tests drive a real headless browser; nothing to do when it is there.
system-deps:
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium; }

pytest: $(VENV)/.installed system-deps
	$(PY) -m pytest -W error -n 2 --dist loadfile --durations=25

# The site (API reference from the docstrings) must build without a warning; the notebooks under
# docs/notebooks/ are executed by tests/docs/test_notebooks.py, which `pytest` runs.
docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir build/site

test: lint typecheck docs pytest

# The demo has an environment of its own with only what it imports (no Spark, no test tools).
# It is kept small: no pip inside it (the outer pip installs into it), and no bytecode compiled at
# install time (Python caches what the demo imports when it first runs).
$(DEMO_VENV)/.installed: pyproject.toml $(KERNEL)
	test -x $(DEMO_PY) || $(PYTHON) -m venv --without-pip $(DEMO_VENV)
	$(PYTHON) -m pip --python $(DEMO_PY) install --quiet --no-compile -e '.[demo]'
	touch $@

demo: $(DEMO_VENV)/.installed
	MPLBACKEND=Agg $(DEMO_PY) -m dpkit.demo

# Peer libraries pin old NumPy/scikit-learn, so they live in an environment of their own.
$(BENCH_VENV)/.installed: pyproject.toml benchmarks/requirements.txt $(KERNEL)
	test -x $(BENCH_PY) || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_PY) -m pip install --quiet --upgrade pip
	$(BENCH_PY) -m pip install --quiet -r benchmarks/requirements.txt
	$(BENCH_PY) -m pip install --quiet --no-deps -e .
	touch $@

# SmartNoise Synth (JAX, numpy 2) cannot share the peers' numpy<2 environment.
$(SYNTH_VENV)/.installed: benchmarks/requirements-synth.txt
	test -x $(SYNTH_PY) || $(PYTHON) -m venv $(SYNTH_VENV)
	$(SYNTH_PY) -m pip install --quiet --upgrade pip
	$(SYNTH_PY) -m pip install --quiet -r benchmarks/requirements-synth.txt
	touch $@

# SmartNoise SQL pins an older OpenDP than the peers' environment compares against.
$(SNSQL_VENV)/.installed: benchmarks/requirements-sql.txt
	test -x $(SNSQL_PY) || $(PYTHON) -m venv $(SNSQL_VENV)
	$(SNSQL_PY) -m pip install --quiet --upgrade pip
	$(SNSQL_PY) -m pip install --quiet -r benchmarks/requirements-sql.txt
	touch $@

# The reference AIM and MST on private-pgm's estimator (mbi 2.0.0 pins its own JAX and numpy 2).
$(PGM_VENV)/.installed: benchmarks/requirements-pgm.txt
	test -x $(PGM_PY) || $(PYTHON) -m venv $(PGM_VENV)
	$(PGM_PY) -m pip install --quiet --upgrade pip
	$(PGM_PY) -m pip install --quiet -r benchmarks/requirements-pgm.txt
	touch $@

# Refreshes benchmarks/reference_pgm.json, which benchmarks/release.py reads. MST takes about
# half a minute a run; AIM (REF_ARGS="--methods aim ...") ten minutes to an hour, so not in bench.
reference: $(PGM_VENV)/.installed
	PYTHONPATH=src $(PGM_PY) benchmarks/reference_pgm.py $(REF_ARGS)

# Every script prints its speed targets and appends them to $(BENCH_TARGETS); the last step
# prints them all in one table, with the target rows that no script reported.
BENCH_TARGETS := build/bench-targets.jsonl
bench: export DPKIT_BENCH_TARGETS = $(CURDIR)/$(BENCH_TARGETS)
bench: $(BENCH_VENV)/.installed $(SYNTH_VENV)/.installed $(SNSQL_VENV)/.installed $(VENV)/.installed
	mkdir -p build && rm -f $(BENCH_TARGETS)
	for b in benchmarks/[a-z]*.py; do \
	  [ $$b = benchmarks/release.py ] || [ $$b = benchmarks/sql.py ] || \
	  [ $$b = benchmarks/reference_pgm.py ] || $(BENCH_PY) $$b || exit 1; done
	PYTHONPATH=src $(SYNTH_PY) benchmarks/release.py
	PYTHONPATH=src $(SNSQL_PY) benchmarks/sql.py
	@echo "== core rows again on the project's own NumPy (the newest 2.x that pip gives users) =="
	PYTHONPATH=src $(PY) benchmarks/noise.py
	PYTHONPATH=src $(PY) benchmarks/stats.py
	$(PY) benchmarks/_summary.py $(BENCH_TARGETS)

clean:
	rm -rf $(VENV) $(BENCH_VENV) $(SYNTH_VENV) $(SNSQL_VENV) $(PGM_VENV) $(DEMO_VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
