"""The system calls no command of an agent may make: a seccomp filter bubblewrap loads before the command.

Why: without a user namespace (teamrt as root, or bwrap installed setuid), a
sandboxed command shares the kernel's per-user state with teamrt. The kernel
keyrings are the sharpest case: ``keyctl`` read a secret from teamrt's session
keyring and ``add_key`` planted a key in root's user keyring. Other calls reach
kernel code that containers keep out of reach (``bpf``, ``userfaultfd``,
``io_uring``, ``perf_event_open``), inject input into a terminal (``TIOCSTI``),
or would undo the sandbox itself (``mount``, ``unshare``, ``setns``).

Which filter: Docker's default profile is the reference. Docker allows a list
and refuses the rest; this filter allows by default and refuses, with
``EPERM``, every call Docker's profile refuses to a container without extra
capabilities that a command could reach (the list ``REFUSED``), plus the
keyrings and ``io_uring`` that newer Docker also refuses, and
``process_vm_readv``/``process_vm_writev``/``kcmp``. Some calls are refused for
some arguments only, as in Docker: ``clone`` that makes a namespace,
``personality`` other than Docker's five values, and the ``TIOCSTI`` and
``TIOCLINUX`` ioctls (compared on the low 32 bits the kernel reads, so a
command cannot hide them in the high bits). ``clone3`` fails with ``ENOSYS``,
as in Docker: its flags lie in memory a filter cannot read, and the C library
falls back to ``clone`` on ``ENOSYS``. A call made through another ABI (i386's
``int 0x80`` or x32 on x86_64) kills the command: the filter checks numbers of
the native ABI only.

``ptrace`` is allowed, as Docker allows it on kernels from 4.8: a command is in
a PID namespace of its own, so it can trace only its own processes (debuggers
and ``strace`` keep working), and since 4.8 the kernel checks the filter again
after a tracer changes a call.

How: libseccomp (Debian's ``libseccomp2``, which apt itself depends on), called
through ``ctypes``: it knows each architecture's call numbers and the ABI
checks, and is what Docker, podman, systemd and flatpak use. Its Python binding
is not on PyPI (``pyseccomp``, a ctypes copy, is unmaintained since 2021), so
the few functions needed are bound here. Without libseccomp no filter can be
made, and ``teamrt.sandbox.bwrap`` refuses to run commands, as without bwrap.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import fcntl
import functools
import os
import platform
import tempfile

from teamrt.errors import TeamrtError

REFUSED = (
    # the kernel keyrings, shared with teamrt without a user namespace
    "keyctl", "add_key", "request_key",
    # kernel code containers keep out of reach
    "bpf", "userfaultfd", "perf_event_open", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "lookup_dcookie", "fanotify_init", "kcmp", "process_vm_readv", "process_vm_writev",
    # the kernel, its modules and the machine
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "create_module",
    "get_kernel_syms", "query_module", "reboot", "swapon", "swapoff", "acct", "syslog", "vhangup",
    "quotactl", "quotactl_fd", "nfsservctl", "_sysctl", "uselib", "sysfs", "ustat",
    "iopl", "ioperm", "vm86", "vm86old", "sethostname", "setdomainname",
    # the clocks
    "settimeofday", "stime", "clock_settime", "clock_adjtime", "adjtimex",
    # mounts and namespaces: what would undo the sandbox
    "mount", "umount", "umount2", "pivot_root", "chroot", "unshare", "setns", "open_tree", "move_mount",
    "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    # files by handle, around every path check
    "open_by_handle_at", "name_to_handle_at",
    # memory placement on NUMA nodes
    "mbind", "set_mempolicy", "migrate_pages", "move_pages", "set_mempolicy_home_node",
)  # fmt: skip
"""Calls that fail with ``EPERM`` whatever their arguments (those not on this architecture are skipped)."""
NOT_IMPLEMENTED = ("clone3",)
"""Calls that fail with ``ENOSYS``, so that the C library falls back to one the filter can read."""
TIOCSTI = 0x5412
"""Pushes a byte into a terminal's input, as if typed: a command could type into the person's shell."""
TIOCLINUX = 0x541C
"""The Linux console's own requests, which include pasting its selection as input."""
REFUSED_IOCTLS = (TIOCSTI, TIOCLINUX)
NAMESPACES = {
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}
"""``clone`` with any of these flags fails with ``EPERM`` (``unshare`` and ``setns`` always do)."""
PERSONALITIES = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)
"""``personality`` values Docker allows: Linux, 32-bit Linux, UNAME26, both, and the query."""
RECENT = {
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "clone3": 435,
    "mount_setattr": 442, "quotactl_fd": 443, "set_mempolicy_home_node": 450,
}  # fmt: skip
"""Calls added since Linux 5.1, whose numbers are the same on every architecture but alpha: refused by
number where libseccomp is too old to know their names (Debian 10's 2.3 knows none of them)."""
# libseccomp's constants (seccomp.h)
_UNKNOWN = -1
"""``__NR_SCMP_ERROR``: a name libseccomp does not know (one it knows but this architecture lacks is
another negative number)."""
_ALLOW = 0x7FFF0000
_KILL_PROCESS = 0x80000000
_ERRNO = 0x00050000
_ATTR_BADARCH = 2
_CMP_GT = 6
_CMP_MASKED_EQ = 7
_LOW32 = 0xFFFFFFFF


class Unavailable(TeamrtError):
    """No filter can be made here (libseccomp is missing or refused it); the message says why."""


class _ArgCmp(ctypes.Structure):
    """libseccomp's ``struct scmp_arg_cmp``: compare argument ``arg`` by ``op`` with ``a`` (and ``b``)."""

    _fields_ = (
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("a", ctypes.c_uint64),
        ("b", ctypes.c_uint64),
    )


