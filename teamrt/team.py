"""Team files: a lead, the roles it may spawn, their models, budgets, limits and permission rules.

A team file is TOML. Every section and key is optional; an empty file is a
lead alone on the default model (``teamrt.models.default_model``). The
reference is ``docs/team-file.md``. A full example::

    [team]
    name = "research"             # default: the file's name without .toml
    model = "sim"                 # every role's model unless it names one (default: the default model)
    prompt = "Survey this repository and write REPORT.md"   # the default task; --prompt overrides it
    on_ask = "deny"               # who answers a permission ask no human answers: deny | allow
    ask_wait = 300                # seconds a human may take to answer an ask (teamrt answer) before
                                  # on_ask does (default 0: on_ask answers at once)
    budget_usd = 2.0              # the whole run
    budget_tokens = 2_000_000
    max_depth = 3                 # 1..3: how deep spawning nests below the lead (default 3)
    max_agents = 20               # agents in the run in all, the lead included (default 20)
    max_concurrent = 8            # agents running at once (default 8, or max_agents if that is less)
    effort = "high"               # every role's effort unless it sets one: low | medium | high | xhigh | max
    compact_at = 150_000          # compact an agent's context past this many input tokens
    thinking = "adaptive"         # "adaptive" | "off" | a budget of tokens (models that take a manual one)
    cache = "auto"                # the prompt cache's lifetime: auto (from the agent's waits) | 5m | 1h

    [lead]                        # the same keys as a role
    agent = "lead"                # the agent definition (default "lead")
    max_turns = 40

    [roles.researcher]            # the lead spawns by role name; agent defaults to the role name
    model = "sim"                 # default: [team] model
    budget_usd = 0.5              # each agent of this role
    budget_tokens = 500_000
    max_turns = 30

    [roles.critic]
    agent = "reviewer"
    permission_mode = "plan"      # default | acceptEdits | plan | dontAsk | auto | bypassPermissions
    effort = "medium"             # the keys above, for this role (default: [team]'s, else the built-in)

    [permissions]                 # rules for every agent, as in Claude Code's settings
    allow = ["Bash(pytest:*)", "Read"]
    deny = ["Bash(rm:*)"]
    ask = []

    [sandbox]                     # what agents' commands (bash, merge gates) may reach
    network = false               # true: commands reach the network (default: a network of their own)
    unconfined = false            # true: bash runs even without bubblewrap, unconfined (also --unconfined)
    env = ["GITHUB_TOKEN"]        # variables passed to commands beyond PATH, HOME, LANG, TERM and the like
    read = ["~/.pyenv"]           # places in the hidden home directories that commands may read
    max_processes = 256           # processes one command may have at once
    max_memory_mb = 4096          # memory of a command: its processes, /tmp and /dev/shm together
    max_file_mb = 1024            # largest file a command may write

    [web]                         # what WebFetch may reach and WebSearch return
    private_hosts = ["localhost:8000"]   # loopback or private hosts WebFetch may fetch (default: none)
    search_allowed_domains = ["docs.python.org"]   # WebSearch results only from these
    search_blocked_domains = []   # or: never from these (not both)

    [mcp]                         # what MCP servers may use (default: none of it)
    env = ["GITHUB_TOKEN"]        # variables a repository's .mcp.json may name as ${VAR}
    private_hosts = ["localhost:3000"]   # loopback or private hosts an HTTP MCP server may be at
    fetch_packages = ["@modelcontextprotocol/server-everything"]   # packages npx/uvx servers may download

    [mcp.servers.tracker]         # MCP servers for every agent, as .mcp.json writes them
    command = "tracker-mcp"       # stdio: command, args, env; or type = "http", url, headers
    args = ["--repo", "."]

    [merge]
    gates = ["pytest -q"]         # run on the integration branch before a worktree branch is merged
    gate_timeout = 600            # seconds each gate may take (default 600)
    integration_branch = "teamrt/integration"   # default: teamrt/<run>; must not exist when the run starts

Agents are looked up in ``scan_definitions(project)``. A role may not be named
``lead``, and role names become parts of agent names, so they follow the
mailbox's name rule. A team on ``sim`` stays offline: its roles may only name
``sim`` models, so a file written for the simulator never spends money by a
stray role (a team on a Claude model may still put a role on ``sim``).

Anything unknown or mistyped is an error, one line naming the file: a typo
must not be ignored silently.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
import stat
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teamrt.agents import AgentDefinition, choose_model, scan_definitions
from teamrt.errors import UserError
from teamrt.events import SUPERVISOR, USER
from teamrt.mailbox import is_name
from teamrt.models.catalog import DEFAULT_MODEL, EFFORT_LEVELS, ModelInfo, lookup, resolve
from teamrt.models.levers import (
    CACHE_SETTINGS,
    REPLY_TOKENS,
    compact_at_problem,
    effort_problem,
    off_with_effort_problem,
    thinking_problem,
)
from teamrt.models.pricing import price_table
from teamrt.models.registry import is_sim
from teamrt.sandbox.policy import SandboxPolicy, WebPolicy
from teamrt.settings import load_settings
from teamrt.tools.permissions import MODE_NAMES, Rule, RuleError, Rules

MAX_DEPTH = 3  # the deepest spawns may nest below the lead (depth 0)
LEAD = "lead"
RESERVED = (USER, SUPERVISOR)
"""Role names that would let an agent pass for a person or for the supervisor in the mail."""
ON_ASK = ("deny", "allow")

LEVER_KEYS = ("effort", "compact_at", "thinking", "cache")
"""What a role sets about its requests, and ``[team]`` for every role (``teamrt.models.levers``)."""
TEAM_KEYS = (
    "name",
    "model",
    "prompt",
    "on_ask",
    "ask_wait",
    "budget_tokens",
    "budget_usd",
    "max_depth",
    "max_agents",
    "max_concurrent",
    *LEVER_KEYS,
)
ROLE_KEYS = ("agent", "model", "budget_tokens", "budget_usd", "max_turns", "permission_mode", *LEVER_KEYS)
PERMISSION_KEYS = ("allow", "deny", "ask")
MERGE_KEYS = ("gates", "integration_branch", "gate_timeout")
SANDBOX_KEYS = ("network", "unconfined", "env", "read", "max_processes", "max_memory_mb", "max_file_mb")
WEB_KEYS = ("private_hosts", "search_allowed_domains", "search_blocked_domains")
MCP_KEYS = ("servers", "env", "private_hosts", "fetch_packages")
SECTIONS = ("team", "lead", "roles", "permissions", "merge", "sandbox", "web", "mcp")
MAX_BYTES = 1024 * 1024
"""A larger team file is refused unread."""
MOST = 10**12
"""The largest count or amount any key takes: past it a number is a mistake (and overflows the store)."""
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SECRET_VARIABLES = ("ANTHROPIC_", "TEAMRT_DB")
"""Never passed to commands: the model's credentials and the store's URL."""


@dataclass(frozen=True)
class Role:
    name: str
    """The role name the lead spawns by (``reviewer``); ``lead`` for the lead."""
    agent: str
    """The agent definition it uses."""
    model: str | None = None
    """None: the team's model."""
    budget_tokens: int | None = None
    budget_usd: float | None = None
    max_turns: int | None = None
    permission_mode: str | None = None
    """None: the definition's."""
    effort: str | None = None
    """``output_config.effort``; None: the agent file's, ``[team]``'s, a reviewer's, else the model's."""
    compact_at: int | None = None
    """Compact past this many input tokens; None: ``[team]``'s, else chosen from the model's prices."""
    thinking: str | int | None = None
    """``"adaptive"``, ``"off"`` or a manual budget; None: ``[team]``'s, else the model's default."""
    cache: str | None = None
    """``auto``, ``5m`` or ``1h``; None: ``[team]``'s, else ``auto``."""


