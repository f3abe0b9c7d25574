"""Issue 32's attacks on the sandbox itself, made as an injected agent would make them
(``tests/helpers/hostile.py``): the kernel keyring teamrt shares with its commands, the system calls Docker's
default profile refuses, the in-memory places (``/tmp``, ``/dev/shm``) and the memory of a command as a whole.

Each refused call is compared with the same call in bubblewrap without the filter (the sandbox before the
filter): where this kernel refuses it there too, the case cannot tell the filter's work and is skipped.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import json
import os
import platform
import shlex
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from teamrt.claudecode.hooks import Hook, run_hook
from teamrt.sandbox import limits as pidlimit
from teamrt.sandbox import seccomp
from teamrt.sandbox.bwrap import default_sandbox
from teamrt.sandbox.confinement import Confinement
from teamrt.sandbox.policy import SandboxPolicy
from tests.helpers.hostile import SECRET, Call, Scene
from tests.helpers.machine import needs_bwrap

pytestmark = pytest.mark.hostile

PYTHON = os.path.realpath(sys.executable)
PYTHON_HOME = os.path.realpath(sys.base_prefix)
SMALL = SandboxPolicy(max_memory_mb=64, read=(PYTHON_HOME,))
"""A command of at most 64 MiB: /tmp 32 MiB, /dev/shm 16 MiB."""
MEMORY_NOTE = (
    "[killed: the command used more than 64 MiB of memory (max_memory_mb: all its processes together"
)


def bash(command: str) -> Call:
    return ("Bash", {"command": command})


def write(path: Path, content: str) -> Call:
    return ("Write", {"file_path": str(path), "content": content})


# == The kernel keyring ================================================================================

KEYCTL_GET_KEYRING_ID, KEYCTL_JOIN_SESSION_KEYRING, KEYCTL_DESCRIBE = 0, 1, 6
KEYCTL_SEARCH, KEYCTL_READ, KEYCTL_INVALIDATE = 10, 11, 21
SESSION, USER, USER_SESSION = -3, -4, -5
"""The special keyring ids: this process's session keyring, the user's keyring, the user's session one."""
LIBC = ctypes.CDLL(None, use_errno=True)


def _keys(name: str, *args: Any) -> int:
    """The system call ``name`` (``keyctl``, ``add_key``) in this process: its result, or -errno."""
    nr = seccomp.number(name)
    assert nr is not None, name
    converted = [ctypes.c_char_p(a) if isinstance(a, bytes) else ctypes.c_long(a) for a in args]
    result = int(LIBC.syscall(ctypes.c_long(nr), *converted))
    return result if result >= 0 else -ctypes.get_errno()


def _found(keyring: int, description: str) -> int:
    """The serial of the ``user`` key ``description`` reachable from ``keyring``, or -errno."""
    return _keys("keyctl", KEYCTL_SEARCH, keyring, b"user", description.encode(), 0)


@pytest.fixture
def session_secret() -> Iterator[tuple[int, str]]:
    """A secret key in teamrt's (this process's) session keyring, which commands inherit: (serial, name).
    The process first joins a session keyring of its own, so that nothing else of the machine's is in it."""
    if _keys("keyctl", KEYCTL_JOIN_SESSION_KEYRING, 0) < 0:
        pytest.skip("this kernel has no keyrings for this process (keyctl refused)")
    name = f"teamrt-test-{uuid.uuid4().hex[:8]}"
    serial = _keys("add_key", b"user", name.encode(), SECRET.encode(), len(SECRET), SESSION)
    assert serial > 0, os.strerror(-serial)
    yield serial, name
    _keys("keyctl", KEYCTL_INVALIDATE, serial)


KEY_PROBE = """\
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
nr, *args = sys.argv[1:]
args = [ctypes.c_char_p(a[1:].encode()) if a.startswith("=") else ctypes.c_long(int(a)) for a in args]
buffer = ctypes.create_string_buffer(256)
if args and args[-1].value == -99:  # the place for a buffer
    args[-1:] = [buffer, ctypes.c_long(256)]
result = libc.syscall(ctypes.c_long(int(nr)), *args)
print("result", result, ctypes.get_errno(), buffer.value.decode("utf-8", "replace"))
"""
"""A program an agent writes: a system call with its arguments (``=text`` a string, -99 a buffer)."""


