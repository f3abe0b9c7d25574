"""Allow always: the rule a person's "don't ask again" adds, written to ``.claude/settings.local.json``.

Claude Code answers "Yes, and don't ask again" by adding an allow rule to the
project's ``.claude/settings.local.json`` (a file git is told to ignore), so
later sessions are not asked either. teamrt does the same for a permission ask
answered "always" (inline, in the TUI, ``teamrt answer --always``):

- ``rule_for`` forms the rule in Claude Code's shape, never reaching past the
  call's own program or target: for ``Bash`` a prefix rule on the one simple
  command the call runs (``Bash(python3 -m pytest:*)``, ``Bash(npm run test:*)``,
  ``Bash(git push:*)``, ``Bash(pytest:*)``), or the command exactly when no
  prefix fits; for ``WebFetch`` the host (``WebFetch(domain:docs.python.org)``);
  for the file tools the file (``Edit(/src/app.py)``, relative to the
  workspace); for an MCP tool the tool. A command that runs several programs
  (``pytest && rm -rf x``, a pipe, ``sudo``), takes words from a substitution
  or cannot be read through gets no rule: the answer is "allow once", with why.
  So does a call asked about by an ask rule or a hook, which no allow rule lifts.
- ``add_allow_rule`` merges the rule into the file: other keys kept, the rule
  added to ``permissions.allow`` once, the file replaced atomically through
  directory descriptors that follow no symlink. It refuses (``LocalRuleError``,
  one line) a ``.claude`` or settings file that is a symlink or not a regular
  file, a file that is not a JSON object (it is left as it is, never
  clobbered), and a file git tracks: that one came with the repository, its
  allow rules count only after ``teamrt trust`` (``teamrt.claudecode.settings``).
  It then makes sure git ignores the file (``.git/info/exclude``), as Claude
  Code does, so an untracked file it wrote stays the person's own and its rules
  count on the next run without any trust.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teamrt.claudecode.reading import DuplicateKey, loads_json, read_up_to
from teamrt.errors import UserError
from teamrt.tools.permissions import RuleError, Rules, Verdict, folded
from teamrt.tools.shell.programs import read
from teamrt.tools.shell.scripts import INTERPRETERS
from teamrt.tools.web.address import host_of

LOCAL_FILE = Path(".claude") / "settings.local.json"
"""Where a person's own rules for the project live (as Claude Code keeps them), from the project's top."""
MAX_BYTES = 1 << 20
"""A settings file larger than this is not rewritten (the reader refuses it too)."""

SUBCOMMANDS: Mapping[str, int] = {
    **dict.fromkeys((
        "git", "npm", "pnpm", "yarn", "bun", "cargo", "go", "make", "gmake", "pip", "pip3", "uv",
        "poetry", "pdm", "hatch", "pipenv", "tox", "nox", "dotnet", "mvn", "gradle", "gradlew", "rustup",
        "deno", "brew", "terraform", "helm", "bundle", "rake", "mix", "composer", "just", "conda",
        "swift", "flutter", "dart", "zig", "npx", "pnpx", "bunx", "cmake", "apt", "apt-get", "systemctl",
        "nix",
    ), 1),
    **dict.fromkeys(("gh", "docker", "podman", "kubectl", "gcloud", "aws", "az"), 2),
}  # fmt: skip
"""Programs whose first word (or two) says what they do: ``git push``, ``gh pr view``; the rule keeps it."""
SCRIPT_RUNNERS = frozenset({"npm", "pnpm", "yarn", "bun"})
"""``npm run test``: the script's name is part of the rule too."""
COMMAND_RUNNERS = frozenset({"uv", "poetry", "pdm", "hatch", "pipenv"})
"""``uv run pytest -q``: what follows ``run`` is a command of its own, its rule formed the same way."""

_SUBCOMMAND = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+@-]*(?::[A-Za-z0-9_.+@-]+)*")
"""A subcommand, script or module name: plain text, no path, no pattern, not ending in ``:``."""
_PROGRAM = re.compile(r"(?:\.{0,2}/)?[A-Za-z0-9_+.-]+(?:/[A-Za-z0-9_+.-]+)*")
"""A program or a script as written (``pytest``, ``./deploy.sh``, ``/usr/bin/python3``)."""
_OPTION = re.compile(r"--?[A-Za-z0-9][A-Za-z0-9_-]*(?:=[A-Za-z0-9_.,:/+-]*)?")
_EXACT_WORD = re.compile(r"[A-Za-z0-9_./:=@%+,-]+")
"""A word a rule can spell as it is: nothing the shell or a rule's pattern would read otherwise."""
_PATH_UNSAFE = re.compile(r"[*?()\\\x00-\x1f\x7f]|^\s|\s$")
"""What a file rule cannot spell: pattern characters, parentheses, backslashes, controls, edge spaces."""
_MCP_TOOL = re.compile(r"mcp__[A-Za-z0-9_-]+__[A-Za-z0-9_-]+")
_EDITS = frozenset({"edit", "write", "multiedit"})
_READS = frozenset({"read"})

