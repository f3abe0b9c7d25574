# Two commands for a fresh machine: `make demo` and `make test`.
# Each bootstraps .venv and installs the project (with its dev tools) first.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The MCP conformance test's server (tests/test_mcp_everything.py), pinned by tests/mcp_everything's lock file,
# installed with npm next to the venv and stamped the same way.
NODE_PACKAGES := tests/mcp_everything
NPM_DIR := .npm
NPM_STAMP := $(NPM_DIR)/.installed

.PHONY: demo test lint typecheck bench mutants clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

$(NPM_STAMP): $(NODE_PACKAGES)/package.json $(NODE_PACKAGES)/package-lock.json
	@command -v node >/dev/null && command -v npm >/dev/null || { echo "make: node and npm are needed for the MCP conformance test (tests/test_mcp_everything.py): install Node.js 18 or newer" >&2; exit 1; }
	mkdir -p $(NPM_DIR)
	cp $(NODE_PACKAGES)/package.json $(NODE_PACKAGES)/package-lock.json $(NPM_DIR)/
	npm ci --prefix $(NPM_DIR) --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $(NPM_STAMP)

demo: $(STAMP)
	$(BIN)/teamrt demo

lint: $(STAMP)
	$(BIN)/ruff check teamrt tests benchmarks
	$(BIN)/ruff format --check teamrt tests benchmarks
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

# Three workers on two cores: most tests wait on processes, sockets and files, not on the CPU.
test: lint typecheck $(NPM_STAMP)
	$(BIN)/pytest -n 3 -m "not proof"

bench: $(STAMP)
	$(BIN)/python benchmarks/mailbox.py
	$(BIN)/python benchmarks/store.py
	$(BIN)/python benchmarks/models.py
	$(BIN)/python benchmarks/loop.py
	$(BIN)/python benchmarks/fanout.py
	$(BIN)/python benchmarks/worktree.py
	$(BIN)/python benchmarks/chaos.py
	$(BIN)/python benchmarks/resume.py
	$(BIN)/python benchmarks/tui.py
	$(BIN)/python benchmarks/grep.py
	$(BIN)/python benchmarks/queue.py
	$(BIN)/pytest -n 3 -m proof

# The mutation gate: each curated one-line bug in benchmarks/mutants.toml must fail its tests (up to 15 min).
mutants: $(STAMP)
	$(BIN)/python benchmarks/mutants.py

clean:
	rm -rf $(VENV) $(NPM_DIR) .pytest_cache .mypy_cache .ruff_cache .import_linter_cache
