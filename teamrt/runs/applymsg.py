"""The message of ``teamrt apply --squash``'s commit, drafted from the run it lands.

A squashed run is one commit on the person's branch, so its message has to say what the run was for
and what it did: the subject is the run's prompt (its first line, at most 72 characters, cut between
words), the body the lead's answer (its first paragraph), each agent's work merged onto the integration
branch with its task and how the gates passed, each follow-up's prompt (``teamrt continue``), then the
run's id and cost as trailers. Every part is an
agent's or a person's text shown later by ``git log`` in a terminal: all of it goes through
``worktree.message`` (``plain``, ``one_line``, ``wrap``), which strips control characters.
"""

from __future__ import annotations

from pathlib import Path

from teamrt.runs.query import reading, simulated
from teamrt.runs.render import money
from teamrt.store import MergeRecord, StoreReader, TaskRecord
from teamrt.store.rounds import CONTINUED, rounds_of
from teamrt.worktree.message import BODY_WIDTH, headline, one_line, plain, wrap

ITEM_CHARS = BODY_WIDTH * 2
"""Of one merged agent's line in the body, before wrapping."""


def draft(run_dir: Path, run_id: str) -> str:
    """The squashed commit's message for run ``run_id``: subject, body, trailers; ends with a newline."""
    from teamrt.runtime.landing import gates_said  # the runtime's words on gates: only for a squash

    with reading(run_dir, run_id) as reader:
        run = reader.run()
        agents = reader.agents()
        tasks = reader.tasks()
        merged = [m for m in reader.merges() if m.status == "merged"]
        lead = next((a for a in agents if a.kind == "lead"), None)
        answer = _answer(reader, lead.name) if lead is not None else ""
        answers = {m.agent: _answer(reader, m.agent) for m in merged}
        follow_ups = rounds_of(run, reader.events(kinds=("run.created", CONTINUED, "run.status")))[1:]
    subject = one_line(headline(run.task) or f"The work of teamrt run {run.id}")
    body = wrap(_first_paragraph(answer))
    gates = tuple(str(g) for g in run.settings.get("gates") or ())
    items = [_item(m, answers[m.agent], tasks, gates_said(gates, m.output)) for m in merged]
    if items:
        body += ([""] if body else []) + ["Merged:", *(line for item in items for line in item)]
    if follow_ups:
        asked = [wrap(one_line(f"- round {r.number}: {headline(r.prompt)}", ITEM_CHARS)) for r in follow_ups]
        body += ([""] if body else []) + ["Follow-ups:", *(line for lines in asked for line in lines)]
    trailers = [f"Run: {one_line(run.id)}", f"Cost: {money(run.usage.cost_usd, simulated(run))}"]
    by = sorted(a.name for a in agents if a.name in answers)
    if by:
        trailers.insert(0, f"Agents: {one_line(', '.join(by), BODY_WIDTH * 2)}")
    parts = [subject, *(["\n".join(body)] if body else []), "\n".join(trailers)]
    return "\n\n".join(parts) + "\n"


def _answer(reader: StoreReader, agent: str) -> str:
    """The text of ``agent``'s last assistant turn ("" when it has none)."""
    for turn in reversed(reader.turns(agent)):
        if turn.role == "assistant":
            texts = [
                b["text"] for b in turn.content if isinstance(b, dict) and isinstance(b.get("text"), str)
            ]
            return "\n".join(texts).strip()
    return ""


def _first_paragraph(text: str) -> str:
    """``text``'s first paragraph that is not a Markdown heading alone."""
    for paragraph in plain(text).split("\n\n"):
        lines = [x for x in paragraph.splitlines() if x.strip()]
        if lines and not all(x.lstrip().startswith("#") for x in lines):
            return "\n".join(lines)
    return ""


def _item(merge: MergeRecord, answer: str, tasks: list[TaskRecord], gates: str) -> list[str]:
    """``- coder: what it said it did (task #3 "its subject")``, then how its gates passed, wrapped."""
    owned = [t for t in tasks if t.owner == merge.agent]
    task = max(owned, key=lambda t: t.updated_at) if owned else None
    said = headline(answer) or "(no answer)"
    about = f' (task #{task.id} "{task.subject}")' if task is not None else ""
    return wrap(one_line(f"- {merge.agent}: {said}{about}", ITEM_CHARS)) + wrap(
        f"  {one_line(gates, ITEM_CHARS)}"
    )
