# Entry points for a fresh machine: `make demo`, `make notebook` and `make test`.
# Each creates .venv on first use and installs only what it needs:
#   demo      the package alone (its demo needs nothing else)
#   notebook  the package with matplotlib, JupyterLab and the kernel (the `notebook` extra)
#   test      the package with every development tool (the `dev` extra): lint, then `suite`
#   suite     the test suite alone, e.g. on another Python in a venv of its own:
#             `make suite PYTHON=python3.12 VENV=.venv-3.12` (what .ci/run does)
#   serve     examples/langgraph_server under `langgraph dev` (the `dev` extra has the CLI)
#   docs      the package with the `docs` extra: serves the documentation site (mkdocs serve);
#             docs-build builds it strictly (lint does too)
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
VENV_STAMP     := $(VENV)/.created
CORE_STAMP     := $(VENV)/.installed-core
NOTEBOOK_STAMP := $(VENV)/.installed-notebook
DEV_STAMP      := $(VENV)/.installed
DOCS_STAMP     := $(VENV)/.installed-docs

.PHONY: demo notebook test suite lint bench serve docs docs-build clean

$(VENV_STAMP):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	touch $(VENV_STAMP)

$(CORE_STAMP): pyproject.toml | $(VENV_STAMP)
	$(PY) -m pip install --quiet -e .
	touch $(CORE_STAMP)

$(NOTEBOOK_STAMP): pyproject.toml | $(VENV_STAMP)
	$(PY) -m pip install --quiet -e '.[notebook]'
	touch $(NOTEBOOK_STAMP)

$(DEV_STAMP): pyproject.toml | $(VENV_STAMP)
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(DEV_STAMP)

demo: $(CORE_STAMP)
	$(PY) -m langchain_resilient_tools.demo

notebook: $(NOTEBOOK_STAMP)
	$(PY) -m jupyter lab notebooks/quickstart.ipynb

lint: $(DEV_STAMP)
	$(PY) -m ruff check langchain_resilient_tools tests bench notebooks examples
	$(PY) -m mypy
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --quiet --site-dir $(VENV)/site

suite: $(DEV_STAMP)
	$(PY) -m pytest -q

test: lint suite

bench: $(DEV_STAMP)
	$(PY) -m bench

serve: $(DEV_STAMP)
	cd examples/langgraph_server && $(CURDIR)/$(PY) -m langgraph_cli dev

$(DOCS_STAMP): pyproject.toml | $(VENV_STAMP)
	$(PY) -m pip install --quiet -e '.[docs]'
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs serve

docs-build: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir $(VENV)/site

clean:
	rm -rf $(VENV) .venv-3.* .pytest_cache .mypy_cache .ruff_cache