def _key_attack(attack: str, serial: int, name: str, planted: str) -> list[Any]:
    """The call ``attack`` makes, as ``KEY_PROBE``'s arguments: the call's number first."""
    keyctl, add_key, request_key = (seccomp.number(n) for n in ("keyctl", "add_key", "request_key"))
    attacks: dict[str, list[Any]] = {
        "read the secret by its serial": [keyctl, KEYCTL_READ, serial, -99],
        "describe it": [keyctl, KEYCTL_DESCRIBE, serial, -99],
        "search the session keyring": [keyctl, KEYCTL_SEARCH, SESSION, "=user", f"={name}", 0],
        "find the session keyring": [keyctl, KEYCTL_GET_KEYRING_ID, SESSION, 0],
        "plant a key in the user keyring": [add_key, "=user", f"={planted}", "=x", 1, USER],
        "plant one in the user session keyring": [add_key, "=user", f"={planted}", "=x", 1, USER_SESSION],
        "plant one in the session keyring": [add_key, "=user", f"={planted}", "=x", 1, SESSION],
        "ask the kernel for it": [request_key, "=user", f"={name}", 0, SESSION],
    }
    return attacks[attack]


ATTACKS = [
    "read the secret by its serial", "describe it", "search the session keyring", "find the session keyring",
    "plant a key in the user keyring", "plant one in the user session keyring",
    "plant one in the session keyring", "ask the kernel for it",
]  # fmt: skip


@needs_bwrap
@pytest.mark.parametrize("attack", ATTACKS)
def test_a_command_cannot_read_teamrts_keyring_nor_plant_a_key_in_roots(
    scene: Scene, session_secret: tuple[int, str], attack: str
) -> None:
    serial, name = session_secret
    planted = f"teamrt-planted-{uuid.uuid4().hex[:8]}"
    argv = [str(a) for a in _key_attack(attack, serial, name, planted)]
    probe = scene.project / "keys.py"
    said = scene.attack(
        write(probe, KEY_PROBE), bash(f"{PYTHON} keys.py {shlex.join(argv)}; cat /proc/keys"), sandbox=SMALL
    )
    try:
        out = said[1].content
        assert SECRET not in out and name not in out, out
        assert out.startswith(f"result -1 {errno.EPERM} \n"), out
        assert _found(USER, planted) == -errno.ENOKEY and _found(SESSION, planted) == -errno.ENOKEY
        assert _found(SESSION, name) == serial, "teamrt's own key is where it was"
    finally:
        for keyring in (USER, USER_SESSION, SESSION):
            if (found := _found(keyring, planted)) > 0:
                _keys("keyctl", KEYCTL_INVALIDATE, found)
    scene.untouched()


# == System calls ========================================================================================

SYSCALL_PROBE = """\
import ctypes, errno, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def arg(a):
    if a is None:
        return ctypes.c_void_p(None)
    if a == "@null":
        return ctypes.c_long(os.open("/dev/null", os.O_RDONLY))
    if a == "@pid":
        return ctypes.c_long(os.getpid())
    if a == "@badtimeval":  # 2 000 000 microseconds: the kernel refuses it before asking for a capability
        return ctypes.byref((ctypes.c_long * 2)(0, 2_000_000))
    if isinstance(a, str):
        return ctypes.c_char_p(a.encode())
    return ctypes.c_ulong(a) if a >= 1 << 63 else ctypes.c_long(a)
for label, nr, args in json.loads(sys.argv[1]):
    result = libc.syscall(ctypes.c_long(nr), *map(arg, args))
    code = ctypes.get_errno()
    print(label, "ok" if result != -1 else errno.errorcode.get(code, str(code)), flush=True)
"""
"""Makes each system call it is given and prints ``label ok`` or ``label EPERM`` (the errno's name)."""

