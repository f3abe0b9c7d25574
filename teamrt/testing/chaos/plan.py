"""What a run suffers between and during its incarnations: a seeded plan of kills and faults
(``plan_for``), and the damage a fault does to the run's world after a kill (``damage``), as a person or
the machine would: the WAL cut, the integration branch or a coder's worktree deleted, a message corrupted.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from teamrt.events import SUPERVISOR
from teamrt.store.engine import run_file
from teamrt.testing.chaos.base import (
    BRANCH,
    CODER_WRITE,
    CODING_ONLY,
    DISK,
    FAULTS,
    INJECTED,
    INODES,
    KILL,
    KILLED,
    MAIL,
    PG_RESTART,
    POSTGRES_ONLY,
    WAL,
    WORKTREE,
    Kill,
    Reference,
    Step,
    note,
)

if TYPE_CHECKING:
    from teamrt.testing.pgserver import PgServer


@dataclass(frozen=True)
class World:
    """What a fault between incarnations may damage: the run's home, project and server."""

    home: Path
    project: Path
    run_id: str
    server: PgServer | None = None

    @property
    def run_dir(self) -> Path:
        return self.home / "runs" / self.run_id


def damage(step: Step, world: World) -> str | None:
    """Do to ``world`` what ``step``'s fault does after its kill, as a person or the machine would, and
    note it as injected; what was done, or None when there was nothing to damage (no WAL, no branch, no
    coder's write, no unread message) or the fault acts elsewhere."""
    act = {WAL: _damage_wal, BRANCH: _damage_branch, WORKTREE: _damage_worktree, MAIL: _damage_mail}
    done = act[step.fault](step, world) if step.fault in act else None
    if done is not None:
        note(world.home / f"{world.run_id}.{INJECTED}", f"{step.fault} {done}")
    return done


def _damage_wal(step: Step, world: World) -> str | None:
    """SQLite: the run's ``run.db-wal`` emptied, or cut in half. PostgreSQL: the server stopped as
    ``pg_ctl stop -m immediate`` does and started again: it recovers from its own WAL."""
    if run_file(world.run_dir) is None:
        if world.server is None:
            return None
        world.server.restart("immediate")
        return "server stopped immediate, started"
    wal = world.run_dir / "run.db-wal"
    size = wal.stat().st_size if wal.exists() else 0
    if size == 0:
        return None
    keep = size // 2 if step.variant == "half" else 0
    os.truncate(wal, keep)
    return f"run.db-wal {size} -> {keep} bytes"


def _damage_branch(step: Step, world: World) -> str | None:
    """The integration branch ``teamrt/<run>`` deleted (as ``git update-ref -d``: a worktree holds it)."""
    ref = f"refs/heads/teamrt/{world.run_id}"
    done = subprocess.run(["git", "update-ref", "-d", ref], cwd=world.project, capture_output=True,
                          text=True, check=False)  # fmt: skip
    exists = subprocess.run(["git", "rev-parse", "--verify", "-q", ref], cwd=world.project,
                            capture_output=True, check=False)  # fmt: skip
    return f"{ref} deleted" if done.returncode == 0 and exists.returncode != 0 else None


def _damage_worktree(step: Step, world: World) -> str | None:
    """The worktree of the coder whose write the kill came after, deleted."""
    where = world.home / f"{world.run_id}.{KILLED}"
    killed = where.read_text().split() if where.exists() else []
    if len(killed) < 3:
        return None
    path = world.run_dir / "worktrees" / killed[2]
    if not path.is_dir():
        return None
    shutil.rmtree(path)
    return f"worktrees/{killed[2]} deleted after {killed[1]}"


