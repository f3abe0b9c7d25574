"""Keep tool results inside the context: big ones go to the run's spill directory.

A result over ``SPILL_CHARS`` is written to ``runs/<run>/spill/`` and the
model gets its first ``PREVIEW_CHARS`` characters and the file's path, which
its ``read`` tool may open. If one turn's results still exceed
``TURN_CHARS`` together, the largest are spilled too until they fit.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from ..tools.base import ToolResult

SPILL_CHARS = 50_000
PREVIEW_CHARS = 2_000
TURN_CHARS = 200_000


def bound_results(results: dict[str, ToolResult], spill_dir: Path, agent: str) -> dict[str, ToolResult]:
    """``results`` by tool-call id, with the oversized ones replaced by a preview and a path."""
    bounded = dict(results)
    for call_id, result in results.items():
        if len(result.content) > SPILL_CHARS:
            bounded[call_id] = _spill(result, spill_dir / f"{agent}-{call_id}.txt")
    while sum(len(r.content) for r in bounded.values()) > TURN_CHARS:
        call_id = max(bounded, key=lambda k: len(bounded[k].content))
        bounded[call_id] = _spill(bounded[call_id], spill_dir / f"{agent}-{call_id}.txt")
    return bounded


def _spill(result: ToolResult, path: Path) -> ToolResult:
    if not path.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(result.content, encoding="utf-8")
        os.replace(tmp, path)
    note = (
        f"\n\n[output cut: {len(result.content):,} characters in all; the first {PREVIEW_CHARS:,} are above."
        f" The whole output is in {path}; read it with offset and limit.]"
    )
    return replace(result, content=result.content[:PREVIEW_CHARS] + note)
