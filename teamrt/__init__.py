"""teamrt: a runtime for teams of LLM agents."""

__version__ = "0.1.0"
