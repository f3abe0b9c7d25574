"""What a command of an agent runs in: bubblewrap's mounts and namespaces, an allowlisted environment, limits.

Why the kernel and not a check of the command: a shell is a programming
language, so no reading of the command's text can tell what it will touch.
``cd /; touch x``, ``python3 -c 'open("/etc/x", "w")'``, ``eval "$(base64 -d
<<< ...)"``, a script the agent wrote a turn earlier, or any program that writes
where it likes all pass a parser as harmless or opaque. Only the kernel sees
every ``open()``, so bubblewrap sets up a world for each command:

- every capability dropped, so root inside is no one outside (teamrt may run
  as root: without ``--cap-drop ALL`` root keeps the right to remount ``/``);
- the system read-only, ``/proc`` too (uid 0 owns ``/proc/sys`` and
  ``/proc/sysrq-trigger``, and needs no capability to write them); the
  workspace the one writable place, ``/tmp`` private;
- home directories (``$HOME``, ``/root``, ``/home``) and ``/run`` (the sockets
  of docker, systemd and D-Bus, which obey uid 0) hidden under empty tmpfs;
  the usual toolchain places in it (``~/.pyenv``, ``~/.cargo/bin``, ...), the
  Python teamrt runs on and what the run names in ``[sandbox] read`` are shown
  again, read-only; ``/etc/shadow`` and the host's ssh keys are blanked;
- teamrt's ``runs`` hidden, so no run's store or mailboxes can be read or
  written; this agent's workspace, writable dirs and the run's spill
  directory are shown again;
- the protected paths (``.git``, ``.claude``, the team file, teamrt's home)
  read-only where they would otherwise be writable;
- no network unless ``[sandbox] network = true``; IPC and PID namespaces of
  its own: when the shell ends, or its group is killed, the kernel ends
  everything it started, even a process that left the group with ``setsid``.
  ``--die-with-parent`` does the same if teamrt itself dies;
- a seccomp filter (``teamrt.sandbox.seccomp``): no kernel keyring, no ``bpf``,
  ``io_uring``, ``userfaultfd``, mounts, namespaces or terminal input
  injection, at least what Docker's default profile refuses;
- in-memory places of a fixed size: ``/tmp`` holds at most half of
  ``max_memory_mb``, ``/dev/shm`` a quarter, and the hidden homes and ``/run``
  share the last quarter (``sizes``); the rest of ``/dev`` is read-only. A full
  one fails a write with ``ENOSPC``;
- hard limits on memory (``RLIMIT_DATA``) and file size (``RLIMIT_FSIZE``)
  that a process without capabilities cannot raise; the memory of the command
  as a whole, and its number of processes, are held by a cgroup of its own
  where teamrt may make one (``teamrt.sandbox.limits``) and watched by the tool
  (``teamrt.tools.shell.bash``) elsewhere, as ``RLIMIT_NPROC`` does not hold for
  root and ``RLIMIT_DATA`` counts one process.

``--new-session`` is left out on purpose: ``bash`` already starts the sandbox in
a session of its own with no controlling terminal (what ``--new-session``
guards against: TIOCSTI input injection), and keeping the shell in the
sandbox's process group lets ``kill_group``'s SIGTERM reach the command itself,
so it can end cleanly before a SIGKILL.

Without bubblewrap, commands run only when the run opted in (``[sandbox]
unconfined``, ``teamrt run --unconfined``); they still get the environment and
the limits, but nothing else of the above.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Final

from teamrt.sandbox import seccomp
from teamrt.sandbox.confinement import Confinement
from teamrt.sandbox.policy import SandboxPolicy

SANDBOX_EVENT: Final = "sandbox"
"""The event a run records as it starts: ``{"confined": bool, "unconfined": bool, "network": bool}``."""
PASSED_ENV = ("PATH", "HOME", "LANG", "TERM", "TZ", "USER", "LOGNAME")
"""Variables every command gets (with ``LC_*``); others only when the team file names them."""
NEVER_PASSED = ("ANTHROPIC_", "TEAMRT_DB")
"""Credentials of teamrt itself, which no command gets."""
SET_ENV = {"PYTHONDONTWRITEBYTECODE": "1"}
"""Set for every command: an agent edits a file and runs it again within a second, often at the same
size (``a - b`` to ``a + b``), which Python's bytecode cache cannot tell from the old file."""
HOMES = ("/root", "/home")
"""Hidden with ``$HOME``."""
TOOLCHAINS = (
    "~/.pyenv", "~/.local/bin", "~/.local/lib", "~/.local/share/uv", "~/.cargo/bin", "~/.rustup",
    "~/.nvm", "~/.volta", "~/.bun", "~/.deno", "~/go", "~/.sdkman", "~/.asdf", "~/.local/share/mise",
    "~/miniconda3", "~/anaconda3", "~/miniforge3",
)  # fmt: skip
"""Places in the hidden home where people install interpreters and compilers (no credentials among
them: ``~/.cargo`` itself is not shown, only its ``bin``), shown read-only so that a project's own
tools, and a virtual environment made from them, still run."""
SECRET_FILES = (
    "/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/proc/keys", "/proc/key-users",
)  # fmt: skip
"""Replaced by an empty file: root inside the sandbox still owns them, capabilities or not (``/proc/keys``
names the keys of every keyring the user can see, as Docker hides it too)."""
MiB = 1 << 20
DAEMON_DIRS = ("/run", "/var/run")
OPT_IN = (
    "install bubblewrap (the bubblewrap package), or let commands run unconfined with"
    " `teamrt run --unconfined` or `[sandbox] unconfined = true` in the team file"
)
REFUSAL = f"bubblewrap (bwrap) is not installed, so commands cannot be sandboxed; to run them, {OPT_IN}"


