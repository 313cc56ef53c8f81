# Entry points for a fresh machine: `make demo`, `make notebook` and `make test`.
# Each creates .venv on first use and installs only what it needs:
#   demo      the package alone (its demo needs nothing else)
#   notebook  the package with matplotlib, JupyterLab and the kernel (the `notebook` extra)
#   test      the package with every development tool (the `dev` extra): lint, then `suite`
#   suite     the whole test suite alone, e.g. on another Python in a venv of its own:
#             `make suite PYTHON=python3.12 VENV=.venv-3.12`
#   suite-fast  the suite without the tests marked `slow` (most real process kills,
#             PostgreSQL, the MCP reference servers, `langgraph dev`, the notebook), which
#             gives the same answer on every Python: .ci/run runs `test` (all of it) on
#             one Python and `suite-fast` on the others; `suite-slow` is the rest
#   dev       only create the venv and install the `dev` extra (.ci/run makes its venvs
#             side by side with it)
#   suite-mcp2  the tests marked `mcp2` (LangChain's own MCP adapter, `langchain.mcp`:
#             FastMCP 4 and mcp 2.x, which the dev venv cannot have beside
#             langchain-mcp-adapters and its mcp<2) in a venv of their own, MCP2_VENV
#             (.venv-mcp2, the `mcp2` extra); dev-mcp2 only makes that venv
#   serve     examples/langgraph_server under `langgraph dev` (the `dev` extra has the CLI)
#   docs      the package with the `docs` extra: serves the documentation site (mkdocs serve);
#             docs-build builds it strictly (lint does too)
# The suites run on JOBS pytest-xdist workers (`auto`: one per CPU; `JOBS=0` runs in
# one process); each test file stays on one worker (its module fixtures start once).
# Packages are installed with uv (from PyPI, put into the venv by its pip; several times
# faster than pip), or with pip where uv cannot be had or fails; `UV=0` uses pip alone.
PYTHON ?= python3
VENV   ?= .venv
JOBS   ?= auto
UV     ?= 1
PY     := $(VENV)/bin/python
VENV_UV := $(VENV)/bin/uv
PYTEST := $(PY) -m pytest -q -n $(JOBS) --dist loadfile --no-loadscope-reorder
VENV_STAMP     := $(VENV)/.created
CORE_STAMP     := $(VENV)/.installed-core
NOTEBOOK_STAMP := $(VENV)/.installed-notebook
DEV_STAMP      := $(VENV)/.installed
DOCS_STAMP     := $(VENV)/.installed-docs
MCP2_STAMP     := $(VENV)/.installed-mcp2
MCP2_VENV  ?= .venv-mcp2
MCP2_TESTS := tests/test_mcp_langchain.py

.PHONY: demo notebook dev test suite suite-fast suite-slow suite-mcp2 dev-mcp2 lint bench serve \
	docs docs-build clean

# $(call install,REQUIREMENTS): with the venv's uv, else (no uv, UV=0, or uv failed) pip.
define install
if [ "$(UV)" != 0 ] && [ -x $(VENV_UV) ]; then $(VENV_UV) pip install --quiet --python $(PY) $(1) \
|| { echo "uv failed: installing with pip" >&2; $(PY) -m pip install --quiet $(1); }; \
else $(PY) -m pip install --quiet $(1); fi
endef

$(VENV_STAMP):
	$(PYTHON) -m venv $(VENV)
	if [ "$(UV)" != 0 ] && $(PY) -m pip install --quiet uv; then :; \
	else echo "no uv: installing with pip"; $(PY) -m pip install --quiet --upgrade pip; fi
	touch $(VENV_STAMP)

$(CORE_STAMP): pyproject.toml | $(VENV_STAMP)
	$(call install,-e .)
	touch $(CORE_STAMP)

$(NOTEBOOK_STAMP): pyproject.toml | $(VENV_STAMP)
	$(call install,-e '.[notebook]')
	touch $(NOTEBOOK_STAMP)

$(DEV_STAMP): pyproject.toml | $(VENV_STAMP)
	$(call install,-e '.[dev]')
	touch $(DEV_STAMP)

demo: $(CORE_STAMP)
	$(PY) -m langchain_resilient_tools.demo

# Jupyter refuses to start as root (containers, CI) unless told it may: told only then.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u 2>/dev/null)),--allow-root)

notebook: $(NOTEBOOK_STAMP)
	$(PY) -m jupyter lab $(ALLOW_ROOT) notebooks/quickstart.ipynb

dev: $(DEV_STAMP)

lint: $(DEV_STAMP)
	$(PY) -m ruff check langchain_resilient_tools tests bench notebooks examples
	$(PY) -m ruff format --check --quiet langchain_resilient_tools tests bench notebooks examples
	$(PY) -m mypy
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --quiet --site-dir $(VENV)/site

suite: $(DEV_STAMP)
	$(PYTEST)

suite-fast: $(DEV_STAMP)
	$(PYTEST) -m "not slow"

suite-slow: $(DEV_STAMP)
	$(PYTEST) -m slow

test: lint suite

# The mcp2 targets run in MCP2_VENV: make calls itself with VENV set to it. One file, one
# process (its dozen tests each wait on one real timeout: xdist would cost more than it saves).
$(MCP2_STAMP): pyproject.toml | $(VENV_STAMP)
	$(call install,-e '.[mcp2]')
	touch $(MCP2_STAMP)

dev-mcp2:
	$(MAKE) --no-print-directory $(MCP2_VENV)/.installed-mcp2 VENV=$(MCP2_VENV)

suite-mcp2: dev-mcp2
	$(MCP2_VENV)/bin/python -m pytest -q -n 0 -m mcp2 $(MCP2_TESTS)

bench: $(DEV_STAMP)
	$(PY) -m bench

serve: $(DEV_STAMP)
	cd examples/langgraph_server && $(CURDIR)/$(PY) -m langgraph_cli dev

$(DOCS_STAMP): pyproject.toml | $(VENV_STAMP)
	$(call install,-e '.[docs]')
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs serve

docs-build: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir $(VENV)/site

clean:
	rm -rf $(VENV) .venv-3.* $(MCP2_VENV) .pytest_cache .mypy_cache .ruff_cache