ASKED_BY_RULE = "approval required by rule"
"""How an ask rule's reason starts (``teamrt.tools.permissions``): an allow rule cannot lift it."""
ASKED_BY_HOOK = "a PreToolUse hook asks"
"""How a hook's ask reads (``teamrt.runtime.hooks.decide``): the hook asks again whatever the rules say."""
OPAQUE_UNDER_RULE = "cannot tell what this command runs"


class LocalRuleError(UserError):
    """The rule cannot be written to ``.claude/settings.local.json``; one line naming the file and why."""


@dataclass(frozen=True)
class RuleChoice:
    """What "allow always" would add for a call: ``rule``, or None and ``why`` not."""

    rule: str | None
    why: str = ""


@dataclass(frozen=True)
class Added:
    """A rule written: where, whether it was new, and a note when git could not be told to ignore it."""

    path: Path
    new: bool
    note: str | None = None


def rule_for(tool: str, input: Mapping[str, Any], workspace: Path, reason: str = "") -> RuleChoice:
    """The allow rule "allow always" adds for a call of ``tool`` with ``input`` in ``workspace``, asked
    about for ``reason``; or why there is none. The rule allows the call itself (checked) and never a
    program or target the call does not name."""
    if reason.startswith(ASKED_BY_RULE) or reason.startswith(OPAQUE_UNDER_RULE):
        return RuleChoice(None, "an ask rule asks about this call, and no allow rule lifts an ask rule")
    if reason.startswith(ASKED_BY_HOOK):
        return RuleChoice(None, "a PreToolUse hook asks about this call, whatever the rules allow")
    name = folded(tool)
    if name == "bash":
        choice = _bash_rule(input.get("command"))
    elif name == "webfetch":
        host = host_of(input.get("url"))
        choice = RuleChoice(f"WebFetch(domain:{host})") if host else RuleChoice(None, "its url is not valid")
    elif name in _EDITS or name in _READS:
        choice = _file_rule("Edit" if name in _EDITS else "Read", input, workspace)
    elif name == "task":
        kind = input.get("subagent_type") or "general-purpose"
        ok = isinstance(kind, str) and _SUBCOMMAND.fullmatch(kind) is not None
        choice = (
            RuleChoice(f"Task({kind})") if ok else RuleChoice(None, "its subagent_type is not a plain name")
        )
    elif _MCP_TOOL.fullmatch(tool):
        choice = RuleChoice(tool)
    elif name == "mcpsampling":  # a server's sampling requests (teamrt.mcp.capabilities)
        server = input.get("server")
        plain = isinstance(server, str) and _SUBCOMMAND.fullmatch(server) is not None
        choice = (
            RuleChoice(f"McpSampling({server})")
            if plain
            else RuleChoice(None, "its server's name is not plain")
        )
    else:
        choice = RuleChoice(None, f"teamrt forms no rule for {tool} calls (only Bash, WebFetch, the file"
                                  " tools, Task and MCP tools)")  # fmt: skip
    if choice.rule is not None and not _allows(choice.rule, name, input, workspace):
        return RuleChoice(None, f"the rule {choice.rule} would not allow this very call")
    return choice


def _allows(rule: str, tool: str, input: Mapping[str, Any], workspace: Path) -> bool:
    """Whether ``rule`` alone allows the call (the check that the rule formed is the call's)."""
    try:
        rules = Rules.parse(allow=[rule])
    except RuleError:
        return False
    reading = read(str(input.get("command", ""))) if tool == "bash" else None
    decision = rules.decide(tool, input, workspace, reading)
    return decision is not None and decision.verdict is Verdict.ALLOW


def _bash_rule(command: object) -> RuleChoice:
    if not isinstance(command, str) or not command.strip():
        return RuleChoice(None, "the call has no command")
    reading = read(command)
    if reading.hidden:
        return RuleChoice(None, f"teamrt cannot tell all this command runs ({reading.hidden})")
    if reading.substitution:
        return RuleChoice(None, "some of its words come from a substitution, which no rule can check")
    programs = [c.program for c in reading.commands]
    if len(programs) != 1:
        return RuleChoice(
            None, f"it runs {len(programs)} programs ({', '.join(programs)}); a rule allows one"
        )
    [run] = reading.commands
    kept = _prefix([run.path, *run.args], open_end=run.open)
    if kept is None:
        return RuleChoice(None, "its words are not plain enough for a rule to spell")
    words, exact = kept
    return RuleChoice(f"Bash({' '.join(words)})" if exact else f"Bash({' '.join(words)}:*)")


