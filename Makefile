# Two entry points for a fresh machine: `make demo` and `make test`.
# Both create .venv and install what they need on first use.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m langchain_resilient_tools.demo

lint: $(STAMP)
	$(PY) -m ruff check langchain_resilient_tools tests bench notebooks
	$(PY) -m mypy

test: $(STAMP) lint
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) -m bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
