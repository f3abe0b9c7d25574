"""``teamrt`` run in the test's own process, as a person types it: the exit status and what it printed."""

from __future__ import annotations

import pytest

from teamrt.cli import main


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``teamrt ARGS``: its exit status, stdout and stderr."""
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def cli_ok(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """``teamrt ARGS``, which must succeed saying nothing on stderr: its stdout."""
    code, out, err = cli(capsys, *args)
    assert code == 0 and err == "", (code, err)
    return out