@dataclass(frozen=True)
class Command:
    """A command ready to start: its argv, its environment, and how many processes it may have."""

    argv: list[str]
    env: dict[str, str]
    max_processes: int
    contained: bool
    """In a PID namespace of its own: every process it starts stays in its process tree."""
    max_memory_mb: int | None = None
    """Memory of all its processes together, and its in-memory places, in MiB (None: per process only)."""
    in_memory: tuple[str, ...] = ()
    """Its in-memory places (``/tmp``, ``/dev/shm``, ...), as paths inside the sandbox, counted in
    ``max_memory_mb`` where no cgroup counts them."""


class Sandbox:
    """Turns a command into what runs it: inside bwrap, or plain when ``bwrap`` is None."""

    def __init__(self, bwrap: str | None, unusable: str | None = None) -> None:
        """``unusable``: why bwrap, though installed, cannot confine a command here (then it is not used)."""
        self.bwrap = bwrap if unusable is None else None
        self.unusable = unusable

    @property
    def confined(self) -> bool:
        return self.bwrap is not None

    def refusal(self, policy: SandboxPolicy) -> str | None:
        """Why an agent's command may not run (no bwrap, and the run did not opt in), or None."""
        if self.confined or policy.unconfined:
            return None
        return REFUSAL if self.unusable is None else f"{self.unusable}; to run them, {OPT_IN}"

    def command(self, command: str, ctx: Confinement) -> Command:
        """``command`` as ``/bin/bash -c`` confined as ``ctx`` says (callers check ``refusal`` first)."""
        shell = _limited(command, ctx.policy)
        env = command_env(ctx.policy, ctx.env)
        limit = ctx.policy.max_memory_mb
        if self.bwrap is None:
            return Command(shell, env, ctx.policy.max_processes, False, limit)
        argv = seccomp.load([self.bwrap, *bwrap_options(ctx), "--", *shell])
        places = ("/dev/shm", *_hidden(ctx))
        return Command(argv, env, ctx.policy.max_processes, True, limit, places)