@dataclass(frozen=True, kw_only=True)
class Team:
    path: Path
    name: str
    lead: Role
    roles: dict[str, Role] = field(default_factory=dict)
    """The roles the lead may spawn, the lead not included."""
    prompt: str | None = None
    """The default task, overridden by ``--prompt``."""
    model: str = "sim"
    """"" when the file names none: ``teamrun`` puts the default model in before the run starts."""
    budget_tokens: int | None = None
    budget_usd: float | None = None
    max_depth: int = MAX_DEPTH
    max_agents: int = 20
    max_concurrent: int = 8
    on_ask: str = "deny"
    ask_wait: float = 0.0
    """Seconds a permission ask waits for a human's answer before ``on_ask`` answers it."""
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    ask: tuple[str, ...] = ()
    gates: tuple[str, ...] = ()
    """Merge-gate commands run for worktree agents' branches."""
    integration_branch: str | None = None
    """None: ``teamrt/<run>``."""
    gate_timeout: float = 600.0
    sandbox: SandboxPolicy = field(default_factory=SandboxPolicy)
    """What agents' commands may reach: network, environment, limits, running without bubblewrap."""
    web: WebPolicy = field(default_factory=WebPolicy)
    """What WebFetch may reach and WebSearch return."""
    mcp_servers: dict[str, dict[str, Any]] = field(default_factory=dict)
    """MCP servers every agent of the team may use, by name, as ``.mcp.json`` writes them."""
    mcp_env: tuple[str, ...] = ()
    """Variables a repository's MCP entries (``.mcp.json``, its agent files) may expand as ``${VAR}``."""
    mcp_private_hosts: tuple[str, ...] = ()
    """Hosts (``name`` or ``name:port``) on loopback or private addresses that HTTP MCP servers may be at."""
    mcp_fetch_packages: tuple[str, ...] = ()
    """Packages a server started by ``npx``, ``uvx`` ... may download: it gets the network and a package
    cache (``teamrt.mcp.launchers``)."""
    effort: str | None = None
    compact_at: int | None = None
    thinking: str | int | None = None
    cache: str | None = None
    """The defaults of ``Role``'s keys of the same names, for every role that sets none."""

    def lever(self, role: Role, key: str) -> Any:
        """``role``'s setting ``key`` (one of ``LEVER_KEYS``), else the team's; None when neither sets it."""
        value = getattr(role, key)
        return getattr(self, key) if value is None else value


