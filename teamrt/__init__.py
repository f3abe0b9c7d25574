"""teamrt: a runtime for teams of LLM agents."""

import logging

__version__ = "0.1.0"

# A library stays quiet unless the application configures logging.
logging.getLogger("teamrt").addHandler(logging.NullHandler())
