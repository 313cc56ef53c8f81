# Entry points for a fresh machine: `make demo`, `make notebook` and `make test`.
# Each creates .venv on first use and installs only what it needs:
#   demo      the package alone (its demo needs nothing else)
#   notebook  the package with matplotlib, JupyterLab and the kernel (the `notebook` extra)
#   test      the package with every development tool (the `dev` extra): lint, then `suite`
#   suite     the test suite alone, e.g. on another Python in a venv of its own:
#             `make suite PYTHON=python3.12 VENV=.venv-3.12` (what .ci/run does)
#   serve     examples/langgraph_server under `langgraph dev` (the `dev` extra has the CLI)
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
VENV_STAMP     := $(VENV)/.created
CORE_STAMP     := $(VENV)/.installed-core
NOTEBOOK_STAMP := $(VENV)/.installed-notebook
DEV_STAMP      := $(VENV)/.installed

.PHONY: demo notebook test suite lint bench serve clean

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

# Jupyter refuses to start as root (containers, CI) unless told it may: told only then.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u 2>/dev/null)),--allow-root)

notebook: $(NOTEBOOK_STAMP)
	$(PY) -m jupyter lab $(ALLOW_ROOT) notebooks/quickstart.ipynb

lint: $(DEV_STAMP)
	$(PY) -m ruff check langchain_resilient_tools tests bench notebooks examples
	$(PY) -m mypy

suite: $(DEV_STAMP)
	$(PY) -m pytest -q

test: lint suite

bench: $(DEV_STAMP)
	$(PY) -m bench

serve: $(DEV_STAMP)
	cd examples/langgraph_server && $(CURDIR)/$(PY) -m langgraph_cli dev

clean:
	rm -rf $(VENV) .venv-3.* .pytest_cache .mypy_cache .ruff_cache
