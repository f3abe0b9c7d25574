"""How a run ended through crashes compares with an uninterrupted run of the same example
(``reference``): the answer and the result, the mail (none lost, none twice), side effects run twice,
the store's integrity; what injected faults, hangs and refused resumes explain, and what is a silent loss.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from contextlib import closing
from itertools import pairwise
from pathlib import Path
from typing import Any

from teamrt.events import SUPERVISOR
from teamrt.mailbox.maildir import REASON_SUFFIX as REASON
from teamrt.runtime import losses
from teamrt.runtime.restore import REPEATABLE
from teamrt.store.engine import run_file
from teamrt.testing.chaos.base import (
    ERRORS,
    EXECUTIONS,
    HANGS,
    HITS,
    INJECTED,
    KILL,
    REFUSED,
    RESUMES,
    STOPS,
    WRITES,
    Key,
    Mail,
    Reference,
    Result,
    read_notes,
)
from teamrt.testing.chaos.harness import run_through_crashes


def reference(example: str, home: Path, project: Path, ctx: Any) -> Reference:
    started = time.monotonic()
    run_id, _ = run_through_crashes(example, home, project, [], ctx)
    seconds = time.monotonic() - started
    hits = json.loads((home / f"{run_id}.{HITS}").read_text())
    return Reference(*observe(example, home, run_id, project), hits, seconds, _coder_writes(home, run_id))


def _coder_writes(home: Path, run_id: str) -> int:
    """How many write or edit calls the run's coders (its agents with a worktree) ran to the end."""
    from teamrt.store import open_reader

    ran = {line.split(" ", 1)[1] for line in read_notes(home / f"{run_id}.{EXECUTIONS}") if " " in line}
    reader = open_reader(home / "runs" / run_id, run_id)
    try:
        coders = {e.agent for e in reader.events(kinds=("worktree.created",))}
        calls = reader.tool_calls()
    finally:
        reader.close()
    return sum(c.id in ran and c.name in WRITES and c.agent in coders for c in calls)


SILENT = {
    "outcome": losses.KINDS,
    "mail": frozenset({losses.MAIL_QUARANTINED, losses.MAIL_FAILED, losses.STORE_BEHIND}),
    "twice": frozenset({losses.STORE_BEHIND}),
}
"""Which loss events name which kind of difference from the uninterrupted run. A different status,
answer or result may follow from any loss; mail lost or doubled only from mail that failed or was
quarantined, or from a store behind its files; a side effect run twice only from the latter. A refused
resume names them all: the person was told and chose to go on."""


def check(example: str, home: Path, run_id: str, project: Path, ref: Reference, kills: int) -> Result:
    """How the run ``run_id`` of ``example``, ended through ``kills`` kills, compares with ``ref``; with
    the faults injected, the hangs, the refused resumes, and the losses named and silent."""
    from teamrt.store import open_reader

    result = Result(example, kills=kills)
    run_dir = home / "runs" / run_id
    starts = [float(line.split()[0]) for line in read_notes(home / f"{run_id}.{RESUMES}")]
    result.resumes = len(starts)
    reader = open_reader(run_dir, run_id)
    try:
        events = reader.events()
        resumed = [e.at for e in events if e.kind == "run.resumed"]
        for start, end in pairwise([*starts, float("inf")]):  # a resume may die before it is back
            back = [at for at in resumed if start <= at < end]
            result.resume_ms += [(back[0] - start) * 1000] if back else []
        if reader.run().status != "done":
            result.differences.append(f"the run ended {reader.run().status}")
        side_effecting = {c.id for c in reader.tool_calls() if not c.read_only}
        repeatable = {c.id for c in reader.tool_calls() if c.name in REPEATABLE}
        if run_file(run_dir) is None:  # a server database: no file, the run's rows instead
            result.corrupted = len(inconsistencies(reader))
    finally:
        reader.close()
    noted = Counter(read_notes(home / f"{run_id}.{EXECUTIONS}"))
    result.twice = sorted(
        call
        for (point, call), n in ((line.split(" ", 1), n) for line, n in noted.items())
        if n > 1 and call in side_effecting and (point == "tool.after" or call not in repeatable)
    )
    if run_file(run_dir) is not None:
        with closing(sqlite3.connect(run_dir / "run.db")) as db:
            verdict = db.execute("PRAGMA integrity_check").fetchone()[0]
        result.corrupted = 0 if verdict == "ok" else 1
    answer, outcome, mail = observe(example, home, run_id, project)
    if answer != ref.answer:
        result.differences.append(f"answer: {answer!r} != {ref.answer!r}")
    if outcome != ref.outcome:
        result.differences.append(f"{'integration tree' if example == 'coding' else 'report'} differs")
    result.lost, result.duplicated = mail.against(ref.mail)
    _faults_and_losses(result, home, run_id, events)
    return result