NOWHERE = "/nonexistent-teamrt"
CLONE_THREAD = 0x10000
"""Without ``CLONE_SIGHAND`` the kernel refuses it (EINVAL): a ``clone`` that never forks the probe."""
# (label, call, arguments, the filter's errno): arguments the kernel answers without a capability check,
# so that the call, unfiltered, fails otherwise (or succeeds, harmlessly)
CALLS: list[tuple[str, str, list[Any], str]] = [
    ("keyctl", "keyctl", [KEYCTL_GET_KEYRING_ID, SESSION, 0], "EPERM"),
    ("add_key", "add_key", [None, None, None, 0, USER], "EPERM"),
    ("request_key", "request_key", [None, None, None, 0], "EPERM"),
    ("bpf", "bpf", [9999, None, 0], "EPERM"),
    ("userfaultfd", "userfaultfd", [1], "EPERM"),  # UFFD_USER_MODE_ONLY: allowed without a capability
    ("perf_event_open", "perf_event_open", [None, 0, -1, -1, 0], "EPERM"),
    ("io_uring_setup", "io_uring_setup", [0, None], "EPERM"),
    ("io_uring_enter", "io_uring_enter", [-1, 0, 0, 0, None, 0], "EPERM"),
    ("io_uring_register", "io_uring_register", [-1, 0, None, 0], "EPERM"),
    ("mount", "mount", ["none", NOWHERE, "tmpfs", 0, None], "EPERM"),
    ("umount2", "umount2", [NOWHERE, 0], "EPERM"),
    ("open_tree", "open_tree", [-100, NOWHERE, 0], "EPERM"),
    ("mount_setattr", "mount_setattr", [-1, "", 0, None, 0], "EPERM"),
    ("chroot", "chroot", [NOWHERE], "EPERM"),
    ("setns", "setns", [-1, 0], "EPERM"),
    ("name_to_handle_at", "name_to_handle_at", [-100, NOWHERE, None, None, 0], "EPERM"),
    ("open_by_handle_at", "open_by_handle_at", [-1, None, 0], "EPERM"),
    ("settimeofday", "settimeofday", ["@badtimeval", None], "EPERM"),
    ("clock_settime", "clock_settime", [9999, None], "EPERM"),
    ("clock_adjtime", "clock_adjtime", [9999, None], "EPERM"),
    ("adjtimex", "adjtimex", [None], "EPERM"),
    ("iopl", "iopl", [9], "EPERM"),
    ("ioperm", "ioperm", [0xFFFF0, 0x100, 0], "EPERM"),
    ("quotactl", "quotactl", [0xFF, None, 0, None], "EPERM"),
    ("lookup_dcookie", "lookup_dcookie", [0, None, 0], "EPERM"),
    ("process_vm_readv", "process_vm_readv", ["@pid", None, 0, None, 0, 0], "EPERM"),
    ("process_vm_writev", "process_vm_writev", ["@pid", None, 0, None, 0, 0], "EPERM"),
    ("kcmp", "kcmp", ["@pid", "@pid", 0, 0, 0], "EPERM"),
    ("move_pages", "move_pages", [0, 0, None, None, None, 0], "EPERM"),
    ("mbind", "mbind", [0, 0, 0, None, 0, 0], "EPERM"),
    ("set_mempolicy", "set_mempolicy", [0, None, 0], "EPERM"),
    ("migrate_pages", "migrate_pages", [0, 0, None, None], "EPERM"),
    ("set_mempolicy_home_node", "set_mempolicy_home_node", [0, 0, 0, 0], "EPERM"),
    ("fanotify_init", "fanotify_init", [0x200, 0], "EPERM"),  # FAN_REPORT_FID: allowed without one
    ("sysfs", "sysfs", [1, None], "EPERM"),
    ("ustat", "ustat", [0, None], "EPERM"),
    ("uselib", "uselib", [None], "EPERM"),
    ("nfsservctl", "nfsservctl", [], "EPERM"),
    ("personality ADDR_NO_RANDOMIZE", "personality", [0x0040000], "EPERM"),
    ("personality READ_IMPLIES_EXEC", "personality", [0x0400000], "EPERM"),
    ("personality high bits", "personality", [1 << 32], "EPERM"),
    ("ioctl TIOCSTI", "ioctl", ["@null", seccomp.TIOCSTI, None], "EPERM"),
    ("ioctl TIOCSTI in high bits", "ioctl", ["@null", (1 << 32) | seccomp.TIOCSTI, None], "EPERM"),
    ("ioctl TIOCLINUX", "ioctl", ["@null", seccomp.TIOCLINUX, None], "EPERM"),
    *[
        (f"clone {flag}", "clone", [value | CLONE_THREAD, 0, None, None, 0], "EPERM")
        for flag, value in seccomp.NAMESPACES.items()
    ],
    ("clone3", "clone3", [None, 0], "ENOSYS"),
    ("unshare", "unshare", [0x10000000], "EPERM"),  # CLONE_NEWUSER; last: unfiltered, it succeeds
]
ALLOWED: list[tuple[str, str, list[Any]]] = [
    ("personality query", "personality", [0xFFFFFFFF]),
    ("personality PER_LINUX", "personality", [0]),
    ("ioctl FIONREAD", "ioctl", ["@null", 0x541B, None]),  # ENOTTY: an ordinary ioctl reaches the file
    ("clone plain", "clone", [CLONE_THREAD, 0, None, None, 0]),  # EINVAL: the kernel, not the filter
    ("getpid", "getpid", []),
]


