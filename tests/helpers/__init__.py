"""What the tests share beyond fixtures: importable, so no test imports ``conftest``."""
