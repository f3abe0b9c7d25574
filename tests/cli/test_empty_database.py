"""``TEAMRT_DB`` naming a PostgreSQL database no run has reached yet (no schema): ``ls`` lists no runs,
and ``show``/``logs`` of a run give the usual one line, as on a fresh run home."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from teamrt.cli import main
from teamrt.testing.pgserver import PgServer

_names = itertools.count(1)


@pytest.fixture
def empty_database(pg_server: PgServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    """``TEAMRT_DB`` on a new, empty database (not even Alembic's table), dropped afterwards."""
    name = f"empty{next(_names)}"
    url = pg_server.create_database(name)
    monkeypatch.setenv("TEAMRT_DB", url)
    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / "home"))
    yield name
    pg_server.drop_database(name)


def test_ls_on_an_empty_database_lists_no_runs(
    empty_database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ls"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out.startswith("no runs yet in postgresql+psycopg://") and f"/{empty_database};" in out
    assert main(["ls", "--json"]) == 0
    assert capsys.readouterr() == ("[]\n", "")


@pytest.mark.parametrize(
    "args", [["show", "r1"], ["logs", "r1"], ["logs", "r1", "-f"], ["show", "r1", "--json"]]
)
def test_show_and_logs_of_a_run_on_an_empty_database_is_one_line(
    empty_database: str, args: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(args) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"teamrt: no run named 'r1' in {tmp_path / 'home' / 'runs'}\n"
