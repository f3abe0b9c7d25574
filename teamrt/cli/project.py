"""``teamrt agents``, ``mcp`` and ``trust``: what this repository's runs would load, and the person's trust.

``agents`` lists the agent definitions that load here (``teamrt.agents``), ``mcp`` the MCP servers
a run may start (``teamrt.mcp.listing``). ``trust`` shows exactly what came with the repository (its
hooks, MCP servers and allow rules), asks, then records its hash (``teamrt.claudecode.trust``);
``trust --list`` says of each recorded trust whether it still holds (``trust_state``), which needs the
repository's MCP servers as ``teamrt.mcp.config`` reads them: that is why it lives here, above both.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from teamrt import home
from teamrt.agents import AgentDefinition, load_definitions, one_line, role_name, scan_definitions
from teamrt.claudecode import trust
from teamrt.claudecode.hooks import HookSet, parse_hooks
from teamrt.claudecode.settings import SettingsFile, read_settings
from teamrt.claudecode.skills import SkillError, repository_skills, skills_digest
from teamrt.claudecode.skills import trust_report as skills_report
from teamrt.cli.output import EXIT_FAILED, print_json
from teamrt.mcp import listing
from teamrt.mcp.config import load_mcp_config, mcp_allowed, repository_servers
from teamrt.runtime.teamrun import team_file_of
from teamrt.store import open_reader
from teamrt.team import load_team, team_from_json
from teamrt.terminal import clean_line


def handle(args: argparse.Namespace) -> int:
    if args.command == "agents":
        return _list_agents(args.json)
    if args.command == "trust":
        return _trust(args)
    return _mcp(args)


def _list_agents(as_json: bool = False) -> int:
    """``agents``: what ``scan_definitions`` finds for this repository, as text or one JSON object."""
    project = home.project_root()
    scan = scan_definitions(project)

    def where(source: str) -> str:
        path = Path(source)
        return one_line(str(path.relative_to(project)) if path.is_relative_to(project) else source)

    def tools(names: tuple[str, ...] | None) -> str:
        return "all" if names is None else ", ".join(names) or "none"

    if as_json:
        print_json({
            "project": str(project),
            "agents": [
                {"name": d.name, "role": role_name(d.name), "scope": d.scope, "path": d.source,
                 "description": d.description, "model": d.model, "tools": d.tools,
                 "disallowed_tools": d.disallowed_tools, "permission_mode": d.permission_mode,
                 "max_turns": d.max_turns, "warnings": d.warnings}
                for d in scan.definitions.values()
            ],
            "overridden": [{"name": d.name, "scope": d.scope, "path": d.source} for d in scan.overridden],
            "skipped": scan.skipped,
            "warnings": scan.warnings,
        })  # fmt: skip
        return 0

    def row(d: AgentDefinition) -> tuple[str, ...]:
        refused = f" (not {', '.join(d.disallowed_tools)})" if d.disallowed_tools else ""
        return d.name, d.scope, one_line(d.model or "inherit"), tools(d.tools) + refused, where(d.source)

    # a repository's agent files are someone else's text: every cell made safe for a terminal, then aligned
    rows = [("agent", "scope", "model", "tools", "file"), *map(row, scan.definitions.values())]
    rows = [tuple(clean_line(cell) for cell in r) for r in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        line = "  ".join(f"{cell:{width}}" for cell, width in zip(r, widths, strict=False)) + f"  {r[-1]}"
        print(clean_line(line))
    replaced = [f"{d.name} ({d.scope}): {where(d.source)}" for d in scan.overridden]
    loaded = [line for d in scan.definitions.values() for line in d.warnings]
    sections = (
        ("replaced by a later definition", replaced),
        ("warnings", [*scan.notes, *loaded]),
        ("skipped, did not load", list(scan.skipped)),
    )
    for title, lines in sections:
        if lines:
            print(f"\n{title}:")
            print(*(f"  {clean_line(line)}" for line in lines), sep="\n")
    return 0


def _trust(args: argparse.Namespace) -> int:
    """``trust``: record (or revoke, or list) the person's trust in the repository's hooks, MCP servers
    and allow rules. What it would trust is shown, escaped, before anything is recorded; a file that
    cannot be read exactly (a duplicate JSON key) is refused in one line, and nothing recorded."""
    if args.list:
        entries = sorted(trust.trusted_projects().values(), key=lambda t: t.project)
        for entry in entries:
            line = f"{entry.project}  trusted {entry.trusted_at}: {trust_state(entry)}"
            print(clean_line(line))
        if not entries:
            print("no repository is trusted (teamrt trust in one trusts what came with it)")
        return 0
    project = home.project_root()
    if args.revoke:
        said = "no longer trusts" if trust.revoke(project) else "had no trust recorded for"
        print(clean_line(f"teamrt {said} the hooks, MCP servers, allow rules and skills of {project}"))
        return 0
    return _trust_project(project, yes=args.yes)


def _trust_project(project: Path, *, yes: bool) -> int:
    """Show what ``project`` would have trusted, ask (in a terminal, unless ``yes``), then record it."""
    read = read_settings(project)
    files = list(read.files)
    problems: list[str] = [lost.why for lost in read.left_out if lost.scope != "user"]
    problems += [
        f"{f.path}: names {', '.join(json.dumps(k) for k in f.duplicates)} twice in one object: its text may"
        " show another value than the one that counts; name each key once"
        for f in files
        if f.repository and f.duplicates
    ]
    servers = repository_servers(project, load_definitions(project).values(), problems)
    try:
        skill_folders, skills = repository_skills(project), skills_digest(project)
    except SkillError as e:
        problems.append(str(e))
    if problems:  # trusting what could not be read whole would trust something else than it shows
        for problem in problems:
            print(clean_line(f"teamrt: {problem}"), file=sys.stderr)
        print("teamrt: nothing trusted; fix the files above, then run teamrt trust again", file=sys.stderr)
        return EXIT_FAILED
    digest, mcp, allow = trust.hooks_digest(files), trust.mcp_digest(servers), trust.allow_digest(files)
    if digest is None and mcp is None and allow is None and skills is None:
        print(clean_line(
            f"nothing to trust: {project}/.claude/settings.json and settings.local.json have no hooks,"
            " statusLine or allow rules, and the project has no MCP servers (.mcp.json, agent files'"
            " mcpServers) or skills (.claude/skills)"
        ))  # fmt: skip
        return 0
    parsed = _every_hook(files)
    for problem in parsed.problems:
        print(clean_line(f"teamrt: warning: {problem}"), file=sys.stderr)
    print(*_trust_report(project, files, parsed, servers), *skills_report(project, skill_folders), sep="\n",
          flush=True)  # fmt: skip
    if not yes and sys.stdin is not None and sys.stdin.isatty():
        try:
            answer = input("Trust all of the above as it is now? [y/N] ").strip().lower()
        except (EOFError, KeyboardInterrupt):
            answer = ""
        if answer not in ("y", "yes"):
            print("nothing trusted")
            return EXIT_FAILED
    trust.trust(project, digest, mcp, allow, skills)
    where = clean_line(str(project))
    recorded_now = (("hooks", digest), ("MCP servers", mcp), ("allow rules", allow), ("skills", skills))
    for what, recorded in recorded_now:
        if recorded is not None:
            print(f"teamrt trusts the {what} of {where} as they are now")
    print("A change to them stops them until you trust them again; teamrt trust --revoke takes this back.")
    return 0


def trust_state(entry: trust.Trusted) -> str:
    """Whether a recorded trust holds now: ``in force`` (the hooks are as trusted), ``lapsed`` (they
    changed, so they do not run), ``no hooks now``, ``project gone`` or ``unreadable: <why>``; then the
    same of its MCP servers, after ``; MCP servers``."""
    project = Path(entry.project)
    if not project.is_dir():
        return "project gone"
    read = read_settings(project)
    if read.left_out:
        return f"unreadable: {read.left_out[0].why}"
    files = list(read.files)
    digest = trust.hooks_digest(files)
    hooks = "no hooks now" if digest is None else "in force" if digest == entry.hooks_sha256 else "lapsed"
    mcp = trust.mcp_digest(repository_servers(project, load_definitions(project).values(), []))
    state = hooks
    if mcp is not None or entry.mcp_sha256 is not None:
        state += f"; MCP servers {_state(mcp, entry.mcp_sha256)}"
    allow = trust.allow_digest(files)
    if allow is not None or entry.allow_sha256 is not None:
        state += f"; allow rules {_state(allow, entry.allow_sha256)}"
    try:
        skills: str | None = skills_digest(project)
    except SkillError as e:
        return f"{state}; skills unreadable: {e}"
    if skills is not None or entry.skills_sha256 is not None:
        state += f"; skills {_state(skills, entry.skills_sha256)}"
    return state


def _state(now: str | None, trusted: str | None) -> str:
    if now is None:
        return "none now"
    return "not trusted" if trusted is None else "in force" if now == trusted else "lapsed"


def _mcp(args: argparse.Namespace) -> int:
    """``mcp``: the configured MCP servers (``teamrt.mcp.listing``), their state in a run, their tools."""
    project = home.project_root()
    events = None
    if args.run is not None:
        run_dir = home.existing_run_dir(args.run)
        reader = open_reader(run_dir, args.run)
        try:
            run, events = reader.run(), reader.events()
        finally:
            reader.close()
        project = Path(run.workdir)
        team = team_from_json(run.settings["team"]) if "team" in run.settings else None
    else:
        run_dir = home.runs_path() / "mcp-listing"
        team = load_team(team_file_of(project), project=project)
    servers = team.mcp_servers if team is not None else {}
    source = str(team.path) if team is not None else "team file"
    allowed_env, private_hosts = mcp_allowed(team)
    config = load_mcp_config(
        project, servers, load_definitions(project).values(), team_source=source,
        allowed_env=allowed_env, private_hosts=private_hosts,
    )  # fmt: skip
    tools = None
    if args.tools or args.prompts:  # both start the servers; --prompts lists the person's /mcp__ commands
        policy = team.sandbox if team is not None else None
        context = listing.listing_context(project, run_dir, policy)
        tools = listing.list_servers(config, context, tools=args.tools, prompts=args.prompts)
    print("\n".join(listing.describe(config, events=events, tools=tools)))
    return 0


def _every_hook(files: Sequence[SettingsFile]) -> HookSet:
    """The hooks of ``files`` as ``parse_hooks`` reads them, but with ``disableAllHooks`` ignored: what
    ``teamrt trust`` shows must be every hook its hash covers, not only those on now (a later change to
    ``disableAllHooks`` alone would otherwise turn on hooks no one was shown). Setup hooks among them:
    ``teamrt init`` runs them."""
    return parse_hooks(
        [
            dataclasses.replace(f, data={k: v for k, v in f.data.items() if k != "disableAllHooks"})
            for f in files
        ],
        setup=True,
    )


def _trust_report(
    project: Path, files: Sequence[SettingsFile], hooks: HookSet, servers: Mapping[str, Any]
) -> list[str]:
    """What ``teamrt trust`` would trust in ``project``, a line each, shown before it records anything:
    the repository's hooks with their exact commands, its MCP servers' entries as written, the plugins its
    settings enable, and its settings' allow rules. Empty when there is nothing to trust."""
    lines: list[str] = []
    controls: list[bool] = []

    def show(text: str) -> str:
        controls.append(trust.CONTROL.search(text) is not None)
        return trust.visible(text)

    where = trust.visible(str(project))
    repository_hooks = hooks.scoped(*trust.REPOSITORY_SCOPES).hooks
    if repository_hooks:
        lines.append(f"The hooks of {where}, which would run in its runs:")
        for hook in repository_hooks:
            on = f" [{show(hook.matcher)}]" if hook.matcher else ""
            command = "\n    ".join(show(hook.command.strip()).splitlines())
            lines.append(f"  {hook.event}{on} ({hook.scope}): {command}")
    entries = [(name, place, server) for place, kept in servers.items()
               for written in (kept if isinstance(kept, list) else [kept]) if isinstance(written, dict)
               for name, server in written.items()]  # fmt: skip
    if entries:
        lines.append(f"The MCP servers of {where}, which could start in its runs:")
        for name, place, server in entries:
            entry = show(json.dumps(server, ensure_ascii=False, sort_keys=True))
            lines.append(f"  {show(str(name))} ({show(place)}): {entry}")
    for scope, status_line in trust.repository_status_lines(files).items():
        runs = status_line.get("command") if isinstance(status_line, dict) else None
        said = runs.strip() if isinstance(runs, str) else json.dumps(status_line, ensure_ascii=False)
        lines.append(f"The status line of {where}'s settings ({scope}), which teamrt tui runs: {show(said)}")
    plugins = trust.repository_plugins(files)
    if plugins:
        lines.append(f"The plugins {where}'s settings enable, whose hooks, MCP servers and skills would run:")
        lines += [f"  {show(plugin)}" for plugin in plugins]
    allowing = [(f.scope, rule) for f in files if f.repository for rule in trust.repository_allow(f)]
    if allowing:
        lines.append(f"The allow rules of {where}'s settings, which would grant their permission:")
        lines += [f"  {show(json.dumps(rule, ensure_ascii=False))} ({scope})" for scope, rule in allowing]
    if any(controls):
        lines.append(
            "Note: some of the above hold control characters (escape sequences, bidi overrides), written"
            " here as \\x.. or \\u....: read them with care"
        )
    return lines