def command_env(policy: SandboxPolicy, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's variables that commands may see (``PASSED_ENV``, ``LC_*``, ``policy.env``),
    ``SET_ENV`` and ``extra``."""
    named = {*PASSED_ENV, *policy.env}
    passed = {
        name: value
        for name, value in os.environ.items()
        if (name in named or name.startswith("LC_")) and not name.startswith(NEVER_PASSED)
    }
    return {**passed, **SET_ENV, **(extra or {})}


def _limited(command: str, policy: SandboxPolicy) -> list[str]:
    """``/bin/bash -c command`` under hard limits on data memory and file size (bash counts KiB)."""
    limits = f"ulimit -H -S -d {policy.max_memory_mb * 1024} -f {policy.max_file_mb * 1024} || exit 126"
    return ["/bin/bash", "-c", f'{limits}; exec /bin/bash -c "$1"', "/bin/bash", command]


# How mounts on one path stack: a later kind covers an earlier one.
_HIDE, _WORKSPACE, _READ, _READ_IF_THERE, _PROTECT, _WRITE = range(6)
_BIND = {
    _WORKSPACE: "--bind",
    _READ: "--ro-bind",
    _READ_IF_THERE: "--ro-bind-try",
    _PROTECT: "--ro-bind-try",
    _WRITE: "--bind",
}


def bwrap_options(ctx: Confinement) -> list[str]:
    """bwrap's options for a command confined as ``ctx`` says.

    A mount covers whatever earlier mounts put at or below its path, so they
    are made shallowest first: the most specific place decides. The workspace
    under a hidden ``/tmp`` or home is shown, the run's ``runs`` inside the
    lead's workspace is hidden, a worktree agent's workspace inside ``runs`` is
    shown again, ``.git`` inside a workspace is read-only and a worktree's git
    metadata inside the repository's ``.git`` writable.
    """
    ws = _real(ctx.workspace)
    writable = [_real(p) for p in ctx.writable]
    mounts = [(_HIDE, path) for path in _hidden(ctx)]
    mounts.append((_WORKSPACE, ws))
    mounts += [(_READ, _real(p)) for p in ctx.readable]
    mounts += [(_READ_IF_THERE, path) for path in _shown(ctx)]
    mounts += [(_PROTECT, path) for path in _protected(ctx, ws, writable)]
    mounts += [(_WRITE, path) for path in writable]
    room = sizes(ctx.policy, [path for kind, path in mounts if kind == _HIDE])
    options = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--remount-ro", "/proc"]
    options += [*_sized(room, SHM), "--remount-ro", "/dev"]
    for kind, path in sorted(dict.fromkeys(mounts), key=lambda m: (len(PurePath(m[1]).parts), m[0])):
        options += _sized(room, path) if kind == _HIDE else [_BIND[kind], path, path]
    for secret in (*SECRET_FILES, *glob.glob("/etc/ssh/ssh_host_*_key")):
        if os.path.isfile(secret):
            options += ["--ro-bind", "/dev/null", secret]
    runs = _real(ctx.run_dir.parent)
    if (_HIDE, runs) in mounts:  # read-only once what is shown in it is mounted: writes there fail plainly
        options += ["--remount-ro", runs]
    if not ctx.policy.network:
        options.append("--unshare-net")
    options += ["--unshare-ipc", "--unshare-pid", "--die-with-parent", "--cap-drop", "ALL"]
    options += seccomp.options()
    return [*options, "--chdir", ws]


SHM = "/dev/shm"
TMP = "/tmp"


def sizes(policy: SandboxPolicy, hidden: list[str]) -> dict[str, int]:
    """The size in bytes of each in-memory place of a command: ``/tmp`` half of ``max_memory_mb``,
    ``/dev/shm`` a quarter, and the other ``hidden`` places (homes, ``/run``) the last quarter between
    them (at least 1 MiB each). Together they fit in the command's memory limit, which counts what they
    hold where a cgroup holds it (``teamrt.sandbox.limits``) or the tool totals it
    (``teamrt.tools.shell.bash``)."""
    total = policy.max_memory_mb * MiB
    others = [p for p in hidden if p != TMP]
    room = {TMP: total // 2, SHM: total // 4}
    room.update({p: max(MiB, total // 4 // len(others)) for p in others})
    return room


def _sized(room: dict[str, int], path: str) -> list[str]:
    """``--tmpfs path``, of the size ``room`` gives it where this bwrap can size one."""
    return [*(("--size", str(room[path])) if sizable() else ()), "--tmpfs", path]


@functools.cache
def sizable() -> bool:
    """Whether the installed bwrap sizes a tmpfs (``--size``, bubblewrap 0.6 and later). Without it the
    places are as large as the kernel's default (half the machine's memory) and only the command's
    memory cgroup, or the tool's total, counts them."""
    bwrap = default_sandbox().bwrap
    if bwrap is None:
        return False
    try:
        shown = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--size" in shown.stdout + shown.stderr


