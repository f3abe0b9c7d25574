"""The bubblewrap command line that confines ``bash``.

Why the kernel and not a check of the command: a shell is a programming
language, so no reading of the command's text can tell what it will touch.
``cd /; touch x``, ``python3 -c 'open("/etc/x", "w")'``, ``eval "$(base64 -d
<<< ...)"``, a script the agent wrote a turn earlier, or any program that writes
where it likes all pass a parser as harmless or opaque. Only the kernel sees
every ``open()``, so bubblewrap sets up mounts in which the rest of the system
is read-only: the workspace is the one writable place, ``/tmp`` is a private
tmpfs, and the run's directory (its store and mailboxes) stays read-only even
when it lies inside the workspace.

The command also gets a PID namespace (``--unshare-pid``): when the shell
ends, or its group is killed, the kernel ends everything it started, even a
process that left the group with ``setsid``. ``--die-with-parent`` does the same
if teamrt itself dies. ``--new-session`` is left out on purpose: ``bash`` already
starts the sandbox in a session of its own with no controlling terminal (what
``--new-session`` guards against: TIOCSTI input injection), and keeping the
shell in the sandbox's process group lets ``kill_group``'s SIGTERM reach the
command itself, so it can end cleanly before a SIGKILL.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
from pathlib import Path

WARNING = (
    "teamrt: bubblewrap (bwrap) is not installed, so bash runs unconfined;"
    " install the bubblewrap package to confine it"
)


class Sandbox:
    """Turns a command into the argv that runs it: inside bwrap, or plain when ``bwrap`` is None.

    Unconfined, the first command prints ``WARNING`` to stderr; one sandbox
    warns once (``default_sandbox()`` is one per process).
    """

    def __init__(self, bwrap: str | None) -> None:
        self.bwrap = bwrap
        self._warned = False

    @property
    def confined(self) -> bool:
        return self.bwrap is not None

    def argv(
        self,
        command: str,
        workspace: Path,
        run_dir: Path,
        writable: tuple[Path, ...] = (),
        readable: tuple[Path, ...] = (),
    ) -> list[str]:
        shell = ["/bin/bash", "-c", command]
        if self.bwrap is None:
            if not self._warned:
                print(WARNING, file=sys.stderr)
                self._warned = True
            return shell
        return [self.bwrap, *bwrap_options(workspace, run_dir, writable, readable), "--", *shell]


def bwrap_options(
    workspace: Path, run_dir: Path, writable: tuple[Path, ...] = (), readable: tuple[Path, ...] = ()
) -> list[str]:
    """bwrap's options: all read-only but the workspace, fresh /dev, /proc and /tmp, own PID namespace.

    Order matters: later mounts cover earlier ones, so the workspace (which may
    lie under /tmp) is bound after the tmpfs, and teamrt's home (``<home>/runs/<run>``
    is ``run_dir``) after the workspace, read-only, when the workspace holds it: no
    agent's shell can write any run's store or mailboxes. A worktree agent's workspace
    lies inside the home instead, and the rest of the home is read-only with ``/``.
    """
    ws = os.path.realpath(workspace)
    home = os.path.realpath(run_dir.parent.parent)
    options = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    options += ["--bind", ws, ws]
    if os.path.isdir(home) and Path(home).is_relative_to(ws):
        options += ["--ro-bind", home, home]
    for how, paths in (("--ro-bind", readable), ("--bind", writable)):
        for path in paths:
            real = os.path.realpath(path)
            options += [how, real, real]
    return [*options, "--unshare-pid", "--die-with-parent", "--chdir", ws]


@functools.cache
def default_sandbox() -> Sandbox:
    """This process's sandbox, with ``bwrap`` looked up on PATH once.

    Only absolute PATH entries count, so a ``bwrap`` an agent wrote into its
    workspace is never taken for the real one through a relative entry.
    """
    path = os.pathsep.join(p for p in os.get_exec_path() if os.path.isabs(p))
    return Sandbox(shutil.which("bwrap", path=path))