def _faults_and_losses(result: Result, home: Path, run_id: str, events: Sequence[Any]) -> None:
    """Fill in what was injected, hung, refused and stopped (from the harness's notes), the losses the
    run named, and what differs with nothing naming it."""
    injected = {line.split(" ", 1)[0] for line in read_notes(home / f"{run_id}.{INJECTED}")}
    result.faults = sorted(injected | ({KILL} if result.kills else set()))
    result.hangs = len(read_notes(home / f"{run_id}.{HANGS}"))
    result.refused = read_notes(home / f"{run_id}.{REFUSED}")
    result.stops = read_notes(home / f"{run_id}.{STOPS}")
    result.errors = read_notes(home / f"{run_id}.{ERRORS}")
    named = [e for e in events if e.kind in losses.KINDS]
    result.losses = [f"{e.kind}: {e.data.get('note', '')}" for e in named]
    result.quarantined = min(result.lost, len(quarantined(home / "runs" / run_id / "mailbox", named)))
    result.lost -= result.quarantined
    result.named_losses = len(named) + len(result.refused)
    kinds = {e.kind for e in named}
    symptoms = {
        "outcome": result.differences,
        "mail": [f"{n} message(s) lost" for n in [result.lost] if n]
        + [f"{n} message(s) duplicated" for n in [result.duplicated] if n],
        "twice": [f"side-effecting call {call} ran twice" for call in result.twice],
    }
    result.silent = [
        what
        for symptom, found in symptoms.items()
        for what in found
        if not result.refused and not kinds & SILENT[symptom]
    ]
    result.silent_losses = int(bool(result.silent))


def quarantined(mailbox: Path, named: Sequence[Any]) -> set[str]:
    """The ids of the messages in the agents' ``bad/`` (by the name their reason note keeps) that a
    ``mail.quarantined`` event among ``named`` names (an id, or the file's name in ``bad/``, in its data)
    and that no ``new/`` or ``cur/`` holds again."""
    said = " ".join(json.dumps(e.data, default=str) for e in named if e.kind == losses.MAIL_QUARANTINED)
    found = set()
    for note in mailbox.glob(f"*/bad/*{REASON}"):
        try:
            original = str(json.loads(note.read_bytes()).get("name") or "")
        except (OSError, ValueError, AttributeError):
            original = ""
        message = original.removesuffix(".json")
        box = note.parent.parent
        again = any((box / sub / original).exists() for sub in ("new", "cur")) if original else False
        bad_name = note.name.removesuffix(REASON)
        if not again and ((message and message in said) or bad_name in said):
            found.add(message or bad_name)
    return found


