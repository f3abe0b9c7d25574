"""Which projects' hooks and MCP servers the person has trusted: ``teamrt trust`` records it, a run checks it.

A repository's ``.claude/settings.json`` (and ``settings.local.json``) hooks
are commands someone else wrote: a cloned repository's hooks must not run on
its first ``teamrt run``. ``teamrt trust`` records, for the project (its real
path), a hash of the hooks JSON of those two files as they are; a run lets
them run only while they hash the same, so a change to the hooks (a pull, a
branch switch, an edit) stops them until the person trusts them again. The
user's own ``~/.claude/settings.json`` hooks need no trust. The repository's
``statusLine`` command (which ``teamrt tui`` runs: ``teamrt.claudecode.statusline``)
is in the same hash, only when there is one, so trust recorded for a repository
without one still holds.

The MCP servers that came with the repository (``.mcp.json``, and the inline
``mcpServers`` of its agent files: ``teamrt.mcp.config.repository_servers``)
are programs someone else chose just as well: their hash is recorded beside
the hooks' and checked the same way, on its own, so a change to one does not
stop the other.

The ``permissions.allow`` rules of the repository's settings files (``.claude/settings.json``, and
``settings.local.json`` when git tracks it) are permission someone else wrote: they grant nothing until
their hash is recorded too (``allow_sha256``), and stop granting when they change.

The repository's skills (``.claude/skills``: instructions for the model and the scripts beside them) are
someone else's too: their hash (``teamrt.claudecode.skills.skills_digest``, over every file of every skill
folder) is recorded as ``skills_sha256`` and checked the same way; untrusted, they are left out of the run.

``teamrt trust`` first shows exactly what it would trust (``trust_report``: every hook's command, every
server's entry, every allow rule), with control characters written as escapes so that no escape
sequence can hide a line from the person reading it; only then does it record anything.

The record lives beside teamrt's settings file, outside every repository::

    ~/.config/teamrt/trusted.json
    {"projects": {"/home/me/src/app": {"hooks_sha256": "9f2c...", "mcp_sha256": "41ab...",
                                       "allow_sha256": "77d0...", "trusted_at": "2026-05-01T09:30:00Z"}}}
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from teamrt.claudecode.hooks import SettingsSource
from teamrt.errors import UserError
from teamrt.settings import settings_path
from teamrt.terminal import clean

TRUST_FILE = "trusted.json"
REPOSITORY_SCOPES = ("project", "local")
"""The settings files whose hooks need the person's trust: those that come with the repository."""


class RepositoryFile(SettingsSource, Protocol):
    """A settings file read that knows whether it came with the repository
    (``teamrt.claudecode.settings.SettingsFile``; a protocol, as settings.py asks this module whether its
    allow rules are trusted)."""

    @property
    def repository(self) -> bool: ...


class TrustError(UserError, ValueError):
    """The trust file cannot be read or written; the message is one line naming it."""


@dataclass(frozen=True)
class Trusted:
    project: str
    hooks_sha256: str | None
    trusted_at: str
    mcp_sha256: str | None = None
    allow_sha256: str | None = None
    skills_sha256: str | None = None


def trust_path() -> Path:
    """``trusted.json`` beside teamrt's settings file (``teamrt.settings.settings_path``)."""
    return settings_path().parent / TRUST_FILE


def project_key(project: Path) -> str:
    """A project as the trust file names it: its real path."""
    return os.path.realpath(project)


def hooks_digest(files: Sequence[SettingsSource]) -> str | None:
    """The hash of the repository's hooks (the ``hooks`` JSON of its project and local settings files,
    as written, the plugins its settings enable, whose hooks, MCP servers and skills then run:
    ``teamrt.claudecode.plugins``, and its ``statusLine`` command); None when they have none."""
    written: dict[str, Any] = dict.fromkeys(REPOSITORY_SCOPES)  # a file without hooks is as none at all
    written |= {f.scope: f.data.get("hooks") or None for f in files if f.scope in REPOSITORY_SCOPES}
    plugins = repository_plugins(files)
    if plugins:  # only then: a trust recorded before plugins were read still holds
        written["enabledPlugins"] = plugins
    lines = repository_status_lines(files)
    if lines:  # only then, as for plugins: a command the TUI runs (teamrt.claudecode.statusline)
        written["statusLine"] = lines
    if not any(written.values()):
        return None
    return _sha256(written)


