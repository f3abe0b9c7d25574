# Two commands for a fresh machine: `make demo` and `make test`.
# Each bootstraps .venv and installs the project (with its dev tools) first.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck bench mutants clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/teamrt demo

lint: $(STAMP)
	$(BIN)/ruff check teamrt tests benchmarks
	$(BIN)/ruff format --check teamrt tests benchmarks
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

# Three workers on two cores: most tests wait on processes, sockets and files, not on the CPU.
test: lint typecheck
	$(BIN)/pytest -n 3

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

# The mutation gate: each curated one-line bug in benchmarks/mutants.toml must fail its tests (up to 15 min).
mutants: $(STAMP)
	$(BIN)/python benchmarks/mutants.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .import_linter_cache