class TeamFileError(UserError, ValueError):
    """A team file that cannot be used; the message is one line, ``<path>: <problem>``."""

    def __init__(self, path: Path, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}".replace("\r", "\\r").replace("\n", "\\n"))


def load_team(path: Path, *, project: Path) -> Team:
    """The team file at ``path``, its agents looked up among ``project``'s definitions.

    Raises ``TeamFileError``; an agent file that does not load is skipped (``scan_definitions``), so a
    role naming its agent has no definition.
    """
    raw = _parse(path)
    unknown = [key for key in raw if key not in SECTIONS]
    if unknown:
        raise TeamFileError(path, f"unknown {_listing(unknown, 'section')}{_hint(unknown, SECTIONS)}")
    team = _Table(path, "team", raw.get("team", {}), TEAM_KEYS)
    model = _model(team.text("model")) or ""
    lead = _role(path, LEAD, "lead", raw.get("lead", {}))
    roles = {name: _role(path, name, f"roles.{name}", table) for name, table in _roles(path, raw).items()}
    for role in (lead, *roles.values()):
        if is_sim(model) and role.model is not None and not is_sim(role.model):
            raise TeamFileError(
                path,
                f"[{_label(role)}] model {role.model!r} is not a sim model, and the team runs on {model!r};"
                " set [team] model to a Claude model to mix models",
            )
    settings: dict[str, Any] = {
        "prompt": team.text("prompt", multiline=True),
        "on_ask": team.choice("on_ask", ON_ASK),
        "ask_wait": team.seconds("ask_wait"),
        "budget_tokens": team.count("budget_tokens"),
        "budget_usd": team.dollars("budget_usd"),
        "max_depth": team.count("max_depth", most=MAX_DEPTH),
        "max_agents": team.count("max_agents"),
        "max_concurrent": team.count("max_concurrent"),
        **_levers(team),
    }
    permissions = _Table(path, "permissions", raw.get("permissions", {}), PERMISSION_KEYS)
    for kind in PERMISSION_KEYS:
        settings[kind] = permissions.rules(kind)
    merge = _Table(path, "merge", raw.get("merge", {}), MERGE_KEYS)
    settings["gates"] = merge.texts("gates")
    settings["integration_branch"] = merge.branch("integration_branch")
    timeout = merge.count("gate_timeout")
    settings["gate_timeout"] = None if timeout is None else float(timeout)
    settings["sandbox"] = _sandbox(path, raw.get("sandbox", {}))
    settings["web"] = _web(path, raw.get("web", {}))
    settings["mcp_servers"] = _mcp_servers(path, raw.get("mcp", {}))
    settings["mcp_env"], settings["mcp_private_hosts"] = _mcp_allowed(path, raw.get("mcp", {}))
    settings["mcp_fetch_packages"] = _mcp_fetch_packages(path, raw.get("mcp", {}))
    team_file = Team(  # an absent key keeps the dataclass's default
        path=path,
        name=team.text("name") or path.stem,
        model=model,
        lead=lead,
        roles=roles,
        **{key: value for key, value in settings.items() if value is not None},
    )
    if team_file.max_concurrent > team_file.max_agents:
        if settings["max_concurrent"] is not None:
            raise team.error(
                f"max_concurrent ({team_file.max_concurrent}) exceeds max_agents ({team_file.max_agents})"
            )
        team_file = dataclasses.replace(team_file, max_concurrent=team_file.max_agents)  # the default, capped

    scan = scan_definitions(project)
    for role in (lead, *roles.values()):
        if role.agent not in scan.definitions:
            known = ", ".join(sorted(scan.definitions))
            skipped = len(scan.skipped)
            why = f" ({skipped} agent file(s) did not load; teamrt agents says why)" if skipped else ""
            raise TeamFileError(
                path, f"[{_label(role)}] agent {role.agent!r} has no definition{why}; known: {known}"
            )
    _check_levers(team_file, scan.definitions, price_table(load_settings()))
    return team_file


