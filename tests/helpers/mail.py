"""Mail between real processes: tests/helpers/procs/mailproc.py started as a separate process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

RUN = "run1"
"""The run id of the tests' mailboxes."""

MAILPROC = str(Path(__file__).parent / "procs" / "mailproc.py")


def mailproc(*args: str) -> subprocess.Popen[str]:
    """Start tests/helpers/procs/mailproc.py as a separate process with piped text stdout."""
    return subprocess.Popen(
        [sys.executable, MAILPROC, *args], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True
    )