def _errno(number: int) -> int:
    return _ERRNO | (number & 0xFFFF)


@functools.cache
def _library() -> ctypes.CDLL:
    """libseccomp, with the signatures of the functions used here."""
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError as e:
        raise Unavailable(f"libseccomp is not installed (the libseccomp2 package): {e}") from e
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = (ctypes.c_uint32,)
    lib.seccomp_release.restype = None
    lib.seccomp_release.argtypes = (ctypes.c_void_p,)
    lib.seccomp_attr_set.argtypes = (ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32)
    lib.seccomp_syscall_resolve_name.argtypes = (ctypes.c_char_p,)
    lib.seccomp_rule_add_array.argtypes = (
        ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint, ctypes.POINTER(_ArgCmp),
    )  # fmt: skip
    lib.seccomp_export_bpf.argtypes = (ctypes.c_void_p, ctypes.c_int)
    return lib


def number(name: str) -> int | None:
    """The native number of the call ``name``, or None where this architecture has no such call."""
    found = int(_library().seccomp_syscall_resolve_name(name.encode()))
    if found >= 0:
        return found
    if found == _UNKNOWN and platform.machine() in ("x86_64", "aarch64"):
        return RECENT.get(name)  # a libseccomp older than the call
    return None


class _Filter:
    """A libseccomp filter being built, allowing what no rule refuses."""

    def __init__(self) -> None:
        self.lib = _library()
        self.ctx = self.lib.seccomp_init(_ALLOW)
        if not self.ctx:
            raise Unavailable("libseccomp could not start a filter")
        self._check(self.lib.seccomp_attr_set(self.ctx, _ATTR_BADARCH, _KILL_PROCESS), "set its ABI check")

    def refuse(self, name: str, action: int, *compared: tuple[int, int, int, int]) -> None:
        """Fail ``name`` with ``action`` when every comparison (argument, op, a, b) holds."""
        nr = number(name)
        if nr is None:
            return
        cmps = (_ArgCmp * len(compared))(*(_ArgCmp(*c) for c in compared))
        self._check(self.lib.seccomp_rule_add_array(self.ctx, action, nr, len(compared), cmps), name)

    def export(self) -> bytes:
        """The filter as the BPF program the kernel loads (what bwrap's ``--seccomp`` reads)."""
        with tempfile.TemporaryFile() as out:
            self._check(self.lib.seccomp_export_bpf(self.ctx, out.fileno()), "export it")
            out.seek(0)
            return out.read()

    def release(self) -> None:
        self.lib.seccomp_release(self.ctx)

    @staticmethod
    def _check(result: int, doing: str) -> None:
        if result < 0:
            raise Unavailable(f"libseccomp could not {doing}: {os.strerror(-result)}")


@functools.cache
def program() -> bytes:
    """This architecture's filter as BPF, made once per process; raises ``Unavailable``."""
    made = _Filter()
    try:
        for name in REFUSED:
            made.refuse(name, _errno(errno.EPERM))
        for name in NOT_IMPLEMENTED:
            made.refuse(name, _errno(errno.ENOSYS))
        for request in REFUSED_IOCTLS:
            made.refuse("ioctl", _errno(errno.EPERM), (1, _CMP_MASKED_EQ, _LOW32, request))
        for flag in NAMESPACES.values():
            made.refuse("clone", _errno(errno.EPERM), (0, _CMP_MASKED_EQ, flag, flag))
        made.refuse("personality", _errno(errno.EPERM), (0, _CMP_GT, _LOW32, 0))
        for mask, value in personality_cover():
            made.refuse("personality", _errno(errno.EPERM), (0, _CMP_MASKED_EQ, mask, value))
        return made.export()
    finally:
        made.release()


def personality_cover() -> list[tuple[int, int]]:
    """(mask, value) pairs whose matches, ``arg & mask == value``, are every 32-bit ``personality`` value
    but ``PERSONALITIES``.

    libseccomp compares an argument once per rule, so "none of five values" is
    written as cubes: a value with a set bit other than bits 3 and 17 and bit 31
    clear, or with bit 31 set and some bit clear (all ones is the query). Values
    above 32 bits are refused by a rule of their own.
    """
    top = 1 << 31
    kept = {3, 17}
    cover = [((1 << bit) | top, 1 << bit) for bit in range(31) if bit not in kept]
    cover += [(top | (1 << bit), top) for bit in range(31)]
    return cover


def available() -> str | None:
    """None when the filter can be made here; else why not, in one line."""
    try:
        program()
    except Unavailable as e:
        return str(e)
    return None


@functools.cache
def _sealed() -> int:
    """A file descriptor of this process holding the filter, sealed against every change."""
    data = program()
    fd = os.memfd_create("teamrt-seccomp", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.write(fd, data)
    seals = 0x0001 | 0x0002 | 0x0004 | 0x0008  # F_SEAL_SEAL, SHRINK, GROW, WRITE
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    return fd


FD = 3
"""The descriptor bwrap reads the filter from (``--seccomp 3``)."""


def load(bwrap_argv: list[str]) -> list[str]:
    """``bwrap_argv`` (whose options must include ``options()``) started with the filter open on ``FD``.

    A shell opens it from this process's sealed copy (``/proc/PID/fd/N``), so the
    argv alone carries it, whoever starts it; bwrap reads and closes it before the
    command runs.
    """
    path = f"/proc/{os.getpid()}/fd/{_sealed()}"
    return ["/bin/sh", "-c", f'exec "$@" {FD}<"$0"', path, *bwrap_argv]


def options() -> list[str]:
    """bwrap's options that load the filter from ``FD``."""
    return ["--seccomp", str(FD)]
