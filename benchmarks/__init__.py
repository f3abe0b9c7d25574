"""The benchmarks, each a script: .venv/bin/python benchmarks/NAME.py --json (a package for mypy alone)."""