def _hidden(ctx: Confinement) -> list[str]:
    """Directories covered by an empty tmpfs: /tmp, the homes, /run, and the runs of teamrt's home."""
    home = os.environ.get("HOME", "")
    candidates = ["/tmp", *((home,) if home else ()), *HOMES, *DAEMON_DIRS, str(ctx.run_dir.parent)]
    found = [_real(p) for p in candidates if os.path.isdir(p)]
    return [p for p in dict.fromkeys(found) if p != "/"]


def _shown(ctx: Confinement) -> list[str]:
    """What is shown read-only inside hidden places when it exists: the run's spill directory, the
    confinement's extra roots, the toolchains in the home, the Python teamrt runs on, the policy's ``read``
    paths and, with the network, the resolver's file."""
    paths = [ctx.run_dir / "spill", *ctx.extra_roots, Path(sys.base_prefix), Path(sys.prefix)]
    paths += [Path(os.path.expanduser(p)) for p in (*TOOLCHAINS, *ctx.policy.read)]
    if ctx.policy.network:
        paths.append(Path("/etc/resolv.conf"))  # may point into /run
    return [_real(p) for p in paths]


def _protected(ctx: Confinement, ws: str, writable: list[str]) -> list[str]:
    """The protected paths, teamrt's home among them, that lie where a command may write (the workspace,
    a writable dir); not one that holds the workspace (the home, for a worktree agent). The others are
    read-only or hidden already, and binding them would show what is hidden."""
    found = []
    for path in map(_real, (*ctx.protected, ctx.run_dir.parent.parent)):
        if PurePath(ws).is_relative_to(path):
            continue
        if any(PurePath(path).is_relative_to(place) for place in (ws, *writable)):
            found.append(path)
    return found


def _real(path: Path | str) -> str:
    return os.path.realpath(path)


def describe(*, confined: bool, unconfined: bool, network: bool) -> str:
    """One line on what a run's commands may reach, from its ``SANDBOX_EVENT``."""
    if confined:
        return "confined by bubblewrap, " + ("with the network" if network else "without the network")
    if unconfined:
        return (
            "UNCONFINED: bubblewrap is not installed and the run opted in; commands run with teamrt's"
            " rights, files and network"
        )
    return "none: bubblewrap is not installed, so bash and merge gates are refused"


@functools.cache
def default_sandbox() -> Sandbox:
    """This process's sandbox, with ``bwrap`` looked up on PATH once.

    Only absolute PATH entries count, so a ``bwrap`` an agent wrote into its
    workspace is never taken for the real one through a relative entry.
    """
    path = os.pathsep.join(p for p in os.get_exec_path() if os.path.isabs(p))
    bwrap = shutil.which("bwrap", path=path)
    unfiltered = seccomp.available() if bwrap is not None else None
    if unfiltered is not None:
        return Sandbox(bwrap, f"no seccomp filter can be made for commands ({unfiltered})")
    return Sandbox(bwrap)