def inconsistencies(reader: Any) -> list[str]:
    """What is wrong with the run's rows as ``reader`` reads them: a table that does not read back, an
    agent's turns not numbered 1 to n, a tool call or a mail row naming no turn of its agent, the run's
    tokens not the sum of its agents'. Empty when the rows are whole."""
    try:
        run = reader.run()
        agents = reader.agents()
        turns = {a.name: reader.turns(a.name) for a in agents}
        calls, mail = reader.tool_calls(), reader.mail()
        for read_all in (reader.tasks, reader.merges, reader.events):
            read_all()
    except Exception as e:  # any failure to read back is what this reports
        return [f"the run's rows do not read back: {type(e).__name__}: {e}"]
    problems = []
    for agent, agent_turns in turns.items():
        if [turn.seq for turn in agent_turns] != list(range(1, len(agent_turns) + 1)):
            problems.append(f"{agent}'s turns are numbered {[turn.seq for turn in agent_turns]}")
    turn_ids = {(turn.agent, turn.id) for agent_turns in turns.values() for turn in agent_turns}
    problems += [
        f"tool call {c.id} names no turn of {c.agent}" for c in calls if (c.agent, c.turn_id) not in turn_ids
    ]
    problems += [
        f"mail {m.id} names no turn of {m.agent}" for m in mail if (m.agent, m.turn_id) not in turn_ids
    ]
    for name in ("input_tokens", "output_tokens", "cache_creation_tokens", "cache_read_tokens"):
        total = sum(getattr(a.usage, name) for a in agents)
        if getattr(run.usage, name) != total:
            problems.append(f"the run's {name} {getattr(run.usage, name)} != its agents' {total}")
    return problems


def observe(example: str, home: Path, run_id: str, project: Path) -> tuple[str, str, Mail]:
    """The lead's answer, the result (the integration tree, or the report) and the mail, run ids and
    hashes masked."""
    from teamrt.store import open_reader

    run_dir = home / "runs" / run_id
    reader = open_reader(run_dir, run_id)
    try:
        answer = _mask(next((a for a in _answers(reader, "lead")), ""), run_id)
        rows = {(m.agent, m.id): m.message for m in reader.mail()}
    finally:
        reader.close()
    mail = _mail(run_dir / "mailbox", rows, run_id)
    if example == "coding":  # no integration branch: no tree (it differs)
        rev = ["git", "rev-parse", "-q", "--verify", f"teamrt/{run_id}^{{tree}}"]
        tree = subprocess.run(rev, cwd=project, capture_output=True, text=True, check=False).stdout.strip()
        return answer, tree, mail
    report = project / "REPORT.md"
    return answer, report.read_text(encoding="utf-8") if report.exists() else "", mail


def _mail(mailbox: Path, rows: dict[tuple[str, str], dict[str, Any]], run_id: str) -> Mail:
    """The mail of the run ``run_id``: the files in its ``mailbox`` and its ingest ``rows`` (by agent and
    message id)."""
    messages = dict(rows)
    places: defaultdict[tuple[str, str], set[str]] = defaultdict(set)
    for message in rows:
        places[message].add("row")
    for path in mailbox.glob("*/*/*.json"):
        agent, box = path.parent.parent.name, path.parent.name
        if box in ("new", "cur") and agent != SUPERVISOR:
            try:
                data = json.loads(path.read_bytes())
            except ValueError:  # damaged where it lies, not yet quarantined: not delivered
                continue
            if not isinstance(data, dict):
                continue
            messages[agent, path.stem] = data
            places[agent, path.stem].add(box)
    delivered: Counter[Key] = Counter()
    read: Counter[Key] = Counter()
    broken = doubled = 0
    for message, where in places.items():
        broken += ("cur" in where and "row" not in where) or where == {"row"}
        doubled += {"new", "cur"} <= where
        data = messages[message]
        if data["kind"] != "control":
            key = (data["to"], data["from"], data["kind"], _mask(str(data["body"]), run_id))
            delivered[key] += 1
            read[key] += bool(where & {"row", "cur"})
    return Mail(delivered, read, broken, doubled)


def _answers(reader: Any, agent: str) -> list[str]:
    texts = []
    for turn in reversed(reader.turns(agent)):
        if turn.role == "assistant":
            text = "".join(b.get("text", "") for b in turn.content if b.get("type") == "text")
            if text:
                texts.append(text)
    return texts


def _mask(text: str, run_id: str) -> str:
    return re.sub(r"\b[0-9a-f]{7,40}\b", "HASH", text.replace(run_id, "RUN"))
