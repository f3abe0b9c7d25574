"""What a run allows its agents' programs: network, environment, limits, and whether bash may run unconfined.

Set by the team file's ``[sandbox]`` section (and ``teamrt run --unconfined``);
the defaults are the safe ones.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SandboxPolicy:
    network: bool = False
    """Whether sandboxed commands reach the network (else they get a network namespace of their own)."""
    unconfined: bool = False
    """Whether bash may run without bubblewrap (the run opted in); else, without bwrap, bash is refused."""
    env: tuple[str, ...] = ()
    """Names of variables passed to commands beyond the allowlist (PATH, HOME, LANG, LC_*, TERM, TZ, USER,
    LOGNAME); teamrt's own credentials (``ANTHROPIC_*``, ``TEAMRT_DB``) never are."""
    read: tuple[str, ...] = ()
    """Paths inside hidden home directories that commands may read (``~/.pyenv``), shown read-only."""
    max_processes: int = 256
    """Processes one command may have at once (bubblewrap's own two among them); over it, all are killed."""
    max_memory_mb: int = 4096
    """Memory of each process of a command (``RLIMIT_DATA``: heap and private mappings), in MiB."""
    max_file_mb: int = 1024
    """Largest file a command may write (``RLIMIT_FSIZE``), in MiB."""
