"""Kernel limits on a command as a whole, where teamrt may set them: cgroups with ``pids.max`` and memory.

Processes: ``teamrt.tools.shell.bash`` counts a command's processes every few
hundredths of a second and kills it over its limit, but a fork bomb outruns any
count: it makes thousands of processes between two looks, and the machine's
PIDs are shared by everyone. Where the cgroup ``pids`` controller is writable
(teamrt runs as root, as in a container or a CI job), each command starts in a
cgroup of its own whose ``pids.max`` is the limit, and the kernel refuses every
fork past it. The count still runs, and ends the command once a fork was
refused.

Memory: ``RLIMIT_DATA`` holds per process, so eight processes each under it
held eight times the limit, and ``MAP_SHARED`` memory and files in ``/tmp`` or
``/dev/shm`` (memory too) are not counted at all. Where the ``memory``
controller is writable, the command's cgroup gets ``max_memory_mb`` for all its
processes together, shared memory and in-memory files included (the kernel
charges a tmpfs page to the cgroup of the process that wrote it), and no swap
beyond it. Past the limit the kernel ends a process of the command (its OOM
killer, confined to the cgroup) and teamrt then ends the whole command, saying
why. Where no memory cgroup can be made, ``used_mb`` lets the tool total the
command's memory itself (see ``teamrt.tools.shell.bash``).

Which cgroups: cgroup v1's ``pids`` and ``memory`` hierarchies where they are
mounted and writable, else one cgroup v2 beneath teamrt's own where the unified
hierarchy lets teamrt enable ``pids`` and ``memory`` for it (its root, or a
delegated subtree). Elsewhere (a normal user; cgroup v2 without a delegated
subtree) the tool's own count and total hold, less exactly.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import time
from dataclasses import dataclass
from pathlib import Path

PIDS = Path("/sys/fs/cgroup/pids")
"""cgroup v1's ``pids`` hierarchy, where commands get ``teamrt/PID-N`` cgroups."""
CGROUP_ROOT = Path("/sys/fs/cgroup")
MiB = 1 << 20
_serial = itertools.count(1)


@dataclass(frozen=True)
class Cgroups:
    """The cgroups a command runs in: one per v1 hierarchy, or one v2 cgroup holding both limits."""

    pids: Path | None
    memory: Path | None
    max_memory_mb: int | None
    """The memory limit the ``memory`` cgroup holds, in MiB (None: no memory cgroup)."""
    v2: bool = False

    @property
    def paths(self) -> list[Path]:
        return list(dict.fromkeys(p for p in (self.pids, self.memory) if p is not None))


def make(max_processes: int, max_memory_mb: int | None = None) -> Cgroups | None:
    """Fresh cgroups allowing ``max_processes`` processes and, when given, ``max_memory_mb`` MiB of memory
    for all of them; None where none can be made. Where only one limit can be held, only that one is."""
    _sweep_dead_owners()
    name = f"{os.getpid()}-{next(_serial)}"
    pids = _v1(PIDS / "teamrt" / name, {"pids.max": str(max_processes)})
    memory = None
    if max_memory_mb is not None:
        limit = str(max_memory_mb * MiB)
        # memory and swap together, where the kernel counts swap: after the limit, which it wants no higher
        swap = {"memory.memsw.limit_in_bytes": limit}
        memory = _v1(_own("memory") / "teamrt" / name, {"memory.limit_in_bytes": limit}, swap)
    if (pids is None or (memory is None and max_memory_mb is not None)) and (
        both := _v2(name, max_processes, max_memory_mb)
    ):
        for made in (pids, memory):
            if made is not None:
                _rmdir(made)
        return Cgroups(both, both if max_memory_mb is not None else None, max_memory_mb, v2=True)
    if pids is None and memory is None:
        return None
    return Cgroups(pids, memory, max_memory_mb if memory is not None else None)


@functools.cache
def _sweep_dead_owners() -> None:
    """Remove the empty command cgroups of teamrt processes that are gone (once per process): an owner
    killed mid-command (SIGKILL, a crash) never removed its own. A cgroup that holds processes stays."""
    places = [(PIDS / "teamrt", ""), (_own("memory") / "teamrt", "")]
    if (own := _unified()) is not None:
        places.append((own, "teamrt-"))
    for place, prefix in places:
        try:
            names = [entry.name for entry in os.scandir(place) if entry.name.startswith(prefix)]
        except OSError:
            continue
        for name in names:
            owner = name.removeprefix(prefix).split("-", 1)[0]
            if owner.isdigit() and not _running(int(owner)):
                _rmdir(place / name)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's
    return True


