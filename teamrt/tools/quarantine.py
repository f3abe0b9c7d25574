"""Protected paths that a command created where none existed, moved out of the user's tree when it ends.

The sandbox mounts the protected paths that exist read-only. One that does not
exist yet (a project with no ``.claude``, no ``.mcp.json``) cannot be mounted
without creating it in the user's tree, so a command can create it. As soon as
the command ends, teamrt moves what it created to the run's
``quarantine/`` directory: the next session loads no agent definition, hook or
MCP server an agent planted there, and nothing is deleted.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from .base import ToolContext

QUARANTINE_DIR = "quarantine"


def absent(ctx: ToolContext) -> list[Path]:
    """The protected paths in ``ctx``'s workspace that do not exist now."""
    workspace = Path(os.path.realpath(ctx.workspace))
    return [p for p in ctx.protected if p.is_relative_to(workspace) and not os.path.lexists(p)]


def quarantine(paths: list[Path], ctx: ToolContext) -> list[tuple[Path, Path]]:
    """Move those of ``paths`` that exist now into ``<run_dir>/quarantine/``; (path, where it went) each."""
    moved = []
    for path in paths:
        if not os.path.lexists(path):
            continue
        keep = ctx.run_dir / QUARANTINE_DIR / f"{time.time_ns()}-{path.name}"
        keep.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        shutil.move(path, keep)
        moved.append((path, keep))
    return moved
