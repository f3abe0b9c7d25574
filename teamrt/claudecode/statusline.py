"""Claude Code's status line: the settings' ``statusLine`` command, chosen under the rules of hooks, fed
Claude Code's JSON on stdin, run confined as a hook is.

Claude Code 2.1 reads ``"statusLine": {"type": "command", "command": "...", "padding": 0,
"refreshInterval": 5}`` from the settings files (a later file's whole entry over an earlier one's), runs
the command after each new assistant message (debounced at 300 ms) and every ``refreshInterval`` seconds
when set, and shows what it prints as rows at the bottom of its terminal UI: each line of stdout a row,
ANSI colours and OSC 8 links rendered; nothing on stdout (or a failure) leaves the rows empty. It is
gated by workspace trust as hooks are, and ``disableAllHooks`` turns it off. The command gets, as JSON on
stdin, the session (``session_id``, ``transcript_path``, ``cwd``), ``model`` (``id``, ``display_name``),
``workspace`` (``current_dir``, ``project_dir``), ``version``, ``output_style``, ``cost`` and
``context_window``.

teamrt shows it in the TUI's run view (``teamrt.tui.statusline``), for the run being watched:

- ``choose``: the entry of the settings files of the run's project, the last file's first; a repository's
  (``.claude/settings.json``, a ``settings.local.json`` git tracks) only while the person trusts the
  project's hooks, whose hash covers it (``teamrt.claudecode.trust.hooks_digest``); an untrusted one is
  left out with a line saying ``teamrt trust``, and the person's own (the user's) is shown instead when
  there is one. ``disableAllHooks`` turns off its scope's, the user's file all of them, as for hooks.
- ``status_input``: Claude Code's JSON filled from the run: its id as ``session_id``, the lead's model,
  the run's cost, duration and tokens, its directory; what teamrt does not know (a transcript file, lines
  added, the current context use) is left out or null, never made up. A ``teamrt`` object adds the run's
  status and agents.
- ``run_status_line``: the command run as a hook is (``teamrt.claudecode.hooks.run_hook``): in the
  sandbox of ``Bash``, in a process group killed when it ends, times out (``TIMEOUT``) or is cancelled,
  its output kept to ``KEPT_BYTES``. A user's entry that names a script under the home directory, which
  the sandbox hides (``~/.claude/statusline.sh``, what Claude Code's ``/statusline`` writes), has that one
  file shown read-only (``shown_files``); what the script reads there stays hidden.

Departures, each said in docs/claude-code.md: at most ``MAX_LINES`` rows; a run still under way is let
finish and the command run again after it (Claude Code cancels it), so a slow command still shows; a
failure is shown as one dim line naming it instead of an empty row; OSC 8 links show their text only.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teamrt.claudecode.hooks import Hook, Ran, run_hook
from teamrt.claudecode.trust import REPOSITORY_SCOPES, TrustError, hooks_digest, is_trusted
from teamrt.sandbox.bwrap import Sandbox
from teamrt.sandbox.confinement import Confinement

KEY = "statusLine"
TIMEOUT = 5.0
"""How long a status line command may run (Claude Code documents none; a status line that takes longer
is of no use on a live view, and a hung one must not hold a process)."""
GAP_S = 0.3
"""At most one run per this many seconds (Claude Code debounces its updates at 300 ms)."""
MAX_LINES = 3
"""Rows shown (Claude Code shows every line; the run view keeps its room for the run)."""
MAX_PADDING = 20
MIN_REFRESH_S = 1.0
"""The shortest ``refreshInterval`` honoured (Claude Code's own minimum is one second)."""
INTERPRETERS = frozenset(
    {"bash", "sh", "zsh", "dash", "python", "python3", "node", "bun", "deno", "ruby", "perl"}
)
"""Programs whose next word is the script that runs (``bash ~/.claude/statusline.sh``)."""
MAX_WORDS = 64
_FIELDS = frozenset({"type", "command", "padding", "refreshInterval", "hideVimModeIndicator"})
_HOME_PATH = re.compile(r"^(?:~|\$HOME|\$\{HOME\})(/.*)$")


@dataclass(frozen=True)
class StatusLine:
    """One settings file's usable ``statusLine``."""

    command: str
    padding: int
    refresh_s: float | None
    """``refreshInterval``: run again this often besides on the run's changes; None: only on them."""
    scope: str
    source: Path

    def hook(self) -> Hook:
        """The command as ``run_hook`` runs it."""
        return Hook(KEY, "", self.command, TIMEOUT, self.scope, self.source, roots=shown_files(self))


@dataclass(frozen=True)
class Chosen:
    """The status line a project shows (None: none), and what was left out and why, a line each."""

    line: StatusLine | None
    notes: tuple[str, ...] = ()
    untrusted: tuple[Path, ...] = ()
    """The settings files whose ``statusLine`` would show but for the person's trust (said as a run starts:
    ``teamrt.runtime.hooks.load_hooks``)."""


def entry_problems(value: Any) -> list[str]:
    """What is wrong with a ``statusLine`` value, a line each (after ``statusLine``); [] when it is
    usable. ``teamrt.claudecode.settings_keys`` says these as a run starts."""
    return parse_entry(value, "user", Path())[1]


def parse_entry(value: Any, scope: str, source: Path) -> tuple[StatusLine | None, list[str]]:
    """The status line of one settings file's ``statusLine`` value, or None with why."""
    if not isinstance(value, dict):
        return None, ["statusLine must be an object with type 'command' and a command; left out"]
    kind = value.get("type", "command")
    command = value.get("command")
    if kind != "command":
        return None, [f"statusLine type {str(kind)[:40]!r} is not one teamrt runs (only 'command'); left out"]
    if not isinstance(command, str) or not command.strip():
        return None, ["statusLine command must be a non-empty string; left out"]
    problems: list[str] = []
    padding = value.get("padding", 0)
    if isinstance(padding, bool) or not isinstance(padding, int | float) or padding < 0:
        problems.append("statusLine padding must be a number of characters, 0 or more; it gets 0")
        padding = 0
    refresh = value.get("refreshInterval")
    if refresh is not None and (isinstance(refresh, bool) or not isinstance(refresh, int | float)):
        problems.append("statusLine refreshInterval must be a number of seconds; it runs on changes only")
        refresh = None
    elif refresh is not None and refresh < MIN_REFRESH_S:
        problems.append(f"statusLine refreshInterval {refresh:g} is under {MIN_REFRESH_S:g} s; it gets 1")
        refresh = MIN_REFRESH_S
    unknown = sorted(str(k)[:40] for k in value if k not in _FIELDS)
    if unknown:
        fields = f"field{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}"
        problems.append(f"statusLine: unknown {fields} ignored")
    line = StatusLine(command, min(int(padding), MAX_PADDING), refresh, scope, source)
    return line, problems


def choose(project: Path, files: Sequence[Any] | None = None) -> Chosen:
    """The status line of ``project``'s settings (``files``: as ``teamrt.claudecode.settings_read`` reads
    them, read now when not given), by Claude Code's precedence and teamrt's trust; never raises for a
    file's content."""
    from teamrt.claudecode.settings_read import read_settings_files

    files = read_settings_files(project) if files is None else files
    off: set[str] = set()
    for file in files:
        if file.data.get("disableAllHooks") is True:
            off.update(("user", *REPOSITORY_SCOPES) if file.scope == "user" else (file.scope,))
    notes: list[str] = []
    untrusted: list[Path] = []
    trusted: bool | None = None  # read once, when a repository's entry asks
    for file in reversed(files):  # the last file's entry is the one that counts
        if KEY not in file.data:
            continue
        where = str(file.path)
        if file.scope in off:
            notes.append(f"{where}: its statusLine does not run: disableAllHooks turns it off")
            continue
        line, problems = parse_entry(file.data[KEY], file.scope, file.path)
        notes += [f"{where}: {problem}" for problem in problems]
        if line is None:
            continue
        if getattr(file, "repository", file.scope in REPOSITORY_SCOPES):
            if trusted is None:
                trusted = _hooks_trusted(project, files, notes)
            if not trusted:
                notes.append(
                    f"{where}: its statusLine does not run: this project's hooks are not trusted as they are"
                    f" now; read it, then run `teamrt trust` in {project} to let it run"
                )
                untrusted.append(file.path)
                continue
        return Chosen(line, tuple(notes), tuple(untrusted))
    return Chosen(None, tuple(notes), tuple(untrusted))


def _hooks_trusted(project: Path, files: Sequence[Any], notes: list[str]) -> bool:
    digest = hooks_digest(files)
    try:
        return digest is not None and is_trusted(project, digest)
    except TrustError as e:
        notes.append(str(e))
        return False


def shown_files(line: StatusLine) -> tuple[Path, ...]:
    """The scripts a user's command runs by absolute path (``~/.claude/statusline.sh``,
    ``bash "$HOME/.claude/sl.py"``, ``/tmp/sl.sh``): the programs of its commands, or the script an
    interpreter is given, each an existing regular file, shown read-only in the sandbox, which hides the
    home, ``/tmp`` and ``/run`` (nothing else there: a file the script reads stays hidden). Only the
    user's own entry: a repository's runs what the repository holds."""
    if line.scope != "user":
        return ()
    try:
        lexer = shlex.shlex(line.command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)[:MAX_WORDS]
    except ValueError:
        return ()
    home = Path.home()
    found: list[Path] = []
    program = True  # the next word names what runs
    for word in words:
        if word and set(word) <= set(";&|()"):
            program = True
            continue
        if not program or word.startswith("-"):
            continue
        named = _HOME_PATH.match(word)
        path = home / named.group(1).lstrip("/") if named else Path(word)
        if path.is_absolute() and path.is_file() and not path.is_symlink():
            found.append(Path(os.path.realpath(path)))
        program = Path(word).name in INTERPRETERS
    return tuple(dict.fromkeys(found))


def display_name(model: str) -> str:
    """A model's id as Claude Code names it in ``model.display_name``: ``claude-opus-4-1-20250805`` is
    ``Opus 4.1``; an id of another form is itself."""
    named = re.fullmatch(r"claude-([a-z]+)-(\d+)(?:-(\d))?(?:-\d{8}|-latest)?", model)
    if named is None:
        return model
    family, major, minor = named.groups()
    return f"{family.capitalize()} {major}{f'.{minor}' if minor else ''}"


@dataclass(frozen=True)
class RunFacts:
    """What the status line's input is made of, read from a run (``teamrt.tui.statusline``)."""

    run_id: str
    project: Path
    model: str
    cost_usd: float
    duration_ms: int
    input_tokens: int
    output_tokens: int
    context_window: int | None
    version: str
    teamrt: Mapping[str, Any]


def status_input(facts: RunFacts) -> dict[str, Any]:
    """Claude Code's status line input, filled from ``facts``. ``transcript_path``, lines added and
    removed, the API's own duration and ``exceeds_200k_tokens`` are left out (teamrt keeps no transcript
    file, counts no lines, and the TUI does not see the lead's last request); the current context use is
    null, as Claude Code sends it before its first answer."""
    project = str(facts.project)
    return {
        "hook_event_name": "Status",
        "session_id": facts.run_id,
        "cwd": project,
        "model": {"id": facts.model, "display_name": display_name(facts.model)},
        "workspace": {"current_dir": project, "project_dir": project, "added_dirs": []},
        "version": facts.version,
        "output_style": {"name": "default"},
        "cost": {"total_cost_usd": round(facts.cost_usd, 6), "total_duration_ms": facts.duration_ms},
        "context_window": {
            "total_input_tokens": facts.input_tokens,
            "total_output_tokens": facts.output_tokens,
            "context_window_size": facts.context_window,
            "used_percentage": None,
            "remaining_percentage": None,
            "current_usage": None,
        },
        "teamrt": dict(facts.teamrt),
    }


async def run_status_line(
    line: StatusLine, payload: Mapping[str, Any], ctx: Confinement, *, sandbox: Sandbox | None = None
) -> Ran:
    """Run ``line``'s command with ``payload`` on stdin, as a hook runs (``run_hook``)."""
    return await run_hook(line.hook(), payload, ctx, sandbox=sandbox)
