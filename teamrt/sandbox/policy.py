"""What a run allows its agents' programs (network, environment, limits, running unconfined) and the web.

Set by the team file's ``[sandbox]`` and ``[web]`` sections (and ``teamrt run
--unconfined``); the defaults are the safe ones.
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
    """Memory of one command, in MiB: all its processes together, their shared memory and what they keep in
    its in-memory places (``/tmp`` holds at most half of it, ``/dev/shm`` a quarter). Held by the command's
    cgroup where teamrt may make one, else by the tool's own total (``teamrt.sandbox.limits``); each
    process is also held to it by ``RLIMIT_DATA`` (heap and private mappings)."""
    max_file_mb: int = 1024
    """Largest file a command may write (``RLIMIT_FSIZE``), in MiB."""


@dataclass(frozen=True)
class WebPolicy:
    """What WebFetch may reach and what WebSearch may return (the team file's ``[web]``)."""

    private_hosts: tuple[str, ...] = ()
    """Hosts (``name`` or ``name:port``) on loopback or private addresses that WebFetch may fetch from; by
    default it refuses every such address, so an agent cannot reach the machine's or the network's
    own services."""
    search_allowed_domains: tuple[str, ...] = ()
    """When set, WebSearch returns results from these domains only."""
    search_blocked_domains: tuple[str, ...] = ()
    """Domains WebSearch never returns results from (not with ``search_allowed_domains``)."""
