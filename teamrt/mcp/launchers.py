"""MCP servers started by a package launcher (``npx -y pkg``, ``uvx pkg``, ``bunx``, ``pnpm dlx``): what they
need, how a person allows exactly that, and what a run says when they have not.

A launcher downloads the package from its registry when it starts, into a
cache in your home. teamrt's sandbox gives a stdio server no network and hides
your home, so such a server cannot start: left alone, the launcher retries the
registry until the start times out, saying nothing of why. teamrt reads the
command (``launch``): for a launched package it says so at the run's start, in
one line naming the package and the team-file setting that allows it
(``notice``), and tells the launcher to stay offline (``OFFLINE_ENV``), so that
it fails at once unless the package is installed where the sandbox shows it.

``[mcp] fetch_packages`` in the team file names the packages that may be
fetched: such a server runs with the network (the narrowest grant the sandbox
can enforce: it has no per-host filter; every other server and command stays
offline) and a package cache of its own under teamrt's home, kept between runs
(one per launcher and package, so no package can change what another runs).
The grant holds only for exactly that: the command is the launcher itself (its
bare name, or the path ``PATH`` finds it at; not a file of that name elsewhere),
the entry's ``env`` does not set ``PATH`` or the launcher's own settings, the
arguments before the package are only "yes"/"quiet" flags (no ``--package``,
``--from``, ``--with``, ``--call``, registry or index that would fetch or run
something else), and the package is a registry name (not a path, URL, git
address or alias) equal to an allowed entry; an entry with a version allows
that version only. An allowed entry is a plain package name: no wildcards.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from teamrt.errors import UserError
from teamrt.sandbox.confinement import Confinement

LAUNCHERS = {"npx": "npm", "pnpx": "npm", "bunx": "npm", "uvx": "pypi"}
"""Launcher commands, and the registry whose names their package argument is."""
SUBCOMMANDS = {
    ("pnpm", "dlx"): "npm",
    ("yarn", "dlx"): "npm",
    ("bun", "x"): "npm",
    ("uv", "tool run"): "pypi",
}
"""Launchers that are a command's subcommand (``pnpm dlx pkg``, ``uv tool run pkg``)."""
QUIET_FLAGS = frozenset({"-y", "--yes", "-q", "--quiet", "--silent"})
"""The only options that may come before the package for a grant: they change nothing of what runs."""
LAUNCHER_ENV = re.compile(
    r"(?i)(PATH|NODE_OPTIONS|NODE_PATH|npm_config_.*|UV_.*|PIP_.*|BUN_.*|PNPM_.*|YARN_.*)"
)
"""Variables an entry may not set for a grant: where programs are found, the launcher's own settings."""
OFFLINE_ENV = {"npm_config_offline": "true", "UV_OFFLINE": "1"}
"""Set for a launched server without the grant: npm (npx) and uv stop at once instead of retrying a
registry the sandbox cannot reach; a package installed where the sandbox shows it still runs."""
SETTING = "[mcp] fetch_packages"

_NPM_NAME = re.compile(r"(?:@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*", re.IGNORECASE)
_NPM_VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+-]*")
_PYPI_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
_PYPI_VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+!-]*")


class FetchEntryError(UserError, ValueError):
    """An ``[mcp] fetch_packages`` entry that is not a plain package name."""


@dataclass(frozen=True)
class Launch:
    """A server's command read as a package launcher's."""

    launcher: str
    """As written in the command (``npx``, ``pnpm dlx``)."""
    registry: str
    """``npm`` or ``pypi``: whose names ``package`` is."""
    package: str
    """The package argument as written (``@scope/name@1.2``), '' when none could be read."""
    problem: str = ""
    """Why the launch cannot be granted the network ('' when it can be, if allowed)."""

    @property
    def name(self) -> str:
        """The package's name without its version, normalized as its registry compares names."""
        return _split(self.package, self.registry)[0]


def launch(command: str, args: tuple[str, ...], env: dict[str, str] | None = None) -> Launch | None:
    """``command args`` read as a package launcher's, or None when it is not one."""
    base = os.path.basename(command)
    rest = list(args)
    found = LAUNCHERS.get(base)
    launcher = base
    if found is None:
        for (program, sub), registry in SUBCOMMANDS.items():
            words = sub.split()
            if base == program and rest[: len(words)] == words:
                found, launcher, rest = registry, f"{base} {sub}", rest[len(words) :]
                break
    if found is None:
        return None
    position = next((i for i, a in enumerate(rest) if not a.startswith("-")), None)
    package = rest[position] if position is not None else ""
    problem = _problem(command, base, rest[: position if position is not None else len(rest)], env or {})
    if not problem and not _split(package, found)[0]:
        problem = f"{package[:80]!r} is not a {found} package name (a path, URL, git address or alias)"
    return Launch(launcher, found, package, problem)


