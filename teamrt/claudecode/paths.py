"""Where Claude Code keeps a user's and a project's set-up."""

from __future__ import annotations

import os
from pathlib import Path

CONFIG_DIR_ENV = "CLAUDE_CONFIG_DIR"
"""Claude Code's own variable for the user's configuration folder (default ``~/.claude``)."""


def claude_home() -> Path:
    """The user's Claude Code folder: ``$CLAUDE_CONFIG_DIR``, else ``~/.claude``."""
    configured = os.environ.get(CONFIG_DIR_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".claude"


def settings_files(project: Path) -> list[tuple[str, Path]]:
    """The settings files by scope, the lowest precedence first: user, project, local."""
    return [
        ("user", claude_home() / "settings.json"),
        ("project", project / ".claude" / "settings.json"),
        ("local", project / ".claude" / "settings.local.json"),
    ]
