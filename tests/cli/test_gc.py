"""``teamrt gc --runs --older-than AGE``: old finished runs go (their directories, and their rows in a shared
database); live, crashed and unapplied runs stay, each said why; nothing outside the runs home is touched."""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import case, create_engine, func, select, update
from sqlalchemy.pool import NullPool

from teamrt.cli import main
from teamrt.cli.parser import _age
from teamrt.store import Store, create_store
from teamrt.store import tables as t
from teamrt.store.engine import store_url
from teamrt.store.schema import Base
from tests.cli.test_runs import crashed_run
from tests.helpers.cli import cli_ok as cli
from tests.helpers.git import IDENTITY, git, make_repo

DAY = 86400.0


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / "home"))
    for key, value in IDENTITY.items():
        monkeypatch.setenv(key, value)
    path = tmp_path / "home" / "runs"
    path.mkdir(parents=True)
    return path


def new_run(
    runs: Path, run: str, *, workdir: str = "/w", settings: dict[str, Any] | None = None, **kw: Any
) -> Store:
    (runs / run).mkdir()
    store = create_store(runs / run, run, task="a task", workdir=workdir, settings=settings, **kw)

    async def fill() -> None:
        await store.add_agent("lead", kind="lead", model="sim")
        task = await store.create_task("first", "do it", created_by="lead", blocked_by=[])
        await store.create_task("second", "then this", created_by="lead", blocked_by=[task.id])
        await store.append_event("agent.status", {"status": "running"}, agent="lead")

    asyncio.run(fill())
    return store


def finished_run(runs: Path, run: str, *, days_ago: float, status: str = "done", **kw: Any) -> None:
    with new_run(runs, run, **kw) as store:
        asyncio.run(store.set_run_status(status))
    aged(runs / run, run, days_ago)


def aged(run_dir: Path, run: str, days_ago: float) -> None:
    """The run as if it started and ended ``days_ago`` days ago (its last heartbeat too)."""
    at = time.time() - days_ago * DAY
    engine = create_engine(store_url(run_dir), poolclass=NullPool)
    with engine.begin() as conn:
        conn.execute(
            update(t.runs).where(t.runs.c.id == run)
            .values(created_at=at - 60, heartbeat_at=at,
                    finished_at=case((t.runs.c.finished_at.is_(None), None), else_=at))
        )  # fmt: skip
    engine.dispose()


def rows_of(run_dir: Path, run: str) -> int:
    """Every row the database holds for ``run``, in every table."""
    engine = create_engine(store_url(run_dir), poolclass=NullPool)
    with engine.connect() as conn:
        count = conn.execute(select(func.count()).select_from(t.runs).where(t.runs.c.id == run)).scalar_one()
        for table in Base.metadata.sorted_tables:
            if "run_id" in table.c:
                count += conn.execute(
                    select(func.count()).select_from(table).where(table.c.run_id == run)
                ).scalar_one()
    engine.dispose()
    return count


def test_ages_read_as_a_number_and_a_unit() -> None:
    assert [_age(text) for text in ("30d", "12h", "2w", "90m", "45s", "1.5d", "0s", "3D")] == [
        30 * DAY, 12 * 3600, 14 * DAY, 5400, 45, 1.5 * DAY, 0, 3 * DAY,
    ]  # fmt: skip
    for bad in ("30", "d", "-1d", "3x", "nand", "infd", "", "1e400d"):
        with pytest.raises(argparse.ArgumentTypeError, match="expected an age such as 30d"):
            _age(bad)


