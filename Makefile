# dpkit — make test | make demo | make bench
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BENCH_VENV := .venv-bench
BENCH_PY := $(BENCH_VENV)/bin/python
SYNTH_VENV := .venv-synth
SYNTH_PY := $(SYNTH_VENV)/bin/python

.PHONY: test demo bench lint typecheck pytest clean system-deps

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks

typecheck: $(VENV)/.installed
	$(VENV)/bin/mypy --strict src

# The curator's dashboard tests drive a real headless browser; nothing to do when it is there.
system-deps:
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium; }

pytest: $(VENV)/.installed system-deps
	$(PY) -m pytest -W error

test: lint typecheck pytest

demo: $(VENV)/.installed
	MPLBACKEND=Agg $(PY) -m dpkit.demo

# Peer libraries pin old NumPy/scikit-learn, so they live in an environment of their own.
$(BENCH_VENV)/.installed: pyproject.toml benchmarks/requirements.txt
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

bench: $(BENCH_VENV)/.installed $(SYNTH_VENV)/.installed $(VENV)/.installed
	for b in benchmarks/[a-z]*.py; do \
	  [ $$b = benchmarks/release.py ] || $(BENCH_PY) $$b || exit 1; done
	PYTHONPATH=src $(SYNTH_PY) benchmarks/release.py
	@echo "== core rows again on the project's own NumPy (the newest 2.x that pip gives users) =="
	PYTHONPATH=src $(PY) benchmarks/noise.py
	PYTHONPATH=src $(PY) benchmarks/stats.py

clean:
	rm -rf $(VENV) $(BENCH_VENV) $(SYNTH_VENV) build src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
