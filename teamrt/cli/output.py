"""What every ``teamrt`` command says besides its own output: exit statuses, errors, notes, JSON.

A command's mistakes end in one line on stderr (``error``) and a non-zero exit; a run's progress and
notes go to stderr (``notice``), its answer to stdout. Each quotes agent data (a file's name, a branch,
a reason, an owner's host), so each is made safe for a terminal here (``teamrt.terminal``).
"""

from __future__ import annotations

import json
import sys

from teamrt.terminal import clean, clean_json, clean_line

EXIT_USAGE = 2
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130


def notice(line: str) -> None:
    """A line (or lines) on stderr: a run's progress and notes, which quote agent data, made safe for a
    terminal."""
    print(clean(line), file=sys.stderr, flush=True)


def error(said: object) -> None:
    """``teamrt: <said>`` on stderr, on one line safe for a terminal: an error may quote agent data (a
    file's name, a branch, a reason, an owner's host)."""
    print(f"teamrt: {clean_line(str(said))}", file=sys.stderr)


def warning(line: str) -> None:
    """Under --quiet, what a run's start must still say: its notes and warnings, not its start line."""
    if line.startswith("teamrt: "):
        notice(line)


def print_json(value: object) -> None:
    """``value`` as JSON on stdout, the whole of what a ``--json`` command prints there; nothing in it that
    a terminal would act on (``clean_json``: the same values, escaped)."""
    print(clean_json(json.dumps(value, indent=2, ensure_ascii=False, default=str)))