@pytest.mark.usefixtures("store_db")
def test_old_finished_runs_go_and_live_young_or_crashed_ones_stay(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    finished_run(runs, "r-old", days_ago=40)
    finished_run(runs, "r-failed", days_ago=31, status="failed")
    finished_run(runs, "r-new", days_ago=2)
    crashed_run(runs, "r-crashed")
    aged(runs / "r-crashed", "r-crashed", 50)
    live = new_run(runs, "r-live")
    try:
        aged(runs / "r-live", "r-live", 0)  # started long ago, beating now
        before = {p.name for p in runs.iterdir()}
        said = cli(capsys, "gc", "--runs", "--older-than", "30d", "--dry-run").splitlines()
        assert {p.name for p in runs.iterdir()} == before and rows_of(runs / "r-old", "r-old") > 0
        assert (
            said[0] == "r-crashed: would keep: it crashed; teamrt resume r-crashed goes on with it,"
            " gc --runs --force removes it"
        )
        rows = " and its rows in the database" if os.environ.get("TEAMRT_DB") else ""
        assert said[1].startswith(
            f"r-old: would remove run directory {runs / 'r-old'}{rows} (done, ended 40d ago, "
        )
        assert said[2].startswith(f"r-failed: would remove run directory {runs / 'r-failed'}{rows} (failed, ")
        assert said[3].startswith("would remove 2 run(s), ")
        assert said[3].endswith("; would keep 1 (said above)")
        assert said[4:] == ["dry run: nothing was changed"]

        said = cli(capsys, "gc", "--runs", "--older-than", "30d").splitlines()
        assert said[2].startswith(f"r-failed: removed run directory {runs / 'r-failed'}{rows} (failed, ")
        assert said[3].startswith("removed 2 run(s), ")
        assert {p.name for p in runs.iterdir()} == {"r-new", "r-crashed", "r-live"}
        if os.environ.get("TEAMRT_DB"):
            assert rows_of(runs / "r-old", "r-old") == 0 and rows_of(runs / "r-new", "r-new") > 0

        said = cli(capsys, "gc", "--runs", "--older-than", "30d", "--force").splitlines()
        assert said[0].startswith("r-crashed: removed run directory") and said[1].startswith(
            "removed 1 run(s)"
        )
        assert {p.name for p in runs.iterdir()} == {"r-new", "r-live"}
        listed = cli(capsys, "ls")
        assert "r-new" in listed and "r-live" in listed and "r-old" not in listed
        assert (
            cli(capsys, "gc", "--runs", "--older-than", "1d", "--force")
            .splitlines()[0]
            .startswith("r-new: removed run directory")
        ), "a live run never goes, even forced"
        assert [p.name for p in runs.iterdir()] == ["r-live"]
        assert cli(capsys, "gc", "--runs", "--older-than", "1d") == (
            "nothing to remove: no finished run ended more than 1d ago\n"
        )
    finally:
        live.close()


def test_a_run_whose_integration_branch_was_not_applied_stays_until_applied_or_forced(
    tmp_path: Path, runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path / "project", {"app.py": "x = 1\n"})
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "teamrt/r1")
    (repo / "app.py").write_text("x = 2\n")
    git(repo, "commit", "-qam", "the run's work")
    git(repo, "checkout", "-q", "main")
    settings = {"integration_branch": "teamrt/r1"}
    finished_run(runs, "r1", days_ago=40, workdir=str(repo), settings=settings, base_head=base)
    said = cli(capsys, "gc", "--runs", "--older-than", "30d").splitlines()
    assert said == [
        "r1: kept teamrt/r1: not applied (teamrt apply r1, or gc --force to delete)",
        f"r1: kept: run directory {runs / 'r1'}, for the work kept above",
        "removed 0 run(s), 0 bytes; kept 1 (said above)",
    ]
    assert (runs / "r1").is_dir() and git(repo, "branch", "--list", "teamrt/r1")
    git(repo, "merge", "-q", "--ff-only", "teamrt/r1")  # as teamrt apply does
    said = cli(capsys, "gc", "--runs", "--older-than", "30d").splitlines()
    assert said[0] == "r1: deleted branch teamrt/r1" and said[1].startswith("r1: removed run directory")
    assert not (runs / "r1").exists() and not git(repo, "branch", "--list", "teamrt/r1")


def test_a_run_whose_repository_is_gone_stays_unless_forced(
    tmp_path: Path, runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    finished_run(
        runs, "r1", days_ago=40, workdir=str(tmp_path / "moved"), settings={"integration_branch": "teamrt/r1"}
    )
    said = cli(capsys, "gc", "--runs", "--older-than", "30d").splitlines()
    assert said[0].startswith(f"r1: kept: its repository {tmp_path / 'moved'} is gone or moved")
    said = cli(capsys, "gc", "--runs", "--older-than", "30d", "--force").splitlines()
    assert said[-2].startswith("r1: removed run directory") and not (runs / "r1").exists()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["gc", "--runs"], "teamrt: gc --runs needs --older-than AGE"),
        (["gc", "--older-than", "3d"], "teamrt: --older-than picks the runs that gc --runs removes"),
        (["gc", "--runs", "--older-than", "3x"], "teamrt gc: argument --older-than: expected an age"),
    ],
)
def test_gc_runs_without_a_good_age_is_one_line(
    runs: Path, args: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    finished_run(runs, "r1", days_ago=40)
    assert main(args) != 0
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(said) and err.count("\n") == 1
    assert (runs / "r1").is_dir()


@pytest.mark.hostile
def test_gc_removes_nothing_outside_the_runs_home(
    tmp_path: Path, runs: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A shared database names its runs; a run directory may be a link out of the runs home, a run's id a
    path, and inside a run directory an agent's command may have left links out and read-only folders."""
    monkeypatch.setenv("TEAMRT_DB", f"sqlite:///{tmp_path / 'shared.db'}")
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep.txt").write_text("mine\n")
    finished_run(runs, "r-link", days_ago=40)
    os.rename(runs / "r-link", tmp_path / "elsewhere")
    (runs / "r-link").symlink_to(precious)  # the run's directory swapped for a link out
    finished_run(runs, "r-left", days_ago=40)
    (runs / "r-left" / "out").symlink_to(precious)
    locked = runs / "r-left" / "worktrees" / "coder" / "locked"
    locked.mkdir(parents=True)
    (locked / "file").write_text("x")
    locked.chmod(0o500)
    locked.parent.chmod(0o500)
    engine = create_engine(store_url(runs / "x"), poolclass=NullPool)
    with engine.begin() as conn:  # a row whose id is a path out of the runs home
        row = conn.execute(select(t.runs).where(t.runs.c.id == "r-left")).one()._asdict()
        conn.execute(t.runs.insert().values({**row, "id": "../precious"}))
    engine.dispose()

    said = cli(capsys, "gc", "--runs", "--older-than", "30d", "--force").splitlines()
    assert f"../precious: kept: not a run name; nothing under {runs} is touched for it" in said
    assert f"r-link: kept: {runs / 'r-link'} is not a directory but a link or a file; left alone" in said
    removed = f"r-left: removed run directory {runs / 'r-left'} and its rows in the database (done, "
    assert next(line for line in said if line.startswith("r-left: ")).startswith(removed)
    assert said[-1].startswith("removed 1 run(s), ") and said[-1].endswith("; kept 2 (said above)")
    assert (precious / "keep.txt").read_text() == "mine\n" and sorted(os.listdir(precious)) == ["keep.txt"]
    assert (runs / "r-link").is_symlink() and (tmp_path / "elsewhere").is_dir()
    assert not (runs / "r-left").exists()
