"""The MCP client's events in words, one line each: ``teamrt logs`` and the TUI's agent view read them here.

Their data holds a server's own text, already cleaned when journaled; it is
cleaned again here (``clean_line``), since a journal is a file anyone may have
edited.
"""

from __future__ import annotations

import json
from typing import Any, Final

from teamrt.mcp.capabilities import ELICITED, LOG, PROGRESS, SAMPLED, TOOLS
from teamrt.mcp.prompts import PROMPTED
from teamrt.terminal import clean_line

KINDS: Final = (SAMPLED, ELICITED, PROGRESS, LOG, TOOLS, PROMPTED)


def summary(kind: str, data: dict[str, Any]) -> str:
    """An MCP client event (one of ``KINDS``) on one line."""
    server = _text(data.get("server", "?"))
    if kind == PROGRESS:
        return f"{server} {_text(data.get('tool', '?'))}: {progress_line(data)}"
    if kind == LOG:
        said = f"{server} [{_text(data.get('level', '?'))}]"
        said += f" {_text(data['logger'])}:" if data.get("logger") else ""
        said += f" {_text(data.get('text', ''))}"
        dropped = data.get("dropped")
        return said + (f" ({_text(dropped)} messages left out before it)" if dropped else "")
    if kind == SAMPLED:
        if data.get("refused"):
            return f"{server}: sampling refused: {_text(data['refused'])}"
        asked = _text(data.get("asked_tokens", "?"))
        tokens = f"{_text(data.get('max_tokens', '?'))} of {asked} tokens asked"
        return f"{server}: sampled {_text(data.get('model', '?'))} ({tokens})"
    if kind == ELICITED:
        if data.get("refused"):
            return f"{server}: question refused: {_text(data['refused'])}"
        fields = data.get("fields")
        names = ", ".join(_text(f) for f in fields) if isinstance(fields, list) and fields else "no fields"
        note = f"; {_text(data['note'])}" if data.get("note") else ""
        return f"{server}: question ({names}) {_text(data.get('action', '?'))}{note}"
    if kind == TOOLS:
        if data.get("note"):
            return f"{server}: {_text(data['note'])}"
        added, removed = data.get("added") or [], data.get("removed") or []
        tools = data.get("tools")
        count = len(tools) if isinstance(tools, list) else "?"
        change = [f"+{_text(n)}" for n in added[:10]] + [f"-{_text(n)}" for n in removed[:10]]
        return f"{server}: {count} tools now" + (f" ({' '.join(change)})" if change else "")
    if kind == PROMPTED:
        if data.get("error"):
            return (
                f"{_text(data.get('command', '?'))} for {_text(data.get('to', '?'))}: {_text(data['error'])}"
            )
        command = f"/mcp__{_text(data.get('server', '?'))}__{_text(data.get('prompt', '?'))}"
        images = f", {_text(data['images'])} images" if data.get("images") else ""
        return (f"{server}: {command} expanded for {_text(data.get('to', '?'))} "
                f"({_text(data.get('chars', '?'))} characters{images})")  # fmt: skip
    return " ".join(f"{key}={_text(value)}" for key, value in data.items())


def progress_line(data: dict[str, Any]) -> str:
    """``3/10 copying files`` or ``40% ...``: a progress event's figures and message."""
    done, total = data.get("progress"), data.get("total")
    if _number(done) and _number(total) and total:
        figures = f"{done:g}/{total:g}"
    elif _number(done):
        figures = f"{done:g}"
    else:
        figures = "?"
    message = _text(data.get("message", "")) if data.get("message") else ""
    return f"{figures} {message}".strip()


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _text(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), default=str)
    line = " ".join(clean_line(text).split())
    return line if len(line) <= 300 else line[:299] + "…"