def _probe_list() -> list[tuple[str, int, list[Any]]]:
    wanted = [(label, name, args) for label, name, args, _ in CALLS] + ALLOWED
    return [(label, nr, args) for label, name, args in wanted if (nr := seccomp.number(name)) is not None]


def _parse(text: str) -> dict[str, str]:
    return dict(line.rsplit(" ", 1) for line in text.splitlines() if " " in line and not line.startswith("["))


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], dict[str, str]]:
    """Each call's outcome in an agent's command, and in bubblewrap without the filter (the control)."""
    bwrap = default_sandbox().bwrap
    if bwrap is None:
        if os.environ.get("CI"):
            pytest.fail("bubblewrap (bwrap) is missing: CI must test the sandbox's filter")
        pytest.skip("bubblewrap (bwrap) is not installed here")
    calls = json.dumps(_probe_list())
    with pytest.MonkeyPatch.context() as patch:
        scene = Scene(tmp_path_factory.mktemp("probe"), patch)
        probe = scene.project / "probe.py"
        said = scene.attack(
            write(probe, SYSCALL_PROBE), bash(f"{PYTHON} probe.py {shlex.quote(calls)}"), sandbox=SMALL
        )
        control = subprocess.run(
            [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid",
             "--unshare-ipc", "--die-with-parent", "--cap-drop", "ALL", "--", PYTHON, str(probe), calls],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
    return _parse(said[1].content), _parse(control.stdout)


@needs_bwrap
@pytest.mark.parametrize(("label", "expected"), [(c[0], c[3]) for c in CALLS], ids=[c[0] for c in CALLS])
def test_a_refused_system_call_fails_in_a_command(
    probed: tuple[dict[str, str], dict[str, str]], label: str, expected: str
) -> None:
    sandboxed, control = probed
    if label not in control:
        pytest.skip(f"{label} is no call of this architecture ({platform.machine()})")
    if control[label] == expected:
        pytest.skip(f"this kernel refuses {label} with {expected} without the filter too")
    assert sandboxed[label] == expected, (
        f"{label}: {sandboxed.get(label)} (without the filter: {control[label]})"
    )


@needs_bwrap
@pytest.mark.parametrize("label", [a[0] for a in ALLOWED])
def test_what_docker_allows_is_not_refused(probed: tuple[dict[str, str], dict[str, str]], label: str) -> None:
    sandboxed, control = probed
    assert sandboxed[label] == control[label], "the same as without the filter"


X86_CALLS = {
    "x32": "libc.syscall(0x40000000 | 39)",  # x32's getpid: a number the native filter never checks
    "i386": (
        "code = bytes([0xB8, 20, 0, 0, 0, 0xCD, 0x80, 0xC3])  # mov eax, 20 (i386 getpid); int 0x80; ret\n"
        "buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\n"
        "buf.write(code)\n"
        "ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(buf)))()"
    ),
}


@needs_bwrap
@pytest.mark.skipif(platform.machine() != "x86_64", reason="the other ABIs of x86_64")
@pytest.mark.parametrize("abi", X86_CALLS)
def test_a_call_through_another_abi_kills_the_command(scene: Scene, abi: str) -> None:
    program = f"import ctypes, mmap\nlibc = ctypes.CDLL(None)\n{X86_CALLS[abi]}\nprint('survived')\n"
    said = scene.attack(
        write(scene.project / "abi.py", program),
        bash(f"{PYTHON} abi.py"),
        bash("echo still here"),
        sandbox=SMALL,
    )
    assert said[1].is_error and "survived" not in said[1].content
    assert said[1].content.endswith(
        ": a system call through an ABI the sandbox refuses (i386's int 0x80 or x32 on x86_64)]"
    ), said[1].content
    assert said[2].content == "still here\n"


@needs_bwrap
def test_ordinary_programs_still_work_under_the_filter(scene: Scene) -> None:
    threads = (
        "import subprocess, threading, os; t = threading.Thread(target=print, args=('thread',)); t.start();"
        " t.join(); print(subprocess.run(['sh', '-c', 'echo child'], capture_output=True, text=True).stdout,"
        " end=''); r, w = os.pipe(); pid = os.fork()\nif pid == 0: os._exit(7)\n"
        "print('forked', os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))"
    )
    said = scene.attack(
        bash("grep Seccomp: /proc/self/status"),
        bash(f"{PYTHON} -c {shlex.quote(threads)}"),
        bash("git status --short && git log --oneline | wc -l && echo a | sh -c 'read x; echo $x' | cat"),
        ("Grep", {"pattern": "hello", "output_mode": "content"}),
        bash("echo hi > /tmp/x && cat /tmp/x && echo shm > /dev/shm/y && cat /dev/shm/y && echo > /dev/null"),
        sandbox=SMALL,
    )
    assert said[0].content == "Seccomp:\t2\n", "the filter is on"
    assert said[1].content == "thread\nchild\nforked 7\n"
    assert not said[2].is_error and said[2].content.endswith("1\na\n"), said[2].content
    assert "print('hello')" in said[3].content, "ripgrep runs under the filter too"
    assert said[4].content == "hi\nshm\n"


@needs_bwrap
def test_a_hook_runs_under_the_filter_too(tmp_path: Path) -> None:
    ctx = Confinement(tmp_path, tmp_path / ".teamrt" / "runs" / "r1")
    hook = Hook(
        "PreToolUse", "", "grep Seccomp: /proc/self/status; unshare -U true", 10.0, "project", tmp_path
    )
    ran = asyncio.run(run_hook(hook, {}, ctx))
    assert ran.stdout == "Seccomp:\t2\n" and "Operation not permitted" in ran.stderr


# == The in-memory places ================================================================================

FILLS = {
    "/tmp": "head -c 100M /dev/zero > /tmp/fill",
    "/dev/shm": "head -c 100M /dev/zero > /dev/shm/fill",
    "/dev/shm by python": (
        f"{PYTHON} -c \"f = open('/dev/shm/fill', 'wb'); [f.write(bytes(1 << 20)) for _ in range(100)]\""
    ),
    "the hidden home": "head -c 100M /dev/zero > ~/fill",
    "/run": "head -c 100M /dev/zero > /run/fill",
}


@needs_bwrap
@pytest.mark.parametrize("place", FILLS)
def test_an_in_memory_place_is_full_at_its_size(scene: Scene, place: str) -> None:
    said = scene.attack(bash(FILLS[place]), bash("df -m /tmp /dev/shm | tail -2"), sandbox=SMALL)
    full = said[0]
    assert full.is_error and "No space left on device" in full.content, full.content
    assert full.content.endswith(
        "; no space left: /tmp holds at most 32 MiB and /dev/shm 16 MiB, in memory (from max_memory_mb,"
        " 64 MiB); write large files in the workspace]"
    )
    sizes = [line.split()[1] for line in said[1].content.splitlines()]
    assert sizes == ["32", "16"], said[1].content


@needs_bwrap
def test_shared_memory_past_dev_shm_ends_the_command_clearly(scene: Scene) -> None:
    program = (
        "import mmap, os\nfd = os.open('/dev/shm/seg', os.O_RDWR | os.O_CREAT)\nos.ftruncate(fd, 100 << 20)\n"
        "m = mmap.mmap(fd, 100 << 20)\nfor i in range(0, 100 << 20, 4096):\n    m[i] = 1\n"
        "print('all of it')\n"
    )
    said = scene.attack(write(scene.project / "shm.py", program), bash(f"{PYTHON} shm.py"), sandbox=SMALL)
    assert said[1].is_error and "all of it" not in said[1].content
    assert said[1].content.endswith(
        ": a file mapped in memory was bigger than the room left for it (/dev/shm holds at most 16 MiB"
        " and /tmp 32 MiB)]"
    ), said[1].content


@needs_bwrap
@pytest.mark.parametrize(
    "command", ["echo x > /dev/planted", "mkdir /dev/planted", "ln -s /tmp /dev/planted"]
)
def test_the_rest_of_dev_is_read_only(scene: Scene, command: str) -> None:
    [said] = scene.attack(bash(command), sandbox=SMALL)
    assert said.is_error and "Read-only file system" in said.content


# == Memory for the command as a whole ===================================================================


def _memory_cgroups_here() -> bool:
    made = pidlimit.make(8, 64)
    if made is None:
        return False
    pidlimit.remove(made)
    return made.memory is not None


@pytest.fixture(
    params=[
        pytest.param("cgroup", marks=pytest.mark.skipif(
            not _memory_cgroups_here(), reason="no writable memory cgroup here (not root, or no delegated v2)"
        )),
        "total",
    ]
)  # fmt: skip
def memory_by(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Who holds a command's memory: its cgroup, or (made unavailable) the tool's own total."""
    if request.param == "total":
        real: Callable[..., pidlimit.Cgroups | None] = pidlimit.make
        monkeypatch.setattr(pidlimit, "make", lambda n, mb=None: real(n))
    return str(request.param)


HOLD = "import time; held = b'x' * ({mb} << 20); print('held', flush=True); time.sleep({seconds})"
HOGS = {
    "eight processes each under the per-process limit": (
        f'for i in $(seq 8); do {PYTHON} -c "{HOLD.format(mb=12, seconds=20)}" & done; wait; echo all done'
    ),
    "MAP_SHARED memory in one process": (
        f'{PYTHON} -c "import mmap, time; m = mmap.mmap(-1, 100 << 20, flags=mmap.MAP_SHARED);'
        " [m.write(b'x' * (1 << 20)) for _ in range(100)]; time.sleep(20); print('all done')\""
    ),
    "shared memory between forked processes": (
        f'{PYTHON} -c "import mmap, os, time; m = mmap.mmap(-1, 40 << 20, flags=mmap.MAP_SHARED);'
        " [m.write(b'x' * (1 << 20)) for _ in range(40)];"
        " [os.fork() or (b'y' * (20 << 20), time.sleep(20), os._exit(0)) for _ in range(3)];"
        " time.sleep(20); print('all done')\""
    ),
    "files in /tmp and /dev/shm with a process": (
        "head -c 30M /dev/zero > /tmp/a; head -c 15M /dev/zero > /dev/shm/b;"
        f' {PYTHON} -c "{HOLD.format(mb=30, seconds=20)}"; echo all done'
    ),
}


@needs_bwrap
@pytest.mark.parametrize("hog", HOGS)
def test_a_commands_memory_is_limited_as_a_whole(scene: Scene, memory_by: str, hog: str) -> None:
    before = set(_left_cgroups())  # a cgroup an earlier test of this worker left is not this test's
    said = scene.attack(bash(HOGS[hog]), bash("echo still here"), sandbox=SMALL)
    assert said[0].is_error
    assert MEMORY_NOTE in said[0].content, said[0].content
    assert said[1].content == "still here\n"
    assert set(_left_cgroups()) - before == set()


@needs_bwrap
def test_a_command_within_its_memory_runs(scene: Scene, memory_by: str) -> None:
    fits = f'for i in 1 2; do {PYTHON} -c "{HOLD.format(mb=5, seconds=1)}" & done; wait; echo fine'
    [said] = scene.attack(bash(fits), sandbox=SMALL)
    assert said.content == "held\nheld\nfine\n", said.content


def _left_cgroups() -> list[Path]:
    """This process's command cgroups still there (each is removed when its command ends)."""
    mine = f"{os.getpid()}-"
    places = [pidlimit.PIDS / "teamrt", pidlimit._own("memory") / "teamrt"]
    return [p for place in places if place.is_dir() for p in place.iterdir() if p.name.startswith(mine)]


def test_the_filter_refuses_every_personality_docker_refuses() -> None:
    cover = seccomp.personality_cover()
    refused: Callable[[int], bool] = lambda v: any(v & mask == value for mask, value in cover)  # noqa: E731
    assert not any(refused(v) for v in seccomp.PERSONALITIES)
    samples = [*range(0x30000), *(1 << b for b in range(32)), 0xFFFFFFFE, 0x7FFFFFFF, 0x0040008]
    assert all(refused(v) for v in samples if v not in seccomp.PERSONALITIES)


def test_without_libseccomp_commands_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    import teamrt.sandbox.bwrap as sandbox

    monkeypatch.setattr(seccomp, "available", lambda: "libseccomp is not installed (the libseccomp2 package)")
    monkeypatch.setattr(shutil, "which", lambda *a, **k: "/usr/bin/bwrap")
    sandbox.default_sandbox.cache_clear()
    try:
        made = sandbox.default_sandbox()
        assert not made.confined and made.bwrap is None
        refusal = made.refusal(SandboxPolicy())
        assert refusal is not None and refusal.startswith("no seccomp filter can be made for commands")
        assert made.refusal(replace(SandboxPolicy(), unconfined=True)) is None
    finally:
        sandbox.default_sandbox.cache_clear()


def test_in_memory_places_together_stay_within_the_commands_memory() -> None:
    from teamrt.sandbox.bwrap import SHM, TMP, sizes

    room = sizes(SandboxPolicy(max_memory_mb=64), [TMP, "/root", "/home", "/run"])
    share = (16 << 20) // 3
    assert room == {TMP: 32 << 20, SHM: 16 << 20, "/root": share, "/home": share, "/run": share}
    assert sum(room.values()) <= 64 << 20


def test_where_cgroup_v2_is_delegated_one_cgroup_holds_both_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A unified hierarchy only (no v1 ``pids`` or ``memory``), teamrt's cgroup ``/svc`` able to enable both
    controllers for its children: the command's cgroup is made there with ``pids.max`` and ``memory.max``."""
    own = tmp_path / "svc"
    own.mkdir()
    (tmp_path / "cgroup.controllers").write_text("cpu memory pids\n")
    (own / "cgroup.controllers").write_text("cpu memory pids\n")
    (own / "cgroup.subtree_control").write_text("cpu\n")
    monkeypatch.setattr(pidlimit, "CGROUP_ROOT", tmp_path)
    monkeypatch.setattr(pidlimit, "PIDS", tmp_path / "no-v1-pids")
    monkeypatch.setattr(pidlimit, "_self_cgroups", lambda: ["0::/svc"])
    made = pidlimit.make(8, 64)
    assert made is not None and made.v2 and made.pids == made.memory and made.paths == [made.pids]
    path = made.paths[0]
    assert path.parent == own
    assert (own / "cgroup.subtree_control").read_text() == "+memory +pids"
    assert (path / "pids.max").read_text() == "8" and (path / "memory.max").read_text() == str(64 << 20)
    assert not pidlimit.out_of_memory(made)
    (path / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert pidlimit.out_of_memory(made)
    for name in ("pids.max", "memory.max", "memory.swap.max", "memory.events"):
        (path / name).unlink(missing_ok=True)
    pidlimit.remove(made)
    assert not path.exists()


def test_where_cgroup_v2_is_not_delegated_no_cgroup_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """teamrt's own cgroup lacks the controllers (a user's session): the tool's count and total hold."""
    (tmp_path / "cgroup.controllers").write_text("cpu memory pids\n")
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "cgroup.controllers").write_text("cpu\n")
    (tmp_path / "user" / "cgroup.subtree_control").write_text("")
    monkeypatch.setattr(pidlimit, "CGROUP_ROOT", tmp_path)
    monkeypatch.setattr(pidlimit, "PIDS", tmp_path / "no-v1-pids")
    monkeypatch.setattr(pidlimit, "_self_cgroups", lambda: ["0::/user"])
    assert pidlimit.make(8, 64) is None
    assert [p.name for p in (tmp_path / "user").iterdir()] == ["cgroup.controllers", "cgroup.subtree_control"]


@pytest.mark.skipif(platform.machine() not in ("x86_64", "aarch64"), reason="the numbers are checked there")
@pytest.mark.parametrize("name", seccomp.RECENT)
def test_a_recent_call_is_refused_by_its_number_where_libseccomp_is_too_old(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    known = seccomp.number(name)
    assert known == seccomp.RECENT[name], "libseccomp here numbers it as the table does"
    lib = seccomp._library()
    monkeypatch.setattr(seccomp, "_library", lambda: type("Old", (), {
        "seccomp_syscall_resolve_name": staticmethod(lambda n: -1 if n == name.encode() else
                                                     lib.seccomp_syscall_resolve_name(n)),
    })())  # fmt: skip
    assert seccomp.number(name) == known
    assert seccomp.number("no_such_call") is None
