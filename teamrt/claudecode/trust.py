"""Which projects' hooks and MCP servers the person has trusted: ``teamrt trust`` records it, a run checks it.

A repository's ``.claude/settings.json`` (and ``settings.local.json``) hooks
are commands someone else wrote: a cloned repository's hooks must not run on
its first ``teamrt run``. ``teamrt trust`` records, for the project (its real
path), a hash of the hooks JSON of those two files as they are; a run lets
them run only while they hash the same, so a change to the hooks (a pull, a
branch switch, an edit) stops them until the person trusts them again. The
user's own ``~/.claude/settings.json`` hooks need no trust.

The MCP servers that came with the repository (``.mcp.json``, and the inline
``mcpServers`` of its agent files: ``teamrt.mcp.config.repository_servers``)
are programs someone else chose just as well: their hash is recorded beside
the hooks' and checked the same way, on its own, so a change to one does not
stop the other.

The record lives beside teamrt's settings file, outside every repository::

    ~/.config/teamrt/trusted.json
    {"projects": {"/home/me/src/app": {"hooks_sha256": "9f2c...", "mcp_sha256": "41ab...",
                                       "trusted_at": "2026-05-01T09:30:00Z"}}}
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..settings import settings_path
from .hooks import SettingsSource
from .settings import SettingsError, read_settings_files

TRUST_FILE = "trusted.json"
REPOSITORY_SCOPES = ("project", "local")
"""The settings files whose hooks need the person's trust: those that come with the repository."""


class TrustError(ValueError):
    """The trust file cannot be read or written; the message is one line naming it."""


@dataclass(frozen=True)
class Trusted:
    project: str
    hooks_sha256: str | None
    trusted_at: str
    mcp_sha256: str | None = None


def trust_path() -> Path:
    """``trusted.json`` beside teamrt's settings file (``teamrt.settings.settings_path``)."""
    return settings_path().parent / TRUST_FILE


def project_key(project: Path) -> str:
    """A project as the trust file names it: its real path."""
    return os.path.realpath(project)


def hooks_digest(files: Sequence[SettingsSource]) -> str | None:
    """The hash of the repository's hooks (the ``hooks`` JSON of its project and local settings files,
    as written); None when they have none."""
    written: dict[str, Any] = dict.fromkeys(REPOSITORY_SCOPES)  # a file without hooks is as none at all
    written |= {f.scope: f.data.get("hooks") or None for f in files if f.scope in REPOSITORY_SCOPES}
    if not any(written.values()):
        return None
    return _sha256(written)


def mcp_digest(servers: Mapping[str, Any]) -> str | None:
    """The hash of the MCP server entries that came with the repository, as written; None when there are
    none."""
    return _sha256(dict(servers)) if servers else None


def _sha256(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def trusted_projects() -> dict[str, Trusted]:
    """Every trust recorded, by project path."""
    path = trust_path()
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise TrustError(f"trust file {path}: {e}") from None
    projects = raw.get("projects") if isinstance(raw, dict) else None
    if not isinstance(projects, dict):
        raise TrustError(f"trust file {path}: must hold an object with 'projects'")
    found = {}
    for name, entry in projects.items():
        entry = entry if isinstance(entry, dict) else {}
        hooks, mcp = entry.get("hooks_sha256"), entry.get("mcp_sha256")
        if not isinstance(hooks, str | None) or not isinstance(mcp, str | None) or hooks is mcp is None:
            raise TrustError(f"trust file {path}: the entry of {name} has no hooks_sha256 or mcp_sha256")
        found[name] = Trusted(name, hooks, str(entry.get("trusted_at", "")), mcp)
    return found


def is_trusted(project: Path, digest: str) -> bool:
    """Whether the person trusted ``project``'s hooks as they hash now (``digest``)."""
    entry = trusted_projects().get(project_key(project))
    return entry is not None and entry.hooks_sha256 == digest


def is_mcp_trusted(project: Path, digest: str) -> bool:
    """Whether the person trusted ``project``'s MCP servers as they hash now (``digest``)."""
    entry = trusted_projects().get(project_key(project))
    return entry is not None and entry.mcp_sha256 == digest


def trust(project: Path, digest: str | None, mcp: str | None = None) -> Trusted:
    """Record that the person trusts ``project``'s hooks (``digest``) and MCP servers (``mcp``) as they
    hash now."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    entry = Trusted(project_key(project), digest, now, mcp)
    _write({**trusted_projects(), entry.project: entry})
    return entry


def revoke(project: Path) -> bool:
    """Forget the trust in ``project``'s hooks; False when there was none."""
    projects = trusted_projects()
    if projects.pop(project_key(project), None) is None:
        return False
    _write(projects)
    return True


def _write(projects: dict[str, Trusted]) -> None:
    """The trust file, replaced whole (a reader never sees half of it), readable by its owner only."""
    path = trust_path()
    body = {"projects": {p: {"hooks_sha256": t.hooks_sha256, "mcp_sha256": t.mcp_sha256,
                             "trusted_at": t.trusted_at} for p, t in sorted(projects.items())}}  # fmt: skip
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=".trusted-", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(body, out, indent=2)
                out.write("\n")
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
    except OSError as e:
        raise TrustError(f"trust file {path}: {e.strerror or e}") from None


def trust_state(entry: Trusted) -> str:
    """Whether a recorded trust holds now: ``in force`` (the hooks are as trusted), ``lapsed`` (they
    changed, so they do not run), ``no hooks now``, ``project gone`` or ``unreadable: <why>``; then the
    same of its MCP servers, after ``; MCP servers``."""
    from ..agents import load_definitions
    from ..mcp.config import repository_servers

    project = Path(entry.project)
    if not project.is_dir():
        return "project gone"
    try:
        digest = hooks_digest(read_settings_files(project))
    except SettingsError as e:
        return f"unreadable: {e}"
    hooks = "no hooks now" if digest is None else "in force" if digest == entry.hooks_sha256 else "lapsed"
    mcp = mcp_digest(repository_servers(project, load_definitions(project).values(), []))
    if mcp is None and entry.mcp_sha256 is None:
        return hooks
    servers = "none now" if mcp is None else "in force" if mcp == entry.mcp_sha256 else "lapsed"
    return f"{hooks}; MCP servers {servers}"
