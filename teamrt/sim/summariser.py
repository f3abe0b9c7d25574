"""The summary the simulator's model writes of a conversation: what server-side compaction returns.

A real model asked to summarise keeps the task, the facts the conversation established, the files it
touched and where the work stands, and drops the bulk (file bodies, test logs, search hits). This is
that summary written without a model, deterministically, so a run on ``sim`` loses to compaction what a
run on Claude would lose and keeps what it would keep:

- **Task**: the first user text (a previous summary's task, when the conversation starts with one).
- **Key facts**: statements marked as worth keeping, wherever they appear: ``NOTE: X``, ``Noted: X``,
  ``Remember: X``, ``Important: X``, ``Decision: X``, ``Fact: X`` (in text, thinking and tool results).
- **Details**: the other statements the assistant and the user wrote (sentences), and ``X: Y`` or
  ``X = Y`` lines of tool results (unindented, short, at most a few a result: configuration-like
  lines, not code or logs).
- **Files**: the paths the tool calls named, each with the tools that touched it.
- **Last state**: the last tool calls, what the assistant last said, and the tail of the last user turn
  (whole lines, so an instruction ending a tool result, such as the next step, is kept as written).

Facts are kept once (a restated fact moves to the newest place). The summary is bounded
(``MAX_BYTES``, about 2K tokens): when it would be longer, details go first and then key facts, oldest
first, so the newest survive. A summary that is summarised again (a compaction of a conversation that
starts with an earlier compaction's summary) is read back section by section, so its key facts stay
key facts and its task stays the task: facts survive chains of compactions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

HEADER = "Summary of the conversation so far (the messages before it were compacted)."
MAX_BYTES = 8_000
"""At most this many UTF-8 bytes: about 2,000 tokens as the sim counts them."""
TASK_BYTES = 1_200
STATE_BYTES = 1_500
FILES_SHOWN = 30
FACT_CHARS = 240
RESULT_LINES = 4
"""At most this many ``X: Y`` lines are taken from one tool result."""
_SECTIONS = ("Task", "Key facts", "Details", "Files", "Last state")
_MARKER = r"(?:NOTE|Noted|Note|Remember|Important|IMPORTANT|Decision|Decided|Fact|FACT)"
_MARKED = re.compile(rf"\b{_MARKER}\s*:\s*(.+?(?:[.!?](?=\s|$)|(?=\s+{_MARKER}\s*:)|$))")
"""A marked fact: from its marker to the end of its sentence (or the next marker, or the line's end)."""
_KEY_LINE = re.compile(r"^([A-Za-z][\w .\-]{0,40}?)\s*[:=]\s*([^\s:=].{0,160})$")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_PATH_KEYS = ("path", "file_path", "file", "filename", "notebook_path")
_PATH_LISTS = ("paths", "files")
_STATE_LABELS = ("Last calls: ", "Last said: ", "Last user turn")


@dataclass
class _Notes:
    """What the summary is made of, gathered oldest first."""

    task: str = ""
    key: dict[str, str] = field(default_factory=dict)
    """Normalised text -> the fact as written; insertion order is age (oldest first)."""
    details: dict[str, str] = field(default_factory=dict)
    files: dict[str, list[str]] = field(default_factory=dict)
    state: str = ""

    def add(self, tier: dict[str, str], fact: str) -> None:
        fact = " ".join(fact.split()).strip(" -*#")
        if len(fact) < 3:
            return
        fact = fact if len(fact) <= FACT_CHARS else fact[: FACT_CHARS - 3].rstrip() + "..."
        norm = _normal(fact)
        if tier is self.details and norm in self.key:
            return  # already a key fact
        tier.pop(norm, None)
        self.details.pop(norm, None)
        tier[norm] = fact  # re-inserted: a restated fact is the newest

    def touch(self, path: str, tool: str) -> None:
        tools = self.files.pop(path, [])
        if tool not in tools:
            tools.append(tool)
        self.files[path] = tools


def summarise(messages: list[dict[str, Any]], system: Any = "") -> str:
    """The summary of ``messages`` (the API's message list; compaction blocks and earlier summaries
    included). ``system`` (a string or text blocks) gives the task when no user text does."""
    notes = _Notes()
    for message in messages:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        for block in blocks:
            if isinstance(block, dict):
                _read(notes, message.get("role"), block)
    if not notes.task:
        notes.task = _system_text(system).strip().split("\n\n")[0]
    last_state = _last_state(messages) or notes.state
    return _render(notes, last_state)


def is_summary(text: str) -> bool:
    return text.startswith(HEADER)


def _read(notes: _Notes, role: Any, block: dict[str, Any]) -> None:
    kind = block.get("type")
    if kind == "compaction":
        if isinstance(block.get("content"), str):
            _read_summary(notes, block["content"])
    elif kind == "text":
        text = str(block.get("text", ""))
        if is_summary(text):
            _read_summary(notes, text)
        elif role == "user" and not notes.task:
            notes.task = text.strip()
            _marked(notes, text)
        else:
            _statements(notes, text)
    elif kind == "thinking":
        _marked(notes, str(block.get("thinking", "")))
    elif kind == "tool_use" and isinstance(block.get("input"), dict):
        for path in _paths(block["input"]):
            notes.touch(path, str(block.get("name", "tool")))
    elif kind == "tool_result":
        _tool_facts(notes, _result_text(block))


def _read_summary(notes: _Notes, text: str) -> None:
    """Take an earlier summary back: each section into its place, its last state's facts as details."""
    for name, body in _sections(text).items():
        lines = [ln[2:] for ln in body.splitlines() if ln.startswith("- ")]
        if name == "Task" and not notes.task:
            notes.task = body.strip()
        elif name == "Key facts":
            for line in lines:
                notes.add(notes.key, line)
        elif name == "Details":
            for line in lines:
                notes.add(notes.details, line)
        elif name == "Files":
            for line in lines:
                path, _, tools = line.rpartition(" (")
                for tool in tools.rstrip(")").split(", ") if path else ():
                    notes.touch(path, tool)
        elif name == "Last state":
            notes.state = body.strip()
            _tool_facts(notes, "\n".join(ln for ln in body.splitlines() if not ln.startswith(_STATE_LABELS)))


def _sections(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    name: str | None = None
    lines: list[str] = []
    for line in text.splitlines():
        title = line[3:].strip() if line.startswith("## ") else None
        if title in _SECTIONS:
            if name is not None:
                found[name] = "\n".join(lines)
            name, lines = title, []
        elif name is not None:
            lines.append(line)
    if name is not None:
        found[name] = "\n".join(lines)
    return found


def _marked(notes: _Notes, text: str) -> None:
    for line in text.splitlines():
        for match in _MARKED.finditer(line):
            notes.add(notes.key, match.group(1))


def _statements(notes: _Notes, text: str) -> None:
    """Marked facts as key facts; every other sentence as a detail."""
    _marked(notes, text)
    for line in text.splitlines():
        for sentence in _SENTENCE.split(_MARKED.sub("", line).strip()):
            if len(sentence.split()) >= 2:
                notes.add(notes.details, sentence)


def _tool_facts(notes: _Notes, text: str) -> None:
    _marked(notes, text)
    taken = 0
    for line in text.splitlines():
        if taken >= RESULT_LINES or _MARKED.search(line):
            continue
        match = _KEY_LINE.match(line)
        if match and not match.group(1).rstrip().endswith(("def", "class", "return", "import")):
            notes.add(notes.details, line)
            taken += 1


def _paths(value: dict[str, Any]) -> list[str]:
    paths = [value[k] for k in _PATH_KEYS if isinstance(value.get(k), str)]
    for key in _PATH_LISTS:
        if isinstance(value.get(key), list):
            paths.extend(p for p in value[key] if isinstance(p, str))
    return [p.strip() for p in paths if p.strip() and "\n" not in p and len(p) <= 300]


def _last_state(messages: list[dict[str, Any]]) -> str:
    """The last calls, the last thing said and the tail of the last user turn, from the messages after
    the newest summary (empty when there are none)."""
    start = 0
    for i, message in enumerate(messages):
        if any(_summary_block(b) for b in _blocks(message)):
            start = i + 1
    recent = messages[start:]
    parts: list[str] = []
    assistant = [m for m in recent if m.get("role") == "assistant"]
    if assistant:
        calls = [b for b in _blocks(assistant[-1]) if b.get("type") == "tool_use"]
        if calls:
            shown = ", ".join(f"{b.get('name')} {json.dumps(b.get('input'), sort_keys=True)}" for b in calls)
            parts.append("Last calls: " + _head(shown, 400))
        said = [str(b.get("text", "")) for m in assistant for b in _blocks(m) if b.get("type") == "text"]
        if said and said[-1].strip():
            parts.append("Last said: " + _head(" ".join(said[-1].split()), 400))
    if recent and recent[-1].get("role") == "user":
        text = "\n".join(
            _result_text(b) if b.get("type") == "tool_result" else str(b.get("text", ""))
            for b in _blocks(recent[-1])
            if b.get("type") in ("text", "tool_result")
        ).strip()
        if text:
            parts.append("Last user turn (its end):\n" + _tail(text, STATE_BYTES - 820))
    return "\n".join(parts)


def _render(notes: _Notes, state: str) -> str:
    task = _head(notes.task, TASK_BYTES) or "(not stated)"
    files = list(notes.files.items())[-FILES_SHOWN:]
    file_lines = [f"- {path} ({', '.join(tools)})" for path, tools in files]
    fixed = [HEADER, "## Task", task, "## Files", *file_lines, "## Last state", _head(state, STATE_BYTES)]
    room = MAX_BYTES - _size(fixed) - _size(["## Key facts", "## Details"])
    key = _newest(notes.key.values(), room)
    details = _newest(notes.details.values(), room - _size(key))
    body = [HEADER, "## Task", task, "## Key facts", *key, "## Details", *details]
    return "\n".join([*body, "## Files", *file_lines, "## Last state", _head(state, STATE_BYTES)]).rstrip()


def _newest(facts: Iterable[str], room: int) -> list[str]:
    """The newest of ``facts`` (as ``- `` lines, oldest first) that fit in ``room`` bytes."""
    kept: list[str] = []
    for fact in reversed(list(facts)):
        line = "- " + fact
        if _size([line]) > room:
            break
        room -= _size([line])
        kept.append(line)
    return kept[::-1]


def _size(lines: list[str]) -> int:
    return sum(len(line.encode("utf-8", "surrogatepass")) + 1 for line in lines)


def _head(text: str, limit: int) -> str:
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    return data[: limit - 3].decode("utf-8", "ignore").rstrip() + "..."


def _tail(text: str, limit: int) -> str:
    """The last whole lines of ``text`` that fit in ``limit`` bytes (at least the tail of the last)."""
    kept: list[str] = []
    room = limit
    for line in reversed(text.splitlines()):
        cost = len(line.encode("utf-8", "surrogatepass")) + 1
        if cost > room:
            if not kept:
                kept.append(line.encode("utf-8", "surrogatepass")[-room:].decode("utf-8", "ignore"))
            break
        kept.append(line)
        room -= cost
    return "\n".join(reversed(kept))


def _normal(fact: str) -> str:
    return re.sub(r"\s+", " ", fact.lower()).strip(" .;,!")


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _summary_block(block: dict[str, Any]) -> bool:
    if block.get("type") == "compaction":
        return isinstance(block.get("content"), str)
    return block.get("type") == "text" and is_summary(str(block.get("text", "")))


def _result_text(block: dict[str, Any]) -> str:
    content = block.get("content", "")
    if isinstance(content, str):
        return content
    return "\n".join(
        str(b.get("text", "")) for b in content or [] if isinstance(b, dict) and b.get("type") == "text"
    )


def _system_text(system: Any) -> str:
    if isinstance(system, str):
        return system
    return "\n".join(str(b.get("text", "")) for b in system or [] if isinstance(b, dict))
