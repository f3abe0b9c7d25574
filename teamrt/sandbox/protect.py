"""Protected paths: what no agent may change, in any permission mode, ``bypassPermissions`` included.

An agent can be steered by anything it reads, so the places that decide what
runs, and with which rights, are out of its reach:

- teamrt's home (every run's store, mailboxes and worktree metadata) and the
  project's top-level ``.teamrt/`` wherever the home is (agent definitions, the
  team file ``teamrt run`` reads next);
- ``.git`` (config, hooks, info, refs): a hook or a filter driver planted there
  runs outside any sandbox, at the user's next commit or at teamrt's own git;
- ``.claude/`` and ``.mcp.json``: agent definitions, settings, hooks and MCP
  servers that the next session loads;
- the memory files ``CLAUDE.md``, ``CLAUDE.local.md`` and ``AGENTS.md``: prompt
  text every agent of the next session reads;
- the run's team file;
- teamrt's own code and the Python environment it runs from, when they lie in
  a workspace (a project's ``.venv`` with teamrt installed).

``protected_paths`` lists these for one workspace (the file tools refuse them,
the sandbox mounts those that exist read-only); ``write_refusal`` also refuses,
below the workspace, every path ``protected_in_tree`` names (a ``.git`` or
``.claude`` component, a ``.mcp.json`` or memory file at any depth, the top
``.teamrt``), so a nested repository or a subproject's settings are covered too.
What a process creates there anyway (a path that did not exist to be mounted
read-only) is moved out by ``teamrt.sandbox.quarantine``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path, PurePosixPath

PROTECTED_DIRS = (".git", ".claude")
"""Directory names protected at any depth of a workspace."""
PROTECTED_FILES = (".mcp.json",)
"""File names protected at any depth of a workspace."""
TEAMRT_DIR = ".teamrt"
"""A project's own teamrt directory (agent definitions, the team file): protected whole, wherever the home
is."""
AGENTS_DIR = Path(TEAMRT_DIR) / "agents"
"""Where a project keeps teamrt's own agent definitions."""
MEMORY_FILES = ("CLAUDE.md", "CLAUDE.local.md", "AGENTS.md")
"""Memory files: prompt text every agent of the next session reads (their imports are protected by the run
that loads them)."""
PROTECTED = (
    "is protected: no agent may change teamrt's home, .git, .claude, .mcp.json, .teamrt, CLAUDE.md,"
    " AGENTS.md, agent definitions or the team file, in any permission mode"
)


def protected_paths(
    roots: tuple[Path, ...],
    *,
    home: Path,
    git_dir: Path | None = None,
    team_file: Path | None = None,
    also: tuple[Path, ...] = (),
) -> tuple[Path, ...]:
    """The canonical protected paths for an agent working in ``roots`` (its workspace, the project and the
    repository's root): each root's ``.git``, ``.claude``, ``.mcp.json``, ``.teamrt`` and memory files,
    teamrt's ``home``, the repository's common ``git_dir``, the run's ``team_file`` and ``also`` (the files
    the run's memory imports). Paths need not exist."""
    found: list[Path] = [_canonical(home)]
    for root in roots:
        for name in (*PROTECTED_DIRS, *PROTECTED_FILES, TEAMRT_DIR, *MEMORY_FILES):
            found.append(_canonical(root / name))
    for path in (git_dir, team_file, *also):
        if path is not None:
            found.append(_canonical(path))
    tops = [_canonical(root) for root in roots]
    found += [path for path in _installation() if any(path.is_relative_to(top) for top in tops)]
    return tuple(dict.fromkeys(found))


def protected_in_tree(path: str | PurePosixPath) -> bool:
    """Whether a path relative to a repository's top (as git names it) is one that grants power: any
    ``.git`` or ``.claude`` component, a ``.mcp.json`` or memory file at any depth, or anything under the
    top-level ``.teamrt`` (agent definitions, team files). A branch that changes one is refused by ``apply``
    and the merge queue; the runtime quarantines one that an agent's process creates."""
    parts = _parts(path)
    if not parts:
        return False
    return (
        parts[0] == ".teamrt"
        or any(part in PROTECTED_DIRS for part in parts)
        or parts[-1] in PROTECTED_FILES
        or parts[-1] in MEMORY_FILES
    )


def _parts(path: str | PurePosixPath) -> tuple[str, ...]:
    """``PurePosixPath(path).parts``, without making a path of a string (a scan asks of every entry of a
    tree)."""
    if not isinstance(path, str):
        return path.parts
    parts = tuple(part for part in path.split("/") if part and part != ".")
    return ("/", *parts) if path.startswith("/") else parts


def _installation() -> tuple[Path, ...]:
    """teamrt's own code and the environment it runs from (its ripgrep too): an agent that could change
    them would run its code in the supervisor at the next import or search. They matter when they lie
    in a workspace (a project's own ``.venv`` running teamrt)."""
    return (_canonical(Path(__file__).parents[1]), _canonical(Path(sys.prefix)))


def write_refusal(path: Path, workspace: Path, protected: tuple[Path, ...]) -> str | None:
    """Why the canonical ``path`` may not be changed by an agent working in ``workspace``, or None."""
    root = _canonical(workspace)
    inside = path.is_relative_to(root)
    for top in protected:
        # a worktree agent's workspace lies in teamrt's home: the home protects all of itself but that
        if path.is_relative_to(top) and not (inside and root.is_relative_to(top) and root != top):
            return PROTECTED
    if inside and protected_in_tree(PurePosixPath(*path.relative_to(root).parts)):
        return PROTECTED
    return None


def _canonical(path: Path) -> Path:
    return Path(os.path.realpath(path))