def repository_status_lines(files: Sequence[SettingsSource]) -> dict[str, Any]:
    """The ``statusLine`` entries of the settings files that came with the repository, as written, by
    scope."""
    return {
        f.scope: f.data["statusLine"]
        for f in files
        if "statusLine" in f.data and getattr(f, "repository", f.scope in REPOSITORY_SCOPES)
    }


def repository_plugins(files: Sequence[SettingsSource]) -> list[str]:
    """The plugins (``name@marketplace``) the settings files that came with the repository enable, as
    written, sorted."""
    found: set[str] = set()
    for file in files:
        raw = file.data.get("enabledPlugins")
        if isinstance(raw, dict) and getattr(file, "repository", file.scope in REPOSITORY_SCOPES):
            found.update(str(key) for key, on in raw.items() if on is True)
    return sorted(found)


def allow_digest(files: Sequence[RepositoryFile]) -> str | None:
    """The hash of the ``permissions.allow`` rules of the settings files that came with the repository
    (``SettingsFile.repository``), as written; None when they have none."""
    written = {f.scope: rules for f in files if f.repository and (rules := repository_allow(f))}
    return _sha256(written) if written else None


def repository_allow(file: RepositoryFile) -> list[Any]:
    """The ``permissions.allow`` list of a settings file as written ([] when it has none)."""
    permissions = file.data.get("permissions")
    allow = permissions.get("allow") if isinstance(permissions, dict) else None
    return allow if isinstance(allow, list) else []


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
        hooks, mcp, allow, skills = (
            entry.get(f"{key}_sha256") for key in ("hooks", "mcp", "allow", "skills")
        )
        digests = (hooks, mcp, allow, skills)
        if not all(isinstance(d, str | None) for d in digests) or all(d is None for d in digests):
            raise TrustError(
                f"trust file {path}: the entry of {json.dumps(name)[:200]} has no hooks_sha256, mcp_sha256,"
                " allow_sha256 or skills_sha256"
            )
        found[name] = Trusted(name, hooks, str(entry.get("trusted_at", "")), mcp, allow, skills)
    return found


def is_trusted(project: Path, digest: str) -> bool:
    """Whether the person trusted ``project``'s hooks as they hash now (``digest``)."""
    entry = trusted_projects().get(project_key(project))
    return entry is not None and entry.hooks_sha256 == digest


def is_mcp_trusted(project: Path, digest: str) -> bool:
    """Whether the person trusted ``project``'s MCP servers as they hash now (``digest``)."""
    entry = trusted_projects().get(project_key(project))
    return entry is not None and entry.mcp_sha256 == digest


def is_allow_trusted(project: Path, digest: str) -> bool:
    """Whether the person trusted ``project``'s allow rules as they hash now (``digest``)."""
    entry = trusted_projects().get(project_key(project))
    return entry is not None and entry.allow_sha256 == digest


def is_skills_trusted(project: Path, digest: str) -> bool:
    """Whether the person trusted ``project``'s skills as they hash now (``digest``)."""
    entry = trusted_projects().get(project_key(project))
    return entry is not None and entry.skills_sha256 == digest


def trust(
    project: Path,
    digest: str | None,
    mcp: str | None = None,
    allow: str | None = None,
    skills: str | None = None,
) -> Trusted:
    """Record that the person trusts ``project``'s hooks (``digest``), MCP servers (``mcp``), allow
    rules (``allow``) and skills (``skills``) as they hash now."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    entry = Trusted(project_key(project), digest, now, mcp, allow, skills)
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
                             "allow_sha256": t.allow_sha256, "skills_sha256": t.skills_sha256,
                             "trusted_at": t.trusted_at}
                         for p, t in sorted(projects.items())}}  # fmt: skip
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


CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufff9-\ufffb]"
)
"""What ``visible`` writes as an escape: C0 but newline and tab, DEL, C1, line separators, bidi marks."""


def visible(text: str) -> str:
    """``text`` with every control character written as its escape (``\\x1b``, ``\\u202e``), then through
    ``teamrt.terminal.clean``: what the person reads is every character that runs, none of them acting
    on the terminal."""
    return clean(CONTROL.sub(lambda m: ascii(m.group())[1:-1], text))