def _prefix(words: list[str], *, open_end: bool = False) -> tuple[list[str], bool] | None:
    """The words a Bash rule keeps of a command (its program first) and whether the rule is the command
    exactly (else a prefix); None when no rule can be spelled. ``open_end``: words that are not plain text
    follow ``words``."""
    if not words or _PROGRAM.fullmatch(words[0]) is None:
        return None
    program, args = words[0], words[1:]
    name = program.rsplit("/", 1)[-1]
    if any(pattern.fullmatch(name) for pattern, _ in INTERPRETERS):
        return _interpreted(program, args, open_end)
    depth = SUBCOMMANDS.get(name)
    if depth is None:
        return [program], False
    kept = [program]
    for word in args[:depth]:
        if _SUBCOMMAND.fullmatch(word) is None:
            break
        kept.append(word)
    if len(kept) == 1:  # no subcommand first (git -C sub push, git alone): only the command exactly
        return _exact(words, open_end)
    rest = args[len(kept) - 1 :]
    if name in SCRIPT_RUNNERS and kept[-1] in ("run", "run-script"):
        return ([*kept, rest[0]], False) if rest and _SUBCOMMAND.fullmatch(rest[0]) else None
    if name in COMMAND_RUNNERS and kept[-1] == "run":
        inner = _prefix(rest, open_end=open_end) if rest else None
        return None if inner is None else ([*kept, *inner[0]], inner[1])
    return kept, False


def _exact(words: list[str], open_end: bool) -> tuple[list[str], bool] | None:
    """The command exactly, when a rule can spell each of its words."""
    if open_end or not all(_EXACT_WORD.fullmatch(word) for word in words):
        return None
    return words, True


def _interpreted(program: str, args: list[str], open_end: bool) -> tuple[list[str], bool] | None:
    """An interpreter's rule keeps what it runs: ``python3 -m pytest``, ``node scripts/build.js``; never
    the interpreter alone (it would run any script an agent writes)."""
    kept = [program]
    for i, word in enumerate(args):
        if word == "-m":
            module = args[i + 1] if i + 1 < len(args) else ""
            return ([*kept, word, module], False) if _SUBCOMMAND.fullmatch(module) else None
        if word.startswith("-"):
            if _OPTION.fullmatch(word) is None:
                return None
            kept.append(word)
            continue
        return ([*kept, word], False) if _PROGRAM.fullmatch(word) else None
    return _exact(kept, open_end) if len(kept) > 1 else None  # only options (python3 --version)


def _file_rule(kind: str, input: Mapping[str, Any], workspace: Path) -> RuleChoice:
    path = input.get("file_path", input.get("path"))
    if not isinstance(path, str) or not path:
        return RuleChoice(None, "the call names no file")
    try:
        target = Path(os.path.realpath(os.path.join(workspace, path)))
    except ValueError:
        return RuleChoice(None, "its path is not one a file can have")
    top = Path(os.path.realpath(workspace))
    if not target.is_relative_to(top) or target == top:
        return RuleChoice(None, "the file is outside the workspace")
    relative = target.relative_to(top).as_posix()
    if _PATH_UNSAFE.search(relative):
        return RuleChoice(None, "its path holds characters a rule cannot spell")
    return RuleChoice(f"{kind}(/{relative})")


# == writing the rule =====================================================================================

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def add_allow_rule(project: Path, rule: str) -> Added:
    """Add ``rule`` to ``permissions.allow`` of ``project``'s ``.claude/settings.local.json`` (made when
    missing), keeping all else; then make sure git ignores the file. Raises ``LocalRuleError``."""
    path = project / LOCAL_FILE
    shown = LOCAL_FILE.as_posix()
    Rules.parse(allow=[rule])  # a rule that does not parse never reaches the file
    from teamrt.claudecode.settings import git_tracks

    if os.path.lexists(path) and git_tracks(project, path):
        raise LocalRuleError(
            f"{shown} is tracked by git (it came with the repository), so teamrt does not write to it"
        )
    note = ensure_ignored(project)
    try:
        top = os.open(project, _DIR_FLAGS)
    except OSError as e:
        raise LocalRuleError(f"cannot open the project {project}: {e.strerror}") from None
    try:
        claude = _claude_dir(top, shown)
        try:
            new = _merge(claude, LOCAL_FILE.name, rule, shown)
        finally:
            os.close(claude)
    finally:
        os.close(top)
    return Added(path, new, note)


