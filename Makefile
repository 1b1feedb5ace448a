# Set-up and checks. `make demo` and `make test` work on a fresh clone: they create .venv if missing.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin

.PHONY: demo test lint typecheck pytest wheel docs docs-serve bench clean api-snapshot mutate

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# Stamp files re-run the install only when pyproject.toml changes.
$(VENV)/.demo-installed: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[gym,plot]'
	touch $@

$(VENV)/.dev-installed: pyproject.toml constraints-dev.txt | $(PY)
	$(PY) -m pip install --quiet -e '.[dev,docs]' -c constraints-dev.txt
	touch $@ $(VENV)/.demo-installed

demo: $(VENV)/.demo-installed
	$(PY) examples/demo.py

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# pyright's type-completeness check: what Pylance users see (tests/project/verify_types.py says which
# gap is another package's). PYTHONPATH finds the editable src.
typecheck: $(VENV)/.dev-installed
	$(BIN)/mypy --strict
	PYTHONPATH=src $(PY) tests/project/verify_types.py

# In reverse order (conftest.py), so that CI catches a test that passes only after another;
# the fresh-process tests run in `wheel`, against the installed wheel instead of the source.
pytest: $(VENV)/.dev-installed
	$(BIN)/pytest --reverse-order --ignore=tests/project/test_fresh_process.py

# Build the sdist and the wheel, `twine check --strict` them, install the wheel with its extras
# into a fresh venv and run the fresh-process tests and examples/demo.py with it.
wheel: $(VENV)/.dev-installed
	$(PY) tests/project/wheel_check.py

docs: $(VENV)/.dev-installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# Serve the docs with live reload on http://127.0.0.1:8000 (or open site/index.html from disk).
docs-serve: $(VENV)/.dev-installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:8000

test: lint typecheck pytest docs wheel

# Rewrite tests/project/public_api.txt from the source (after an intended API change; add its
# CHANGELOG line in the same commit: tests/project/test_public_api.py fails until both agree).
api-snapshot: $(VENV)/.dev-installed
	$(PY) tests/project/api_snapshot.py --write

# Mutation testing (mutmut; not part of `make test`, it takes hours): mutants of every module
# of src/trajkit against the tests that reach them ([tool.mutmut] of pyproject.toml), then the
# kill rate per package and the survivors. `make mutate MUTANTS='trajkit._io.jsonbudget*'`
# runs some. The last rates: CONTRIBUTING.md.
# mutmut forks one child per mutant after the tests ran once: a thread pool (torch's OpenMP,
# numba's) started before the fork hangs the children, which then count as timeouts (killed).
MUTANTS ?=
mutate: $(VENV)/.dev-installed
	rm -rf mutants
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 NUMBA_NUM_THREADS=1 $(BIN)/mutmut run $(MUTANTS)
	$(BIN)/mutmut results
	$(PY) tests/mutation_report.py

bench: $(VENV)/.dev-installed
	$(PY) benchmarks/run.py

clean:
	rm -rf site build .mypy_cache .ruff_cache .pytest_cache .hypothesis mutants
