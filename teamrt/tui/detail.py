"""The selected agent, in full: its transcript, its mail and its worktree. No Textual here.

The transcript comes from the store's turns, with tool calls and their
results folded to a line each (``more`` keeps the whole text), then the text
the model is writing now, from the tail of ``runs/<run>/stream/<agent>``.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teamrt.mailbox.maildir import peek
from teamrt.mailbox.message import preview
from teamrt.runs.render import describe_call
from teamrt.runs.steer import MAILBOX_DIR
from teamrt.runs.transcript import mail_entry, parse_mail
from teamrt.runtime.stream import STREAM_DIR
from teamrt.store import AgentRecord, MailRecord, RunRecord, StoreReader, TurnRecord
from teamrt.terminal import clean

STREAM_TAIL_BYTES = 8192
PREVIEW_CHARS = 100
DIFF_EVERY_S = 2.0  # a worktree's diff stat is asked of git at most this often


@dataclass(frozen=True, slots=True)
class Line:
    """One line of a transcript. ``kind``: user, assistant, call, result, error, compaction, streaming,
    mail."""

    kind: str
    text: str
    more: str = ""  # the folded rest (a call's whole input, a result's whole text)


@dataclass(frozen=True, slots=True)
class Letter:
    """One message in an inbox or outbox."""

    peer: str  # the sender (inbox) or the recipient (outbox)
    kind: str
    summary: str
    at: float | None  # when it was taken in; None: not read yet


@dataclass(frozen=True, slots=True)
class AgentDetail:
    name: str
    kind: str
    status: str
    status_reason: str | None
    transcript: tuple[Line, ...]
    inbox: tuple[Letter, ...]
    outbox: tuple[Letter, ...]
    workspace: str | None
    branch: str | None
    diff_stat: str  # ``git diff --stat`` against where the branch left the integration branch


class DetailReader:
    """Reads one agent's detail; keeps the turns already read, since turns never change."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._turns: dict[str, list[TurnRecord]] = {}
        self._diffs: dict[str, tuple[float, str]] = {}

    def read(self, reader: StoreReader, agent: AgentRecord, run: RunRecord) -> AgentDetail:
        turns = self._turns.setdefault(agent.name, [])
        turns += reader.turns(agent.name, after_seq=turns[-1].seq if turns else 0)
        lines = transcript(turns)
        return AgentDetail(
            name=agent.name,
            kind=agent.kind,
            status=agent.status,
            status_reason=agent.status_reason,
            transcript=tuple(lines),
            inbox=tuple(_letters(reader.mail(agent.name), inbox=True) + _unread(self.run_dir, agent.name)),
            outbox=tuple(_letters(reader.mail(sender=agent.name), inbox=False)),
            workspace=agent.workspace,
            branch=agent.branch,
            diff_stat=self._diff_stat(reader, agent, run),
        )

    def _diff_stat(self, reader: StoreReader, agent: AgentRecord, run: RunRecord) -> str:
        if agent.kind != "worktree" or not agent.workspace:
            return ""
        at, stat = self._diffs.get(agent.name, (0.0, ""))
        if time.monotonic() - at >= DIFF_EVERY_S:
            merged = next((m.merged_commit for m in reader.merges() if m.agent == agent.name), None)
            integration = str(run.settings.get("integration_branch", ""))
            stat = diff_stat(Path(agent.workspace), Path(run.workdir), integration, merged)
            self._diffs[agent.name] = (time.monotonic(), stat)
        return stat


def transcript(turns: list[TurnRecord]) -> list[Line]:
    """The turns' lines, each tool result right under the call it answers (a turn asks for several
    calls at once and their results come together in the next)."""
    blocks = [(t.role, b) for t in turns for b in t.content if isinstance(b, dict)]
    results = {b.get("tool_use_id"): b for _, b in blocks if b.get("type") == "tool_result"}
    called = {b.get("id") for _, b in blocks if b.get("type") == "tool_use"}
    lines: list[Line] = []
    for role, block in blocks:
        if block.get("type") == "tool_result" and block.get("tool_use_id") in called:
            continue  # shown under its call
        lines += _block_lines(role, block)
        if block.get("type") == "tool_use" and block.get("id") in results:
            lines += _block_lines("user", results[block.get("id")])
    return lines