def _claude_dir(top: int, shown: str) -> int:
    """A descriptor of the project's ``.claude`` directory (made when missing); never through a link."""
    name = LOCAL_FILE.parent.name
    try:
        os.mkdir(name, 0o755, dir_fd=top)
    except FileExistsError:
        pass
    except OSError as e:
        raise LocalRuleError(f"cannot make {name}/ for {shown}: {e.strerror}") from None
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=top)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise LocalRuleError(
                f"{name} is a symlink or not a directory; teamrt writes {shown} only as a real file inside"
                " the project"
            ) from None
        raise LocalRuleError(f"cannot open {name}/: {e.strerror}") from None


def _merge(claude: int, name: str, rule: str, shown: str) -> bool:
    """Add ``rule`` to the file ``name`` in the directory ``claude``, replaced atomically; False when it
    was there already."""
    data, mode = _current(claude, name, shown)
    permissions = data.setdefault("permissions", {})
    if not isinstance(permissions, dict):
        raise LocalRuleError(f"{shown}: 'permissions' is not an object; left as it is")
    allow = permissions.setdefault("allow", [])
    if not isinstance(allow, list) or not all(isinstance(item, str) for item in allow):
        raise LocalRuleError(f"{shown}: 'permissions.allow' is not a list of strings; left as it is")
    if rule in allow:
        return False
    allow.append(rule)
    body = (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode()
    temporary = f".{name}.{os.getpid()}.{time.time_ns()}.tmp"
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode,
                     dir_fd=claude)  # fmt: skip
        try:
            os.write(fd, body)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, name, src_dir_fd=claude, dst_dir_fd=claude)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=claude)
        raise LocalRuleError(f"cannot write {shown}: {e.strerror}") from None
    return True


def _current(claude: int, name: str, shown: str) -> tuple[dict[str, Any], int]:
    """The file's JSON object and mode ({} and 0o644 when there is none); refuses what it cannot merge."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=claude)
    except FileNotFoundError:
        return {}, 0o644
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise LocalRuleError(f"{shown} is a symlink; teamrt does not write through it") from None
        raise LocalRuleError(f"cannot read {shown}: {e.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise LocalRuleError(f"{shown} is not a regular file; left as it is")
        if info.st_size > MAX_BYTES:
            raise LocalRuleError(f"{shown} is larger than {MAX_BYTES // 1024} KiB; left as it is")
        raw = read_up_to(fd, MAX_BYTES + 1)
    finally:
        os.close(fd)
    try:
        data = loads_json(raw.decode("utf-8-sig")) if raw.strip() else {}
    except (UnicodeDecodeError, json.JSONDecodeError, DuplicateKey, RecursionError) as e:
        what = f"line {e.lineno} column {e.colno}: {e.msg}" if isinstance(e, json.JSONDecodeError) else str(e)
        raise LocalRuleError(f"{shown} is not valid JSON ({what}); left as it is") from None
    if not isinstance(data, dict):
        raise LocalRuleError(f"{shown} does not hold a JSON object; left as it is")
    return data, stat.S_IMODE(info.st_mode)


def ensure_ignored(project: Path) -> str | None:
    """Make sure git ignores ``project``'s ``.claude/settings.local.json``: when it does not already, the
    file is added to the repository's ``info/exclude`` (never through a symlink). None when git ignores it
    (or ``project`` is not in git); else a note saying why it could not be done."""
    from teamrt.worktree.git import SAFE

    def git(*args: str) -> subprocess.CompletedProcess[str] | None:
        try:
            return subprocess.run(
                ["git", *SAFE, "-C", str(project), *args], capture_output=True, text=True, timeout=10,
                check=False, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired):
            return None

    checked = git("check-ignore", "-q", "--", LOCAL_FILE.as_posix())
    if checked is None:
        return "git could not be asked whether it ignores the file"
    if checked.returncode == 0 or "not a git repository" in checked.stderr:
        return None
    top, exclude = git("rev-parse", "--show-toplevel"), git("rev-parse", "--git-path", "info/exclude")
    if top is None or exclude is None or top.returncode or exclude.returncode:
        return "git did not say where its exclude file is"
    root = Path(top.stdout.strip())
    line = "/" + (Path(os.path.realpath(project)) / LOCAL_FILE).relative_to(os.path.realpath(root)).as_posix()
    target = project / exclude.stdout.strip()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            held = read_up_to(fd, MAX_BYTES)
            if line.encode() not in held.splitlines():
                os.write(fd, (b"\n" if held and not held.endswith(b"\n") else b"") + line.encode() + b"\n")
        finally:
            os.close(fd)
    except OSError as e:
        return f"git's exclude file {target} could not take it ({e.strerror})"
    return None
