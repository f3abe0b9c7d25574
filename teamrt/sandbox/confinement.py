"""What one confined program may see and touch: its workspace, the places shown or writable besides, the
protected paths, its extra environment and the run's policy.

The sandbox (``teamrt.sandbox.bwrap``) and the old check of protected paths
(``teamrt.sandbox.quarantine``) read nothing else. A tool derives one from its
``ToolContext`` (``ToolContext.confinement``); an MCP stdio server, a hook or a
merge gate is given one directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from teamrt.sandbox.policy import SandboxPolicy


@dataclass(frozen=True)
class Confinement:
    """Where a program runs and what it may reach there."""

    workspace: Path
    """Where it runs, and the one place it may write besides ``writable``."""
    run_dir: Path
    """The run's directory (``<home>/runs/<run>``): the run's ``runs`` are hidden from the program, its
    spill directory shown, and what a command made among the protected paths is quarantined here."""
    extra_roots: tuple[Path, ...] = field(default=())
    """Further directories shown read-only even inside hidden places."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Variables added to its environment (a worktree's git settings)."""
    readable: tuple[Path, ...] = field(default=())
    """Directories it must see even under the private /tmp (a worktree's repository)."""
    writable: tuple[Path, ...] = field(default=())
    """Directories outside the workspace that it may write (a worktree's git metadata)."""
    protected: tuple[Path, ...] = field(default=())
    """Canonical paths it may not change (``teamrt.sandbox.protect``): those that exist are mounted
    read-only."""
    policy: SandboxPolicy = field(default_factory=SandboxPolicy)
    """What the run allows programs: network, environment, limits, running unconfined."""
