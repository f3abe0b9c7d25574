"""A queued run's repository: cloned from the submitted URL, its integration branch pushed back there.

The submitter's URL and ref are checked again here (a worker trusts no row it reads): no
leading ``-``, no control characters, no ``<transport>::`` form (``ext::`` runs a command,
``fd::`` reads a descriptor). Every git command runs with teamrt's pinned settings (no hooks, no
fsmonitor, ``teamrt.worktree.git.PINNED``), only the transports ``ALLOWED`` and nothing of the
caller's ``GIT_*`` environment. A repository on a local path (or ``file://``) is served by a
``git upload-pack``/``receive-pack`` run on this machine in that repository, whose hooks would
run here: it is run with hooks off.

The clone's own ``.git`` is the agents' to spoil (its config may name another remote, an
``insteadOf`` rewrite, a credential helper; its ``hooks/`` may hold programs), so a push never runs
git in it: the branch's tip is read from its ref files, and the push goes from a scratch
repository made fresh for each push, with no config of its own and the clone's objects as its
alternate, to the submitted URL only.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from teamrt.errors import UserError
from teamrt.worktree.git import SAFE

ALLOWED = ("file", "git", "http", "https", "ssh")
"""The transports a queued run's repository may use."""
GIT_TIMEOUT_S = 300.0
_PROTOCOLS = (
    "-c",
    "protocol.allow=never",
    *(a for p in ALLOWED for a in ("-c", f"protocol.{p}.allow=always")),
)
_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/+@-]{0,254}")
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_CONTROL = re.compile(r"[\x00-\x20\x7f]")
_NO_HOOKS = "git -c core.hooksPath=/dev/null -c core.fsmonitor=false"


class RemoteError(UserError):
    """A repository that cannot be cloned or pushed to; one line."""


def check_url(url: str) -> None:
    """Refuse a URL a worker must not hand to git (see the module's docstring)."""
    if not url or url.startswith("-") or _CONTROL.search(url):
        raise RemoteError(
            f"repository URL {url[:80]!r} is refused: empty, a leading '-', whitespace or a control character"
        )
    scheme = url.split("://", 1)[0].lower() if "://" in url else None
    if "::" in url.split("/", 1)[0] or (scheme is not None and scheme not in ALLOWED):
        raise RemoteError(
            f"repository URL {url[:80]!r} is refused: transports allowed are {', '.join(ALLOWED)}"
        )


def check_ref(ref: str) -> None:
    if not _REF.fullmatch(ref) or ".." in ref:
        raise RemoteError(f"ref {ref[:80]!r} is refused: a branch, tag or commit, not starting with '-'")


def is_local(url: str) -> bool:
    """Whether git serves ``url`` by running a program in a repository on this machine."""
    if url.startswith("file://"):
        return True
    if "://" in url:
        return False
    head = url.split("/", 1)[0]
    return ":" not in head  # "host:path" is scp-like ssh; anything else is a path


def clone(url: str, ref: str | None, target: Path) -> str:
    """Clone ``url`` into ``target`` (which must not exist) with ``ref`` (default: the remote's HEAD)
    checked out, detached; returns the commit."""
    check_url(url)
    if ref is not None:
        check_ref(ref)
    local = [f"--upload-pack={_NO_HOOKS} upload-pack"] if is_local(url) else []
    _git(
        "clone", "--quiet", "--no-local", "--no-checkout", *local, "--", url, str(target), what=f"clone {url}"
    )
    commit = None
    for name in [ref, f"origin/{ref}"] if ref is not None else ["HEAD"]:
        found = _git("rev-parse", "--verify", "--quiet", f"{name}^{{commit}}", cwd=target, check=False)
        if _SHA.fullmatch(found):
            commit = found
            break
    if commit is None:
        raise RemoteError(f"{url}: no branch, tag or commit {ref!r}")
    _git("checkout", "--quiet", "--detach", commit, cwd=target, what=f"check out {ref}")
    return commit


def branch_tip(git_dir: Path, branch: str) -> str | None:
    """The commit ``refs/heads/<branch>`` names in ``git_dir``, read from its files (no git is run in a
    repository the agents could configure); None when there is no such branch."""
    try:
        check_ref(branch)
        loose = (git_dir / "refs" / "heads" / branch).read_text(encoding="ascii").strip()
    except (RemoteError, OSError, UnicodeDecodeError):
        loose = ""
    if _SHA.fullmatch(loose):
        return loose
    try:
        packed = (git_dir / "packed-refs").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    for line in packed.splitlines():
        sha, _, name = line.partition(" ")
        if name == f"refs/heads/{branch}" and _SHA.fullmatch(sha):
            return sha
    return None


def push(git_dir: Path, url: str, branch: str, tip: str) -> None:
    """Push commit ``tip`` (in ``git_dir``'s objects) to ``refs/heads/<branch>`` at ``url``: a fast-forward
    only, from a scratch repository of teamrt's own (see the module's docstring)."""
    check_url(url)
    check_ref(branch)
    if not _SHA.fullmatch(tip):
        raise RemoteError(f"not a commit: {tip[:80]!r}")
    scratch = Path(tempfile.mkdtemp(prefix="teamrt-push-"))
    try:
        _git("init", "--quiet", "--bare", "--template=", str(scratch), what="make a scratch repository")
        info = scratch / "objects" / "info"
        info.mkdir(parents=True, exist_ok=True)
        (info / "alternates").write_text(f"{(git_dir / 'objects').resolve()}\n", encoding="utf-8")
        local = [f"--receive-pack={_NO_HOOKS} receive-pack"] if is_local(url) else []
        _git(
            "push", "--quiet", "--no-verify", *local, url, f"{tip}:refs/heads/{branch}",
            env={"GIT_DIR": str(scratch)}, what=f"push {branch} to {url}",
        )  # fmt: skip
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _git(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, what: str = "", check: bool = True
) -> str:
    base = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    base |= {"GIT_TERMINAL_PROMPT": "0", "GIT_ALLOW_PROTOCOL": ":".join(ALLOWED), **(env or {})}
    try:
        done = subprocess.run(
            ["git", *SAFE, *_PROTOCOLS, *args], cwd=cwd, env=base, capture_output=True, text=True,
            timeout=GIT_TIMEOUT_S, stdin=subprocess.DEVNULL, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RemoteError(f"could not {what}: {e}") from None
    if check and done.returncode != 0:
        said = (done.stderr.strip().splitlines() or [f"git exited {done.returncode}"])[-1]
        raise RemoteError(f"could not {what}: {said}")
    return done.stdout.strip()