def _model(name: str | None) -> str | None:
    """A model name as written, with Claude Code's aliases (``sonnet``) resolved."""
    return None if name is None else resolve(name)


def _parse(path: Path) -> dict[str, Any]:
    try:
        text = read_bytes(path).decode("utf-8")
    except FileNotFoundError:
        raise TeamFileError(path, "no such team file") from None
    except OSError as exc:
        raise TeamFileError(path, f"cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise TeamFileError(path, f"not UTF-8 text (byte {exc.start})") from exc
    try:
        return tomllib.loads(text.removeprefix("\ufeff"))
    except tomllib.TOMLDecodeError as exc:
        raise TeamFileError(path, f"TOML syntax error: {exc}") from exc
    except RecursionError:
        raise TeamFileError(path, "TOML nested too deeply") from None


def read_bytes(path: Path) -> bytes:
    """The file's bytes; a FIFO, device or directory is refused without blocking, and so is a huge file."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise TeamFileError(path, "not a regular file")
        if st.st_size > MAX_BYTES:
            raise TeamFileError(path, f"over {MAX_BYTES // 1024} KiB; a team file is a short TOML file")
        return f.read(MAX_BYTES + 1)


def _sandbox(path: Path, value: object) -> SandboxPolicy:
    table = _Table(path, "sandbox", value, SANDBOX_KEYS)
    default = SandboxPolicy()
    env = table.texts("env") or ()
    for name in env:
        if not _VARIABLE.fullmatch(name):
            raise table.error(f"env: {name!r} is not a variable name")
        if name.startswith(_SECRET_VARIABLES):
            raise table.error(f"env: {name} is never passed to agents' commands (credentials)")
    return SandboxPolicy(
        network=table.flag("network", default.network),
        unconfined=table.flag("unconfined", default.unconfined),
        env=env,
        read=table.texts("read") or (),
        max_processes=table.count("max_processes") or default.max_processes,
        max_memory_mb=table.count("max_memory_mb") or default.max_memory_mb,
        max_file_mb=table.count("max_file_mb") or default.max_file_mb,
    )


def _web(path: Path, value: object) -> WebPolicy:
    table = _Table(path, "web", value, WEB_KEYS)
    allowed = table.texts("search_allowed_domains") or ()
    blocked = table.texts("search_blocked_domains") or ()
    if allowed and blocked:
        raise table.error("set search_allowed_domains or search_blocked_domains, not both: the API takes one")
    return WebPolicy(
        private_hosts=table.texts("private_hosts") or (),
        search_allowed_domains=allowed,
        search_blocked_domains=blocked,
    )


def _mcp_servers(path: Path, value: object) -> dict[str, dict[str, Any]]:
    """``[mcp.servers.<name>]`` tables as written; each is checked as a ``.mcp.json`` entry is."""
    table = _Table(path, "mcp", value, MCP_KEYS)
    servers = table.values.get("servers", {})
    if not isinstance(servers, dict) or not all(isinstance(v, dict) for v in servers.values()):
        raise table.error("servers must be tables: [mcp.servers.<name>]")
    return dict(servers)


def _mcp_allowed(path: Path, value: object) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    """``[mcp] env`` (variables a repository's entries may expand) and ``[mcp] private_hosts``."""
    table = _Table(path, "mcp", value, MCP_KEYS)
    env = table.texts("env")
    for name in env or ():
        if not _VARIABLE.fullmatch(name):
            raise table.error(f"env: {name!r} is not a variable name")
        if name.startswith(_SECRET_VARIABLES):
            raise table.error(f"env: {name} is never passed to MCP servers (teamrt's own credentials)")
    return env, table.texts("private_hosts")


def _mcp_fetch_packages(path: Path, value: object) -> tuple[str, ...] | None:
    """``[mcp] fetch_packages``: package names, each checked (no wildcards: a grant of the network is for
    exactly the packages named)."""
    from teamrt.mcp.launchers import FetchEntryError, fetch_entry

    table = _Table(path, "mcp", value, MCP_KEYS)
    names = table.texts("fetch_packages")
    for name in names or ():
        try:
            fetch_entry(name)
        except FetchEntryError as e:
            raise table.error(str(e)) from None
    return names


def _roles(path: Path, raw: dict[str, Any]) -> dict[str, Any]:
    roles = raw.get("roles", {})
    if not isinstance(roles, dict):
        raise TeamFileError(path, f"'roles' must be a table of [roles.<name>] sections, not {_show(roles)}")
    for name in roles:
        if name == LEAD:
            raise TeamFileError(
                path, "[roles.lead]: the lead is not a role it can spawn; configure it in [lead]"
            )
        if name in RESERVED:
            raise TeamFileError(
                path, f"[roles.{name}]: teamrt's own mail is sent as {name!r}; pick another name"
            )
        if not is_name(name):
            raise TeamFileError(
                path,
                f"role name {name!r} must be 1-64 of lowercase letters, digits, '-' and '_',"
                " starting with a letter or digit",
            )
    return roles


def _role(path: Path, name: str, section: str, value: object) -> Role:
    table = _Table(path, section, value, ROLE_KEYS)
    return Role(
        name=name,
        agent=table.text("agent") or name,
        model=_model(table.text("model")),
        budget_tokens=table.count("budget_tokens"),
        budget_usd=table.dollars("budget_usd"),
        max_turns=table.count("max_turns"),
        permission_mode=table.choice("permission_mode", MODE_NAMES),
        **_levers(table),
    )


def _levers(table: _Table) -> dict[str, Any]:
    """The keys of ``LEVER_KEYS`` in ``table``, each checked as the API takes it (not yet against a model:
    ``_check_levers`` does that once the models are known)."""
    thinking = table.values.get("thinking")
    if thinking is not None:
        problem = thinking_problem(thinking, "", None)
        if problem is not None:
            raise table.error(problem)
    return {
        "effort": table.choice("effort", EFFORT_LEVELS),
        "compact_at": table.count("compact_at"),
        "thinking": thinking,
        "cache": table.choice("cache", CACHE_SETTINGS),
    }


def _check_levers(team: Team, definitions: dict[str, AgentDefinition], prices: dict[str, ModelInfo]) -> None:
    """Each role's effort, thinking and compaction trigger against the model it runs on (a model the team
    file names none for runs on the settings' default)."""
    default = team.model or resolve(load_settings().model.default or DEFAULT_MODEL)
    for role in (team.lead, *team.roles.values()):
        model = choose_model(role.model, definitions[role.agent], default)
        info = lookup(model, prices)
        thinking = team.lever(role, "thinking")
        reply = REPLY_TOKENS + (thinking if isinstance(thinking, int) else 0)
        for key in ("effort", "thinking", "compact_at"):
            value = team.lever(role, key)
            if value is None:
                continue
            problem = (
                effort_problem(value, model, info) if key == "effort"
                else thinking_problem(value, model, info) if key == "thinking"
                else compact_at_problem(value, model, info, reply)
            )  # fmt: skip
            if problem is not None:
                where = _label(role) if getattr(role, key) is not None else "team"
                raise TeamFileError(team.path, f"[{where}] {problem}")
        effort = team.lever(role, "effort")
        if (problem := off_with_effort_problem(thinking, effort, model, info)) is not None:
            raise TeamFileError(team.path, f"[{_label(role)}] {problem}")


def _label(role: Role) -> str:
    return LEAD if role.name == LEAD else f"roles.{role.name}"


class _Table:
    """One section's table; each getter returns None for a key that is absent."""

    def __init__(self, path: Path, section: str, value: object, keys: tuple[str, ...]) -> None:
        self.path, self.section = path, section
        if not isinstance(value, dict):
            raise TeamFileError(path, f"{section!r} must be a table ([{section}]), not {_show(value)}")
        unknown = [key for key in value if key not in keys]
        if unknown:
            raise self.error(f"unknown {_listing(unknown, 'key')}{_hint(unknown, keys)}")
        self.values: dict[str, Any] = value

    def error(self, problem: str) -> TeamFileError:
        return TeamFileError(self.path, f"[{self.section}] {problem}")

    def _wrong(self, key: str, expected: str) -> TeamFileError:
        return self.error(f"{key} must be {expected}, not {_show(self.values[key])}")

    def text(self, key: str, *, multiline: bool = False) -> str | None:
        value = self.values.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip() or (not multiline and "\n" in value):
            raise self._wrong(key, "a non-empty string" if multiline else "a non-empty one-line string")
        return value.strip()

    def choice(self, key: str, options: tuple[str, ...]) -> str | None:
        value = self.values.get(key)
        if value is not None and value not in options:
            raise self._wrong(key, f"one of {', '.join(options)}")
        return value

    def flag(self, key: str, default: bool) -> bool:
        value = self.values.get(key, default)
        if not isinstance(value, bool):
            raise self._wrong(key, "true or false")
        return value

    def count(self, key: str, *, most: int = MOST) -> int | None:
        value = self.values.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self._wrong(key, "a positive integer" if most == MOST else f"an integer from 1 to {most}")
        if value > most:
            raise self._wrong(key, f"at most {most:_}" if most == MOST else f"an integer from 1 to {most}")
        return value

    def dollars(self, key: str) -> float | None:
        value = self.values.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
            raise self._wrong(key, "a positive number of dollars")
        if value > MOST:
            raise self._wrong(key, f"at most {MOST:_} dollars")
        return float(value)

    def seconds(self, key: str) -> float | None:
        value = self.values.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
            raise self._wrong(key, "a number of seconds, 0 or more")
        if value > MOST:
            raise self._wrong(key, f"at most {MOST:_} seconds")
        return float(value)

    def texts(self, key: str) -> tuple[str, ...] | None:
        value = self.values.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise self._wrong(key, "a list of non-empty strings")
        return tuple(v.strip() for v in value)

    def rules(self, key: str) -> tuple[str, ...] | None:
        rules = self.texts(key)
        for rule in rules or ():
            try:
                Rules.parse(allow=(rule,)) if key == "allow" else Rule.parse(rule)  # no Spawn rule allows
            except RuleError as exc:
                raise self.error(f"{key}: {exc}") from exc
        return rules

    def branch(self, key: str) -> str | None:
        branch = self.text(key)
        if branch is not None and not _BRANCH.fullmatch(branch):
            raise self._wrong(key, "a git branch name")
        return branch


# git check-ref-format's rules, in short: no blanks, controls or ~^:?*[\, no '..', '@{', '//', '/.',
# no leading '-', '.' or '/', and no trailing '/', '.' or '.lock'.
_BRANCH = re.compile(r"(?![-./])(?!.*(?:\.\.|@\{|//|/\.))[^\x00-\x20\x7f~^:?*\[\\]+(?<![/.])(?<!\.lock)")


def _listing(names: list[str], what: str) -> str:
    return f"{what}{'s' if len(names) > 1 else ''} {', '.join(repr(name) for name in names)}"


def _hint(unknown: list[str], known: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(unknown[0], known, n=1)
    suggestion = f" (did you mean {close[0]!r}?)" if close else ""
    return f"{suggestion}; known: {', '.join(known)}"


def _show(value: object) -> str:
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def team_to_json(team: Team) -> dict[str, Any]:
    """The team as JSON, kept with the run so that a resume goes on with the team it started with."""
    data = dataclasses.asdict(team)
    data["path"] = str(team.path)
    return data


def team_from_json(data: dict[str, Any]) -> Team:
    fields = dict(data)
    fields["path"] = Path(fields["path"])
    fields["lead"] = Role(**fields["lead"])
    fields["roles"] = {name: Role(**role) for name, role in fields["roles"].items()}
    for key in ("allow", "deny", "ask", "gates"):
        fields[key] = tuple(fields[key])
    sandbox: dict[str, Any] = fields.get("sandbox") or {}  # absent in runs made before [sandbox] existed
    kept: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in sandbox.items()}
    fields["sandbox"] = SandboxPolicy(**kept)
    web: dict[str, Any] = fields.get("web") or {}  # absent in runs made before [web] existed
    fields["web"] = WebPolicy(**{k: tuple(v) for k, v in web.items()})
    fields.setdefault("mcp_servers", {})
    for key in ("mcp_env", "mcp_private_hosts", "mcp_fetch_packages"):  # absent in runs made before them
        fields[key] = tuple(fields.get(key) or ())
    return Team(**fields)
