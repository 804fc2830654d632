# Every target sets up .venv first (created with python3 -m venv, the project installed
# editable) when it is missing or older than pyproject.toml: `make demo` with the core
# dependencies only, every other target with the dev extra (tests, docs, every env suite).
# pip's own output goes to .venv/pip.log (shown where a step fails); one line per step.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
CORE := $(VENV)/.installed-core
STAMP := $(VENV)/.installed-dev
PIP_LOG := $(VENV)/pip.log
PIP := $(PY) -m pip install --disable-pip-version-check

.PHONY: demo test test-slow test-newest test-all bench bench-minatar bench-breakout ablate lint docs clean setup

setup: $(STAMP)

$(CORE): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "setup: podracer-rl and its core dependencies into $(VENV) (pip's output: $(PIP_LOG))"
	@$(PIP) --upgrade pip > $(PIP_LOG) 2>&1 || (tail -n 40 $(PIP_LOG); exit 1)
	@$(PIP) -e . >> $(PIP_LOG) 2>&1 || (tail -n 40 $(PIP_LOG); exit 1)
	@touch $(CORE)

$(STAMP): $(CORE)
	@echo "setup: the dev extra (tests, docs, every env suite) into $(VENV)"
	@$(PIP) -e '.[dev]' >> $(PIP_LOG) 2>&1 || (tail -n 40 $(PIP_LOG); exit 1)
	@touch $(STAMP)

DEMO_DIR ?= runs/demo

demo: $(CORE)
	rm -rf $(DEMO_DIR)
	$(PY) -m anakin.main --config=configs/cartpole_ppo.py --workdir=$(DEMO_DIR)

# Two pytest-xdist workers (TEST_WORKERS=0: one process, no workers). `make test` is the
# default tier, every test but those marked `slow`; `make test-slow` is the long tier (agents
# trained to thresholds, suites, notebooks, long variants of default-tier checks);
# `make test-newest` the smoke tests on the newest stack; CI runs all three; `make test-all`
# runs the first two in one session (README, Tests).
# Each tier says first how long it took on a quiet 2-core host (WORKSPACE-notes.md, "CI's
# tiers"), then prints a progress line every 30 s (tests/progress.py) and pytest's summary.
TEST_WORKERS ?= 2
PYTEST := $(PY) -m pytest -q -n $(TEST_WORKERS) -p tests.progress --progress-lines \
	-o console_output_style=classic

test: $(STAMP)
	@echo "make test: the default tier, about 12 minutes on a quiet 2-core host (a progress line every 30 s)"
	$(PYTEST) -m "not slow" tests

test-slow: $(STAMP)
	@echo "make test-slow: the long tier, about 24 minutes on a quiet 2-core host (a progress line every 30 s)"
	$(PYTEST) -m slow tests

# The newest stack (CI's third tier): its own venv, .venv-newest, with the newest Python >= 3.12
# found (or NEWEST_PYTHON=...) and every dependency upgraded to its newest release that
# resolves, at every call; then the default tier's `smoke` tests (docs/testing.md).
NEWEST_VENV := .venv-newest
NEWEST_PYTHON ?=

test-newest:
	.ci/newest-stack $(NEWEST_VENV) $(NEWEST_PYTHON)
	$(NEWEST_VENV)/bin/python -m pytest -q -n $(TEST_WORKERS) -m "smoke and not slow" tests

test-all: $(STAMP)
	$(PYTEST) tests

bench: $(STAMP)
	$(PY) -m benchmarks.anakin_throughput
	$(PY) -m benchmarks.sebulba_throughput

# Anakin PPO on MinAtar Breakout for 10M env steps (15-21 min on 2 cores): curve + clock.
bench-minatar: $(STAMP)
	$(PY) -m benchmarks.minatar_breakout

# Sebulba PPO on Atari Breakout-v5 (configs/atari_ppo_2core.py) until a mean return of 10 or
# 60 minutes: curve, wall-clock, stage timers.
bench-breakout: $(STAMP)
	$(PY) -m benchmarks.breakout

# The ablation suites of the README's Results (about 15 + 5 minutes on 2 cores).
ablate: $(STAMP)
	$(PY) -m benchmarks.ablate --suite=architectures --seeds=3 --out=runs/ablate/architectures
	$(PY) -m benchmarks.ablate --suite=pipelines --seeds=1 --out=runs/ablate/pipelines

# ruff over the tree, then pyright over rlcore ([tool.pyright] in pyproject.toml).
lint: $(STAMP)
	$(PY) -m ruff check .
	PYRIGHT_PYTHON_IGNORE_WARNINGS=1 $(PY) -m pyright --pythonpath $(PY)

# The manual (mkdocs.yml, docs/) into site/; open site/index.html. The default test tier
# builds it too (tests/test_docs.py), so `make test` fails on a broken page.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) $(NEWEST_VENV) runs site