def _v1(path: Path, settings: dict[str, str], where_there: dict[str, str] | None = None) -> Path | None:
    """A v1 cgroup at ``path`` with ``settings`` written, then those of ``where_there`` whose files exist."""
    if not path.parent.parent.is_dir():  # the hierarchy (or teamrt's place in it) is not mounted
        return None
    try:
        path.mkdir(parents=True)
    except OSError:
        return None
    try:
        for name, value in settings.items():
            (path / name).write_text(value)
        for name, value in (where_there or {}).items():
            with contextlib.suppress(FileNotFoundError):
                (path / name).write_text(value)
    except OSError:
        _rmdir(path)
        return None
    return path


def _own(controller: str) -> Path:
    """Where this process's v1 cgroup of ``controller`` is (``/sys/fs/cgroup/memory/...``), so that a
    command's cgroup lies beneath it and within whatever limits it has."""
    for line in _self_cgroups():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return CGROUP_ROOT / controller / path.lstrip("/")
    return CGROUP_ROOT / controller


def _self_cgroups() -> list[str]:
    try:
        return Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return []


def _unified() -> Path | None:
    """This process's cgroup v2 directory, or None where there is no unified hierarchy."""
    path = next((line[3:] for line in _self_cgroups() if line.startswith("0::")), None)
    if path is None:
        return None
    for top in (CGROUP_ROOT / "unified", CGROUP_ROOT):
        if (top / "cgroup.controllers").is_file():
            return top / path.lstrip("/")
    return None


def _v2(name: str, max_processes: int, max_memory_mb: int | None) -> Path | None:
    """A v2 cgroup beneath teamrt's own with both limits, where the hierarchy lets teamrt enable them."""
    own = _unified()
    if own is None:
        return None
    wanted = {"pids", *(("memory",) if max_memory_mb is not None else ())}
    try:
        enabled = set((own / "cgroup.subtree_control").read_text().split())
        if not wanted <= enabled:
            available = set((own / "cgroup.controllers").read_text().split())
            if not wanted <= available:
                return None
            (own / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in sorted(wanted - enabled)))
    except OSError:
        return None  # not ours to change, or teamrt's own cgroup holds processes (v2 allows no both)
    path = own / f"teamrt-{name}"
    try:
        path.mkdir()
    except OSError:
        return None
    try:
        (path / "pids.max").write_text(str(max_processes))
        if max_memory_mb is not None:
            (path / "memory.max").write_text(str(max_memory_mb * MiB))
            with contextlib.suppress(FileNotFoundError):
                (path / "memory.swap.max").write_text("0")
    except OSError:
        _rmdir(path)
        return None
    return path


def enter(argv: list[str], cgroups: Cgroups) -> list[str]:
    """``argv`` started inside ``cgroups``: a shell moves itself in, then becomes ``argv``."""
    moves = " && ".join(f'echo $$ > "${i + 1}/cgroup.procs"' for i in range(len(cgroups.paths)))
    return ["/bin/sh", "-c", f'{moves} && shift {len(cgroups.paths)} && exec "$@"', "sh",
            *map(str, cgroups.paths), *argv]  # fmt: skip


def refused(cgroups: Cgroups) -> bool:
    """Whether the kernel has refused a fork in ``cgroups`` for being over its ``pids.max``."""
    if cgroups.pids is None:
        return False
    return _counted(cgroups.pids / "pids.events", "max") > 0


def out_of_memory(cgroups: Cgroups) -> bool:
    """Whether the kernel has killed a process of ``cgroups`` for the memory limit, or refused it memory."""
    if cgroups.memory is None:
        return False
    if cgroups.v2:
        events = cgroups.memory / "memory.events"
        return _counted(events, "oom_kill") > 0 or _counted(events, "oom") > 0
    return _counted(cgroups.memory / "memory.oom_control", "oom_kill") > 0


def _counted(path: Path, key: str) -> int:
    """The number after ``key`` in a cgroup file of ``key value`` lines (0 when missing)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return 0
    for line in lines:
        parts = line.split()
        if len(parts) == 2 and parts[0] == key and parts[1].isdigit():
            return int(parts[1])
    return 0


def remove(cgroups: Cgroups, within: float = 5.0) -> None:
    """Remove ``cgroups`` once their last process is gone (a killed one may linger a moment)."""
    deadline = time.monotonic() + within
    for path in cgroups.paths:
        _rmdir(path, deadline)


def _rmdir(path: Path, deadline: float = 0.0) -> None:
    while True:
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                return  # left behind, empty soon; the kernel keeps no process in it for long
            time.sleep(0.01)


# -- the total without a memory cgroup ---------------------------------------------------------


def used_mb(pids: set[int], places: list[str]) -> float:
    """The memory of processes ``pids`` (their proportional set sizes, so a page two of them share counts
    once, and shared memory they map counts), plus what the in-memory file systems ``places`` hold
    (paths seen from outside, through ``/proc/PID/root``), in MiB."""
    total = 0
    for pid in pids:
        total += _pss_kib(pid) * 1024
    for place in places:
        with contextlib.suppress(OSError):
            st = os.statvfs(place)
            total += (st.f_blocks - st.f_bfree) * st.f_frsize
    return total / MiB


def _pss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0