def _problem(command: str, base: str, options: list[str], env: dict[str, str]) -> str:
    if "/" in command:
        real = shutil.which(base)
        if real is None or os.path.realpath(command) != os.path.realpath(real):
            return f"the command {command[:120]!r} is not the {base} that PATH finds"
    odd = [o for o in options if o not in QUIET_FLAGS]
    if odd:
        return f"the option {odd[0][:60]!r} before the package could fetch or run something else"
    setting = sorted(k for k in env if LAUNCHER_ENV.fullmatch(k))
    if setting:
        return f"its env sets {setting[0]}, which changes what the launcher runs"
    return ""


def _split(spec: str, registry: str) -> tuple[str, str]:
    """A package argument's (name, version), the name normalized; ('', '') when it is no registry name."""
    if registry == "npm":
        at = spec.rfind("@")
        name, version = (spec[:at], spec[at + 1 :]) if at > 0 else (spec, "")
        if not _NPM_NAME.fullmatch(name) or (version and not _NPM_VERSION.fullmatch(version)):
            return "", ""
        return name.lower(), version
    match = re.fullmatch(r"([^=@]*)(?:(==|@)(.*))?", spec)
    if match is None or (match.group(2) and not match.group(3)):
        return "", ""
    name, version = match.group(1), match.group(3) or ""
    if not _PYPI_NAME.fullmatch(name) or (version and not _PYPI_VERSION.fullmatch(version)):
        return "", ""
    return re.sub(r"[-_.]+", "-", name).lower(), version


def fetch_entry(text: str) -> str:
    """An ``[mcp] fetch_packages`` entry, checked: a package name, with a version or not; raises
    ``FetchEntryError``. Which registry it names is known only against a server's launcher."""
    if not _split(text, "npm")[0] and not _split(text, "pypi")[0]:
        raise FetchEntryError(
            f"fetch_packages: {text[:80]!r} is not a package name (a name such as"
            ' "@modelcontextprotocol/server-everything" or "mcp-server-time", with @version or ==version'
            " or not; no wildcards)"
        )
    return text


def granted(found: Launch, allowed: tuple[str, ...]) -> bool:
    """Whether ``allowed`` (the team file's ``fetch_packages``) lets ``found`` fetch its package."""
    if found.problem:
        return False
    name, version = _split(found.package, found.registry)
    for entry in allowed:
        want_name, want_version = _split(entry, found.registry)
        if want_name and want_name == name and (not want_version or want_version == version):
            return True
    return False


def cache_dir(home: Path, found: Launch) -> Path:
    """The package cache of ``found``'s launcher and package, under teamrt's ``home``: one per pair."""
    digest = hashlib.sha256(f"{found.launcher}\0{found.name}".encode()).hexdigest()[:16]
    return home / "cache" / "mcp-packages" / f"{found.launcher.replace(' ', '-')}-{digest}"


def cache_env(cache: Path) -> dict[str, str]:
    """Where each launcher keeps what it downloads, pointed at ``cache``."""
    return {
        "npm_config_cache": str(cache / "npm"), "npm_config_update_notifier": "false",
        "UV_CACHE_DIR": str(cache / "uv"), "UV_TOOL_DIR": str(cache / "uv-tools"),
        "BUN_INSTALL_CACHE_DIR": str(cache / "bun"), "npm_config_store_dir": str(cache / "pnpm-store"),
        "XDG_CACHE_HOME": str(cache / "xdg-cache"), "XDG_DATA_HOME": str(cache / "xdg-data"),
    }  # fmt: skip


def notice(server: str, found: Launch, source: str) -> str:
    """The one line a run's start says of a launched server that may not fetch its package."""
    what = f"it is started with {found.launcher}, which downloads {found.package or 'a package'} as it starts"
    if found.problem:
        return (
            f"MCP server {server!r} ({source}): {what}; the sandbox gives MCP servers no network, and"
            f" {SETTING} cannot allow this one: {found.problem}"
        )
    return (
        f"MCP server {server!r} ({source}): {what}, and the sandbox gives MCP servers no network or package"
        f" cache: to allow exactly this, add {SETTING} = [{_toml(found.package)}] to the team file"
    )


def _toml(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def confined(found: Launch | None, fetch: bool, ctx: Confinement) -> tuple[Confinement, dict[str, str]]:
    """Where a launched server runs, and the variables it gets: with ``fetch`` (its package allowed), the
    network and its package cache, writable, under teamrt's home; without, the launchers' offline
    switches (``OFFLINE_ENV``), which its entry's own ``env`` may still override. A server that is not
    launched runs as ``ctx`` says."""
    if found is None:
        return ctx, {}
    if not fetch:
        return ctx, dict(OFFLINE_ENV)
    cache = cache_dir(ctx.run_dir.parent.parent, found)
    cache.mkdir(parents=True, exist_ok=True, mode=0o700)
    policy = dataclasses.replace(ctx.policy, network=True)
    return dataclasses.replace(ctx, policy=policy, writable=(*ctx.writable, cache)), cache_env(cache)
