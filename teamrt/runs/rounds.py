"""A run's rounds as ``teamrt show`` and ``logs`` tell them: each prompt (the first, then each follow-up of
``teamrt continue``) with how its round ended. A prompt is a person's text and may hold anything: every
line made here is safe for a terminal (``terminal.clean``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from teamrt.runs import query as runs
from teamrt.runs.render import clip, iso_time
from teamrt.store import RunRecord
from teamrt.store.rounds import CONTINUED, Round, rounds_of
from teamrt.terminal import clean, clean_line

KINDS = ("run.created", CONTINUED, "run.status")
"""The events the rounds are read from."""
PROMPT_CHARS = 80


def read_rounds(run_dir: Path, run_id: str, run: RunRecord) -> list[Round]:
    """The rounds of run ``run_id`` (``run``: its record, read already), oldest first."""
    with runs.reading(run_dir, run_id) as reader:
        return rounds_of(run, reader.events(kinds=KINDS))


def round_lines(rounds: list[Round], status: str, *, full: bool = False) -> list[str]:
    """``show``'s "rounds" section (none for a run of one round): each round's number, outcome and prompt
    (its first line cut, unless ``full``: whole). ``status``: the run's as a user sees it (``crashed``)."""
    if len(rounds) < 2:
        return []
    lines = ["", "rounds"]
    for r in rounds:
        outcome = r.status or status  # the last round's, going on (or crashed in)
        said = f"{outcome}: {' '.join(r.reason.split())}" if r.reason and r.status != "done" else outcome
        prompt = _prompt_lines(r.prompt)
        first = prompt[0] if full else clip(prompt[0], PROMPT_CHARS)
        lines.append(clean_line(f"  {r.number:>3}  {clip(said, 40):<40}  {first}"))
        if full:
            lines += [clean_line(f"{'':>47}{line}") for line in prompt[1:]]
    return lines


def rounds_json(rounds: list[Round]) -> list[dict[str, Any]]:
    """``show --json``'s rounds: number, prompt (as given), status and reason (None while it goes on),
    start and end (ISO 8601)."""
    return [
        {
            "round": r.number,
            "prompt": r.prompt,
            "status": r.status,
            "reason": r.reason,
            "started": iso_time(r.started_at),
            "ended": iso_time(r.ended_at),
        }
        for r in rounds
    ]


def continued_summary(data: dict[str, Any]) -> str:
    """A ``run.continued`` event as ``logs`` says it: the round, what it went on from, its budget, its
    prompt."""
    said = f"round {data.get('round', '?')} (after {data.get('previous', '?')})"
    budget = data.get("budget_usd")
    if isinstance(budget, int | float):
        said += f", budget ${budget:.2f}"
    tokens = data.get("budget_tokens")
    if isinstance(tokens, int):
        said += f", {tokens:,} tokens"
    prompt = " ".join(clean(str(data.get("prompt", ""))).split())
    return f"{said}: {prompt}"


def _prompt_lines(prompt: str) -> list[str]:
    said = clean(prompt).strip()
    return said.split("\n") if said else ["(none)"]
