"""A kernel limit on a command's processes, where teamrt may set one: a cgroup of its own with ``pids.max``.

``teamrt.tools.bash`` counts a command's processes every few hundredths of a
second and kills it over its limit, but a fork bomb outruns any count: it makes
thousands of processes between two looks, and the machine's PIDs are shared by
everyone. Where the cgroup (v1) ``pids`` controller is writable (teamrt runs as
root, as in a container or a CI job), each command starts in a cgroup of its own
whose ``pids.max`` is the limit, and the kernel refuses every fork past it. The
count still runs, and ends the command once a fork was refused. Elsewhere (a
normal user; cgroup v2 without a delegated subtree) the count alone holds.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from pathlib import Path

PIDS = Path("/sys/fs/cgroup/pids")
_serial = itertools.count(1)


def make(max_processes: int) -> Path | None:
    """A fresh cgroup allowing ``max_processes`` processes, or None where none can be made."""
    path = PIDS / "teamrt" / f"{os.getpid()}-{next(_serial)}"
    try:
        path.mkdir(parents=True)
        (path / "pids.max").write_text(str(max_processes))
    except OSError:
        with contextlib.suppress(OSError):
            path.rmdir()
        return None
    return path


def enter(argv: list[str], cgroup: Path) -> list[str]:
    """``argv`` started inside ``cgroup``: a shell moves itself in, then becomes ``argv``."""
    return ["/bin/sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(cgroup), *argv]


def refused(cgroup: Path) -> bool:
    """Whether the kernel has refused a fork in ``cgroup`` for being over its ``pids.max``."""
    try:
        events = (cgroup / "pids.events").read_text()
    except OSError:
        return False
    return any(line.split()[1:] != ["0"] for line in events.splitlines() if line.startswith("max "))


def remove(cgroup: Path, within: float = 5.0) -> None:
    """Remove ``cgroup`` once its last process is gone (a killed one may linger a moment)."""
    deadline = time.monotonic() + within
    while True:
        try:
            cgroup.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                return  # left behind, empty soon; the kernel keeps no process in it for long
            time.sleep(0.01)