def _block_lines(role: str, block: dict[str, Any]) -> list[Line]:
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        mail = parse_mail(block["text"]) if role == "user" else None
        if mail is not None:  # as a person reads it (``teamrt transcript`` too), not the model's markup
            entry = mail_entry(mail)
            return [Line("mail", entry.text, entry.more)]
        text = clean(block["text"]).strip()  # only a newline ends a line: a lone CR shows as U+FFFD
        said_by = "compaction" if role == "compaction" else role
        return [Line(said_by, t) for t in text.split("\n") if t.strip()]
    if kind == "tool_use":
        args = block.get("input")
        args = args if isinstance(args, dict) else {}
        shown = describe_call(str(block.get("name", "?")), args)
        return [Line("call", shown, json.dumps(args, indent=2, ensure_ascii=False))]
    if kind == "server_tool_use":
        args = block.get("input")
        args = args if isinstance(args, dict) else {}
        query = " ".join(str(args.get("query", "")).split())
        shown = f"{block.get('name', '?')}: {preview(query, PREVIEW_CHARS)}"
        return [Line("call", shown, json.dumps(args, indent=2, ensure_ascii=False))]
    if kind == "web_search_tool_result":
        return [_search_line(block.get("content"))]
    if kind == "tool_result":
        text = _result_text(block.get("content"))
        body = clean(text).strip().split("\n") if text.strip() else []
        first = preview(body[0], PREVIEW_CHARS) if body else "(no output)"
        said = f"{len(body)} lines: {first}" if len(body) > 1 else first
        return [Line("error" if block.get("is_error") else "result", said, text)]
    return []


def _search_line(content: object) -> Line:
    """A web search's results in a line (the first title and where it is), all of them unfolded."""
    if not isinstance(content, list):
        code = content.get("error_code", "?") if isinstance(content, dict) else "?"
        return Line("error", f"web search failed: {code}")
    pages = [(str(r.get("title", "")), str(r.get("url", ""))) for r in content if isinstance(r, dict)]
    if not pages:
        return Line("result", "no results")
    title, url = pages[0]
    first = preview(f"{title} ({url})", PREVIEW_CHARS)
    said = f"{len(pages)} results: {first}" if len(pages) > 1 else first
    return Line("result", said, "\n".join(f"{title}\n  {url}" for title, url in pages))


def _result_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
        return "\n".join(str(p) for p in parts)
    return ""


def streaming_now(run_dir: Path, agent: str) -> str:
    """What the model is writing now: the stream file's last line, when it is not finished."""
    path = run_dir / STREAM_DIR / agent
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - STREAM_TAIL_BYTES))
            tail = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    if tail.endswith("\n"):
        return ""
    return tail.rsplit("\n", 1)[-1]


def diff_stat(workspace: Path, project: Path, integration_branch: str, merged: str | None) -> str:
    """``git diff --stat`` of the agent's work: the worktree (committed or not) against where it left the
    integration branch while it is there; once merged and removed, what its merge brought.

    teamrt's safe git, pointed at the checkout by git's own records: the agent wrote the checkout and
    its metadata, and a plain ``git -C`` there would run the filters of a configuration it names."""
    from teamrt.worktree import GitError, GitRepo  # GitPython: only when a worktree agent is shown
    from teamrt.worktree.worktrees import git_env_of

    repo = GitRepo.find(project)
    if repo is None:
        return "(the project is no longer in a git repository)"
    try:
        if workspace.is_dir():
            env = git_env_of(repo, workspace)
            if env is None:
                return "(git no longer knows this worktree)"
            root = Path(env["GIT_WORK_TREE"])
            try:
                base = repo.run("merge-base", "HEAD", integration_branch, cwd=root, env=env)
            except GitError:  # the integration branch is not made until the first merge
                base = "HEAD"
            return repo.run("diff", "--stat", base, cwd=root, env=env) or "(no changes)"
        if merged:
            return repo.run("diff", "--stat", f"{merged}^1", merged) or "(the merge brought no changes)"
    except GitError as e:
        return f"(git: {e})"
    return "(worktree removed)"


def _unread(run_dir: Path, agent: str) -> list[Letter]:
    """Mail delivered to the agent that it has not taken in yet (its maildir's ``new/``)."""
    return [
        Letter(str(m.get("from", "?")), str(m.get("kind", "?")), _summary(m), None)
        for m in peek(run_dir / MAILBOX_DIR, agent, ("new",))
    ]


def _letters(mail: list[MailRecord], *, inbox: bool) -> list[Letter]:
    return [Letter(m.sender if inbox else m.agent, m.kind, _summary(m.message), m.ingested_at) for m in mail]


def _summary(message: dict[str, Any]) -> str:
    said = message.get("summary") or message.get("body") or ""
    return preview(str(said), PREVIEW_CHARS)
