"""Where an agent's file tools may reach: its workspace, read-only extra roots, never teamrt's home.

A path the model gives is made absolute (relative ones from the workspace),
``..`` is collapsed by name, and the result is walked by ``beneath.resolve``
from the root holding it, symlinks followed by hand within the roots. The
canonical result is then checked:

- reading: teamrt's home (``<home>/runs/<run>`` is the run directory: every
  run's store, mailboxes and worktrees, and ``.teamrt/agents``) is refused,
  except in a root that itself lies in the home (a worktree agent's workspace,
  the run's spill directory); so is a path one of the agent's deny rules for
  reading names (``ToolContext.read_denied``);
- writing: also the protected paths (``protect.write_refusal``: ``.git``,
  ``.claude``, ``.mcp.json``, agent definitions, the team file) and anything
  outside the workspace proper (extra roots are read-only).

Walks (glob, grep) never enter ``.git`` or the home and leave out what a deny
rule hides.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from teamrt.sandbox.protect import PROTECTED, write_refusal
from teamrt.tools.base import ToolContext, ToolError
from teamrt.tools.files import beneath

IN_HOME = "is in teamrt's home (the runs' stores, mailboxes and agent definitions), which no agent may read"
READ_ONLY = "is in a read-only directory; only the workspace can be changed"


def reason(e: OSError) -> str:
    """An OSError in words the model can act on, without errno numbers."""
    if isinstance(e, beneath.Changed):
        return "changed while in use (another process is moving it); try again"
    if isinstance(e, FileNotFoundError):
        return "does not exist"
    if isinstance(e, NotADirectoryError):
        return "has a part that is not a directory"
    if isinstance(e, IsADirectoryError):
        return "is a directory"
    if isinstance(e, PermissionError):
        return "is not permitted"
    if e.errno == errno.ELOOP:
        return "has a symlink loop"
    if e.errno == errno.ENAMETOOLONG:
        return "has a name longer than 255 bytes"
    return (e.strerror or "could not be used").lower()


def hidden_note(count: int) -> str:
    """What a walk (glob, grep) says of the ``count`` matching files a deny rule kept from it."""
    return f"({count} matching {'file is' if count == 1 else 'files are'} hidden by the agent's deny rules)"


def shown(text: str) -> str:
    """A file name fit to show the model: bytes that are not UTF-8 become U+FFFD."""
    return os.fsencode(text).decode("utf-8", "replace")


@dataclass(frozen=True)
class FileRoots:
    """An agent's roots, canonical, and what it may read and write beneath them."""

    workspace: Path
    extra: tuple[Path, ...]
    home: Path
    protected: tuple[Path, ...]
    read_denied: Callable[[Path], str | None] | None
    aliases: tuple[tuple[Path, Path], ...]
    """Each root as the context names it (absolute, normalized) and canonical, for absolute paths."""

    @classmethod
    def of(cls, ctx: ToolContext) -> FileRoots:
        given = (ctx.workspace, *ctx.extra_roots)
        real = tuple(Path(os.path.realpath(root)) for root in given)
        return cls(
            workspace=real[0],
            extra=real[1:],
            home=Path(os.path.realpath(ctx.run_dir.parent.parent)),
            protected=ctx.protected,
            read_denied=ctx.read_denied,
            aliases=tuple((Path(os.path.abspath(g)), r) for g, r in zip(given, real, strict=True)),
        )

    @property
    def roots(self) -> tuple[Path, ...]:
        return (self.workspace, *self.extra)

    @property
    def _outside(self) -> str:
        return f"is outside the workspace {shown(str(self.workspace))}; use a path inside it"

    def absolute(self, file_path: str) -> Path:
        """``file_path`` made absolute and normalized, and put under a canonical root when it names one."""
        path = Path(os.path.normpath(os.path.join(self.workspace, file_path)))
        if beneath.root_of(path, self.roots) is not None:
            return path
        for alias, real in self.aliases:
            if path.is_relative_to(alias):
                return real / path.relative_to(alias)
        # outside every root as written: a symlink outside the roots (/tmp on macOS, say) may still lead in
        return Path(os.path.realpath(path))

    def resolve(self, op: str, file_path: str, *, write: bool = False) -> beneath.Spot:
        """Where ``file_path`` leads, held open, or a ToolError saying why it may not be used."""
        path = self.absolute(file_path)
        as_written = Path(os.path.normpath(os.path.join(self.workspace, file_path)))
        try:
            spot = beneath.resolve(path, self.roots)
        except beneath.Escape as e:
            where = IN_HOME if e.path.is_relative_to(self.home) else self._outside
            raise ToolError(f"{op}: {file_path}{_via(e.path, as_written)} {where}") from e
        except OSError as e:
            raise ToolError(f"{op}: {file_path} {reason(e)}") from e
        why = self.write_refusal(spot.path, spot.root) if write else self.read_refusal(spot.path, spot.root)
        if why is not None:
            spot.close()
            raise ToolError(f"{op}: {file_path}{_via(spot.path, as_written)} {why}")
        return spot

    def in_home(self, path: Path, root: Path) -> bool:
        """Whether the canonical ``path``, reached from ``root``, is in the part of the home none may read."""
        return path.is_relative_to(self.home) and not root.is_relative_to(self.home)

    def rule(self, path: Path) -> str | None:
        """The agent's deny rule that forbids reading the canonical ``path``, if any."""
        return self.read_denied(path) if self.read_denied is not None else None

    def read_refusal(self, path: Path, root: Path) -> str | None:
        """Why the canonical ``path``, reached from ``root``, may not be read, or None."""
        if self.in_home(path, root):
            return IN_HOME
        rule = self.rule(path)
        return f"is denied by the rule {rule}" if rule is not None else None

    def write_refusal(self, path: Path, root: Path) -> str | None:
        """Why the canonical ``path``, reached from ``root``, may not be changed, or None."""
        if self.in_home(path, root) or write_refusal(path, self.workspace, self.protected) is not None:
            return PROTECTED
        return READ_ONLY if root != self.workspace else None

    def show(self, path: Path) -> str:
        """``path`` as the model should see it: relative inside the workspace, else absolute."""
        return shown(str(path.relative_to(self.workspace) if path.is_relative_to(self.workspace) else path))


def _via(found: Path, given: Path) -> str:
    return f" (which resolves to {shown(str(found))})" if found != given else ""
