"""Keep tool results inside the context: big ones go to the run's spill directory.

A result over ``SPILL_CHARS`` is written to ``runs/<run>/spill/`` and the
model gets its first ``PREVIEW_CHARS`` characters and the file's path, which
its ``read`` tool may open. If one turn's results still exceed
``TURN_CHARS`` together, the largest are spilled too until they fit.

A result of content blocks (an MCP tool's text and images) is measured by its
text: the text is spilled as above, into one text block, and its images and
documents are kept as they are (``teamrt.mcp.tools`` bounds their size).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from teamrt.tools.base import ToolResult, result_text

SPILL_CHARS = 50_000
PREVIEW_CHARS = 2_000
TURN_CHARS = 200_000


def bound_results(results: dict[str, ToolResult], spill_dir: Path, agent: str) -> dict[str, ToolResult]:
    """``results`` by tool-call id, with the oversized ones replaced by a preview and a path."""
    bounded = dict(results)
    for call_id, result in results.items():
        if _chars(result) > SPILL_CHARS:
            bounded[call_id] = _spill(result, spill_dir / f"{agent}-{call_id}.txt")
    while sum(_chars(r) for r in bounded.values()) > TURN_CHARS:
        call_id = max(bounded, key=lambda k: _chars(bounded[k]))
        bounded[call_id] = _spill(bounded[call_id], spill_dir / f"{agent}-{call_id}.txt")
    return bounded


def _chars(result: ToolResult) -> int:
    content = result.content
    return len(content) if isinstance(content, str) else len(result_text(content))


def _spill(result: ToolResult, path: Path) -> ToolResult:
    text = result_text(result.content)
    if not path.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    note = (
        f"\n\n[output cut: {len(text):,} characters in all; the first {PREVIEW_CHARS:,} are above."
        f" The whole output is in {path}; read it with offset and limit.]"
    )
    preview = text[:PREVIEW_CHARS] + note
    if isinstance(result.content, str):
        return replace(result, content=preview)
    kept = [b for b in result.content if b.get("type") != "text"]
    return replace(result, content=[{"type": "text", "text": preview}, *kept])