def _damage_mail(step: Step, world: World) -> str | None:
    """The newest unread message (not control mail, not the supervisor's) cut in half where it lies."""
    waiting = []
    for path in (world.run_dir / "mailbox").glob("*/new/*.json"):
        if path.parent.parent.name == SUPERVISOR:
            continue
        try:
            control = json.loads(path.read_bytes()).get("kind") == "control"
        except (OSError, ValueError):
            continue
        if not control:
            waiting.append(path)
    if not waiting:
        return None
    path = max(waiting, key=lambda p: p.name)
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    return f"{path.parent.parent.name}/new/{path.name} cut to {len(raw) // 2} of {len(raw)} bytes"


def kills_for(seed: int, count: int, ref: Reference) -> list[Kill]:
    """``count`` kills, seeded: at points the run reaches, early enough that each of ``count`` successive
    incarnations still gets there; one in four on a timer instead."""
    rng = random.Random(seed)
    points = sorted(p for p, n in ref.hits.items() if n > 0)
    kills = []
    for _ in range(count):
        if rng.random() < 0.25:
            kills.append(Kill(None, after_s=rng.uniform(0.05, ref.seconds / (count + 1))))
        else:
            point = rng.choice(points)
            kills.append(Kill(point, hit=rng.randint(1, max(1, ref.hits[point] // (count + 1)))))
    return kills


def applicable(kinds: Sequence[str], example: str, db: str) -> list[str]:
    """The faults of ``kinds`` a run of ``example`` on ``db`` (``sqlite``, ``postgres``) can suffer."""
    return [
        k
        for k in kinds
        if k != KILL
        and (example == "coding" or k not in CODING_ONLY)
        and (db == "postgres" or k not in POSTGRES_ONLY)
    ]


def plan_for(seed: int, count: int, ref: Reference, kinds: Sequence[str], db: str = "sqlite") -> list[Step]:
    """``count`` kills (``kills_for``), with a step for each fault of ``kinds`` put in among them at a
    seeded place: a ``pg-restart`` goes on the last incarnation (no kill: it must run on to the end)."""
    rng = random.Random(f"{seed} faults")
    steps = [Step(kill) for kill in kills_for(seed, count, ref)]
    last = Step(None)
    for kind in kinds:
        if kind == PG_RESTART:
            last = Step(None, PG_RESTART, restart_after_s=rng.uniform(0.3, 0.8))
        elif kind != KILL:  # a coder's fault early: its writes and merges are done by mid-run
            where = rng.randint(0, len(steps) // 2 if kind in CODING_ONLY else len(steps))
            steps.insert(where, fault_step(kind, rng, count, ref, db))
    return [*steps, last]


def fault_step(kind: str, rng: random.Random, count: int, ref: Reference, db: str) -> Step:
    """One incarnation that injects ``kind``: ENOSPC from the store (``disk``) or the mailbox (``inodes``)
    from an early hit on; or a kill where the damage that follows makes sense (a kill anywhere before the
    WAL is cut, after a merge before the branch goes, after a coder's write before its worktree goes, once
    a message is delivered before it is corrupted)."""
    early = max(1, ref.hits.get("store.before_commit", 1) // (count + 1))
    if kind == DISK:
        return Step(Kill("store.before_commit", hit=rng.randint(1, early), disk_full=True), DISK)
    if kind == INODES:
        return Step(Kill("mail.written", hit=rng.randint(1, 2), disk_full=True), INODES)
    if kind == WAL:
        kill = kills_for(rng.randrange(1 << 30), count, ref)[0]
        return Step(kill, WAL, "half" if db == "sqlite" and rng.random() < 0.5 else "empty")
    if kind == BRANCH:
        return Step(Kill("merge.after_ref", hit=1), BRANCH)
    if kind == WORKTREE:
        return Step(
            Kill("tool.after", hit=rng.randint(1, max(1, ref.writes // 3)), only=CODER_WRITE), WORKTREE
        )
    if kind == MAIL:
        return Step(Kill("mail.delivered", hit=rng.randint(1, 2)), MAIL)
    raise ValueError(f"no such fault: {kind!r} (the faults: {', '.join(FAULTS)})")
