"""Team files: the documented example, defaults, the example teams, and every kind of broken file."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from teamrt import team as teamfile
from teamrt.sandbox.policy import SandboxPolicy, WebPolicy
from teamrt.team import (
    Role,
    Team,
    TeamFileError,
    load_team,
    team_from_json,
    team_to_json,
)
from teamrt.tools.permissions import Permissions

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BUILTINS = "coder, lead, researcher, reviewer"


def write(tmp_path: Path, text: str, name: str = "team.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def load(tmp_path: Path, text: str) -> Team:
    return load_team(write(tmp_path, text), project=tmp_path)


def error(tmp_path: Path, text: str | bytes, name: str = "team.toml") -> str:
    """The one-line message for a team file holding ``text``; it starts with the file's path."""
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    with pytest.raises(TeamFileError) as caught:
        load_team(path, project=tmp_path)
    message = str(caught.value)
    assert "\n" not in message and "\r" not in message
    assert caught.value.path == path
    assert message == f"{path}: {caught.value.problem}".replace("\n", "\\n")
    return caught.value.problem


def documented_example() -> str:
    """The full example in the module's docstring, so the documentation cannot drift from the code."""
    doc = teamfile.__doc__ or ""
    return textwrap.dedent(doc.split("::\n", 1)[1].split("\nAgents are looked up", 1)[0])


def test_documented_example_round_trip(tmp_path: Path) -> None:
    team = load(tmp_path, documented_example())
    assert team == Team(
        path=tmp_path / "team.toml",
        name="research",
        prompt="Survey this repository and write REPORT.md",
        model="sim",
        lead=Role("lead", "lead", None, None, None, 40, None),
        roles={
            "researcher": Role("researcher", "researcher", "sim", 500_000, 0.5, 30, None),
            "critic": Role("critic", "reviewer", None, None, None, None, "plan", effort="medium"),
        },
        effort="high",
        compact_at=150_000,
        thinking="adaptive",
        cache="auto",
        budget_tokens=2_000_000,
        budget_usd=2.0,
        max_depth=3,
        max_agents=20,
        max_concurrent=8,
        on_ask="deny",
        ask_wait=300.0,
        allow=("Bash(pytest:*)", "Read"),
        deny=("Bash(rm:*)",),
        ask=(),
        gates=("pytest -q",),
        gate_timeout=600.0,
        integration_branch="teamrt/integration",
        sandbox=SandboxPolicy(env=("GITHUB_TOKEN",), read=("~/.pyenv",)),
        web=WebPolicy(private_hosts=("localhost:8000",), search_allowed_domains=("docs.python.org",)),
        mcp_servers={"tracker": {"command": "tracker-mcp", "args": ["--repo", "."]}},
        mcp_env=("GITHUB_TOKEN",),
        mcp_private_hosts=("localhost:3000",),
        mcp_fetch_packages=("@modelcontextprotocol/server-everything",),
    )
    assert list(team.roles) == ["researcher", "critic"]
    Permissions(team.roles["critic"].permission_mode or "default", allow=team.allow, deny=team.deny)


def test_an_empty_file_is_a_lead_alone_on_the_default_model(tmp_path: Path) -> None:
    team = load_team(write(tmp_path, "", "solo.toml"), project=tmp_path)
    assert team == Team(
        path=tmp_path / "solo.toml",
        name="solo",
        model="",  # named by none: the run puts in the default model (teamrt.models.default_model)
        lead=Role("lead", "lead", None, None, None, None, None),
    )
    assert (team.model, team.prompt, team.roles, team.on_ask) == ("", None, {}, "deny")
    assert (team.max_depth, team.max_agents, team.max_concurrent) == (3, 20, 8)
    assert (team.budget_tokens, team.budget_usd, team.integration_branch) == (None, None, None)
    assert team.allow == team.deny == team.ask == team.gates == ()


def test_role_defaults_and_whole_dollars(tmp_path: Path) -> None:
    team = load(tmp_path, '[team]\nmodel = "sim:claude-haiku-4-5"\nbudget_usd = 3\n[roles.coder]\n[roles]\n')
    assert team.roles == {"coder": Role("coder", "coder", None, None, None, None, None)}
    assert team.budget_usd == 3.0 and isinstance(team.budget_usd, float)


def test_max_concurrent_follows_a_smaller_max_agents(tmp_path: Path) -> None:
    assert load(tmp_path, "[team]\nmax_agents = 3\n").max_concurrent == 3
    assert "max_concurrent (4) exceeds max_agents (3)" in error(
        tmp_path, "[team]\nmax_agents = 3\nmax_concurrent = 4\n"
    )


def test_a_role_may_use_a_project_agent(tmp_path: Path) -> None:
    agents = tmp_path / ".teamrt" / "agents"
    agents.mkdir(parents=True)
    (agents / "critic.md").write_text("---\nname: critic\ndescription: Critic.\n---\nCriticise.\n")
    assert load(tmp_path, "[roles.critic]\n").roles["critic"].agent == "critic"
    (agents / "broken.md").write_text("no front matter\n")
    assert load(tmp_path, "[roles.critic]\n").roles["critic"].agent == "critic", "a broken file is skipped"
    (agents / "critic.md").write_text("---\nname: critic\n---\nNo description.\n")
    assert "agent 'critic' has no definition (2 agent file(s) did not load; teamrt agents says why)" in error(
        tmp_path, "[roles.critic]\n"
    )


def test_a_claude_team_may_put_a_role_on_sim(tmp_path: Path) -> None:
    team = load(tmp_path, '[team]\nmodel = "claude-sonnet-5-5"\n[roles.researcher]\nmodel = "sim"\n')
    assert (team.model, team.roles["researcher"].model) == ("claude-sonnet-5-5", "sim")


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*/team.toml")), ids=lambda path: path.parent.name)
def test_example_teams_load(path: Path, tmp_path: Path) -> None:
    team = load_team(path, project=tmp_path)
    assert f"{team.name}-team" == path.parent.name and team.model == "sim" and team.prompt
    assert team.budget_usd is not None and team.budget_usd <= 3
    assert "reviewer" in team.roles
    Permissions(allow=team.allow, deny=team.deny, ask=team.ask)


def test_both_example_teams_exist(tmp_path: Path) -> None:
    assert sorted(p.parent.name for p in EXAMPLES.glob("*/team.toml")) == ["coding-team", "research-team"]
    research = load_team(EXAMPLES / "research-team" / "team.toml", project=tmp_path)
    assert set(research.roles) == {"reviewer"}, "its researchers are forks of the lead"
    coding = load_team(EXAMPLES / "coding-team" / "team.toml", project=tmp_path)
    assert set(coding.roles) == {"coder", "reviewer"}
    assert coding.gates == ("python3 -m unittest -q",)
    assert {"Bash(python3 -m unittest:*)", "Bash(git diff:*)"} <= set(coding.allow)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            "[teams]\n",
            "unknown section 'teams' (did you mean 'team'?); known: team, lead, roles, permissions, merge",
        ),
        ('model = "sim"\n[merj]\n', "unknown sections 'model', 'merj'"),
        (
            '[team]\nmodle = "sim"\n',
            "[team] unknown key 'modle' (did you mean 'model'?); known: name, model,",
        ),
        ("[lead]\nturns = 3\nbudget = 1\n", "[lead] unknown keys 'turns', 'budget'"),
        ("[roles.researcher]\nbudget_dollars = 1\n", "[roles.researcher] unknown key 'budget_dollars' (did"),
        ("[permissions]\nallowed = []\n", "[permissions] unknown key 'allowed' (did you mean 'allow'?)"),
        ("[merge]\ngate = []\n", "[merge] unknown key 'gate' (did you mean 'gates'?)"),
        ("[merge]\ngate_timeout = 0\n", "[merge] gate_timeout must be a positive integer, not 0"),
        ("[roles.researcher.extra]\n", "[roles.researcher] unknown key 'extra'"),
    ],
)
def test_unknown_sections_and_keys(tmp_path: Path, text: str, problem: str) -> None:
    assert error(tmp_path, text).startswith(problem)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("team = 3\n", "'team' must be a table ([team]), not 3"),
        ("roles = 3\n", "'roles' must be a table of [roles.<name>] sections, not 3"),
        ("[roles]\nresearcher = 1\n", "'roles.researcher' must be a table ([roles.researcher]), not 1"),
        ("[team]\nmodel = 3\n", "[team] model must be a non-empty one-line string, not 3"),
        ('[team]\nname = "  "\n', "[team] name must be a non-empty one-line string, not '  '"),
        ('[team]\nname = "a\\nb"\n', "[team] name must be a non-empty one-line string, not 'a\\nb'"),
        ("[team]\nprompt = []\n", "[team] prompt must be a non-empty string, not []"),
        ('[team]\non_ask = "ask"\n', "[team] on_ask must be one of deny, allow, not 'ask'"),
        ('[team]\nbudget_usd = "2"\n', "[team] budget_usd must be a positive number of dollars, not '2'"),
        ("[team]\nbudget_usd = 0\n", "[team] budget_usd must be a positive number of dollars, not 0"),
        ("[team]\nbudget_usd = nan\n", "[team] budget_usd must be a positive number of dollars, not nan"),
        ("[team]\nbudget_usd = inf\n", "[team] budget_usd must be a positive number of dollars, not inf"),
        ("[team]\nbudget_tokens = -1\n", "[team] budget_tokens must be a positive integer, not -1"),
        ("[team]\nmax_agents = 0\n", "[team] max_agents must be a positive integer, not 0"),
        ("[team]\nmax_concurrent = true\n", "[team] max_concurrent must be a positive integer, not True"),
        ("[team]\nmax_depth = 4\n", "[team] max_depth must be an integer from 1 to 3, not 4"),
        ("[team]\nmax_depth = 0\n", "[team] max_depth must be an integer from 1 to 3, not 0"),
        ("[lead]\nmax_turns = 1.5\n", "[lead] max_turns must be a positive integer, not 1.5"),
        ("[lead]\nagent = 1\n", "[lead] agent must be a non-empty one-line string, not 1"),
        (
            '[roles.coder]\npermission_mode = "yolo"\n',
            "[roles.coder] permission_mode must be one of default,",
        ),
        (
            '[permissions]\nallow = "Read"\n',
            "[permissions] allow must be a list of non-empty strings, not 'Read'",
        ),
        (
            '[merge]\ngates = ["pytest", ""]\n',
            "[merge] gates must be a list of non-empty strings, not ['pytest',",
        ),
    ],
)
def test_wrong_types_name_the_key_and_what_it_takes(tmp_path: Path, text: str, problem: str) -> None:
    assert error(tmp_path, text).startswith(problem)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[roles.Reviewer]\n", "role name 'Reviewer' must be 1-64 of lowercase letters"),
        ('[roles."a.b"]\n', "role name 'a.b' must be 1-64"),
        ('[roles."../x"]\n', "role name '../x' must be 1-64"),
        ("[roles.lead]\n", "[roles.lead]: the lead is not a role it can spawn; configure it in [lead]"),
        ("[roles.critic]\n", f"[roles.critic] agent 'critic' has no definition; known: {BUILTINS}"),
        ('[lead]\nagent = "boss"\n', f"[lead] agent 'boss' has no definition; known: {BUILTINS}"),
        (
            '[team]\nmodel = "sim"\n[roles.coder]\nmodel = "claude-sonnet-5-5"\n',
            "[roles.coder] model 'claude-sonnet-5-5' is not a sim model, and the team runs on 'sim';",
        ),
        (
            '[team]\nmodel = "sim"\n[lead]\nmodel = "claude-opus-4-7"\n',
            "[lead] model 'claude-opus-4-7' is not a sim model",
        ),
    ],
)
def test_bad_roles(tmp_path: Path, text: str, problem: str) -> None:
    assert error(tmp_path, text).startswith(problem)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('allow = ["Bash(pytest"]', 'allow: bad permission rule "Bash(pytest": unbalanced parentheses'),
        ('deny = ["Fetch(x)"]', 'deny: bad permission rule "Fetch(x)": only Bash, the file tools'),
        ('ask = ["Bash(a && b)"]', 'ask: bad permission rule "Bash(a && b)": a Bash rule matches one'),
        ('allow = ["Read", "Edit()"]', 'allow: bad permission rule "Edit()": empty parentheses'),
    ],
)
def test_bad_permission_rules(tmp_path: Path, text: str, problem: str) -> None:
    assert error(tmp_path, f"[permissions]\n{text}\n").startswith(f"[permissions] {problem}")


@pytest.mark.parametrize(
    "branch", ["a..b", "-x", "a b", "x.lock", "x/", ".x", "a/.b", "a:b", "a@{1}", "a//b"]
)
def test_bad_integration_branch(tmp_path: Path, branch: str) -> None:
    problem = error(tmp_path, f"[merge]\nintegration_branch = {branch!r}\n")
    assert problem.startswith(f"[merge] integration_branch must be a git branch name, not {branch!r}")


def test_unreadable_files(tmp_path: Path) -> None:
    for path, problem in [
        (tmp_path / "gone.toml", "no such team file"),
        (tmp_path, "cannot read: Is a directory"),
    ]:
        with pytest.raises(TeamFileError) as caught:
            load_team(path, project=tmp_path)
        assert str(caught.value) == f"{path}: {problem}"
    assert error(tmp_path, b"[team]\nname = '\xff'\n") == "not UTF-8 text (byte 15)"


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("[team]\nname = \n", "line 2, column 8"),
        ('[team]\nname = "a"\nname = "b"\n', "line 3"),
        ("[team]\nmax_depth = 2\n[team]\n", "line 3"),
    ],
)
def test_toml_syntax_errors_give_line_and_column(tmp_path: Path, text: str, where: str) -> None:
    problem = error(tmp_path, text)
    assert problem.startswith("TOML syntax error: ") and where in problem


@pytest.mark.hostile
def test_a_hostile_file_name_stays_on_one_line(tmp_path: Path) -> None:
    assert error(tmp_path, "[teams]\n", name="a\nb.toml").startswith("unknown section 'teams'")


# -- [sandbox] ---------------------------------------------------------------------


def test_the_sandbox_section_sets_the_policy(tmp_path: Path) -> None:
    team = load(
        tmp_path,
        "[sandbox]\nnetwork = true\nunconfined = true\nenv = ['GITHUB_TOKEN']\nmax_processes = 64\n",
    )
    assert team.sandbox == SandboxPolicy(
        network=True, unconfined=True, env=("GITHUB_TOKEN",), max_processes=64
    )
    assert load(tmp_path, "").sandbox == SandboxPolicy()
    assert team_from_json(json.loads(json.dumps(team_to_json(team)))) == team


def test_a_run_kept_before_the_sandbox_section_resumes_with_the_defaults(tmp_path: Path) -> None:
    kept = team_to_json(load(tmp_path, ""))
    del kept["sandbox"]
    assert team_from_json(kept).sandbox == SandboxPolicy()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[sandbox]\nnetwork = 1\n", "[sandbox] network must be true or false, not 1"),
        ("[sandbox]\nenv = ['A B']\n", "[sandbox] env: 'A B' is not a variable name"),
        ("[sandbox]\nenv = ['ANTHROPIC_API_KEY']\n", "[sandbox] env: ANTHROPIC_API_KEY is never passed"),
        ("[sandbox]\nenv = ['TEAMRT_DB']\n", "[sandbox] env: TEAMRT_DB is never passed"),
        ("[sandbox]\nmax_processes = 0\n", "[sandbox] max_processes must be a positive integer, not 0"),
        ("[sandbox]\nnet = true\n", "[sandbox] unknown key 'net' (did you mean 'network'?)"),
    ],
)
def test_a_bad_sandbox_section_is_one_line(tmp_path: Path, text: str, problem: str) -> None:
    assert error(tmp_path, text).startswith(problem)


# -- hostile team files: one line each, nothing half made ----------------------------------


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("x = " + "[" * 5000 + "]" * 5000 + "\n", "TOML nested too deeply"),
        ("x = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n", "TOML nested too deeply"),
        (f"[team]\nbudget_usd = {10**400}\n", "[team] budget_usd must be at most 1_000_000_000_000 dollars"),
        (f"[team]\nbudget_usd = {10**18}\n", "[team] budget_usd must be at most 1_000_000_000_000 dollars"),
        (f"[team]\nbudget_tokens = {2**63}\n", "[team] budget_tokens must be at most 1_000_000_000_000"),
        (f"[team]\nmax_agents = {10**15}\n", "[team] max_agents must be at most"),
        (f"[lead]\nmax_turns = {2**64}\n", "[lead] max_turns must be at most"),
        (f"[team]\nask_wait = {10**300}\n", "[team] ask_wait must be at most"),
        (f"[merge]\ngate_timeout = {2**70}\n", "[merge] gate_timeout must be at most"),
        ("[sandbox]\nmax_memory_mb = 1e400\n", "[sandbox] max_memory_mb must be a positive integer, not inf"),
    ],
    ids=lambda value: value.split("\n")[-2][:24] if isinstance(value, str) and "\n" in value else "",
)
@pytest.mark.hostile
def test_hostile_contents_end_in_one_line(tmp_path: Path, text: str, problem: str) -> None:
    assert error(tmp_path, text).startswith(problem)


@pytest.mark.hostile
def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "team.toml"
    os.mkfifo(fifo)
    with pytest.raises(TeamFileError, match="not a regular file"):
        load_team(fifo, project=tmp_path)  # no writer: a plain open would block here


@pytest.mark.parametrize("special", ["/dev/zero", "/dev/null", "."])
@pytest.mark.hostile
def test_devices_and_directories_are_refused(tmp_path: Path, special: str) -> None:
    with pytest.raises(TeamFileError, match=r"not a regular file|cannot read"):
        load_team(tmp_path / special if special == "." else Path(special), project=tmp_path)


@pytest.mark.hostile
def test_a_huge_file_is_refused_unread(tmp_path: Path) -> None:
    (tmp_path / "team.toml").write_bytes(b"# " + b"x" * (2 * 1024 * 1024) + b"\n")
    assert error(tmp_path, (tmp_path / "team.toml").read_bytes()).startswith("over 1024 KiB")


@pytest.mark.parametrize("name", ["user", "supervisor"])
@pytest.mark.hostile
def test_a_role_may_not_pass_for_a_person_or_the_supervisor(tmp_path: Path, name: str) -> None:
    problem = error(tmp_path, f"[roles.{name}]\nagent = 'reviewer'\n")
    assert problem == f"[roles.{name}]: teamrt's own mail is sent as {name!r}; pick another name"


def test_web_search_domains_are_allowed_or_blocked_not_both(tmp_path: Path) -> None:
    problem = error(
        tmp_path, '[web]\nsearch_allowed_domains = ["a.org"]\nsearch_blocked_domains = ["b.org"]\n'
    )
    assert problem == (
        "[web] set search_allowed_domains or search_blocked_domains, not both: the API takes one"
    )
    assert error(tmp_path, "[mcp]\nservers = 3\n") == "[mcp] servers must be tables: [mcp.servers.<name>]"
    assert error(tmp_path, "[web]\nprivate = []\n").startswith("[web] unknown key 'private'")


def test_web_and_mcp_survive_the_round_trip_through_json(tmp_path: Path) -> None:
    team = load(tmp_path, '[web]\nprivate_hosts = ["127.0.0.1:9"]\n[mcp.servers.t]\ncommand = "x"\n')
    again = team_from_json(json.loads(json.dumps(team_to_json(team))))
    assert again == team and again.web.private_hosts == ("127.0.0.1:9",)
    old = team_to_json(team)
    del old["web"], old["mcp_servers"]  # a run made before [web] and [mcp] existed
    assert team_from_json(old).web == WebPolicy() and team_from_json(old).mcp_servers == {}


# -- effort, compact_at, thinking and cache: per role, with [team]'s as the default -----------------


def test_levers_per_role_and_for_the_team(tmp_path: Path) -> None:
    team = load(
        tmp_path,
        '[team]\nmodel = "sim"\neffort = "medium"\ncache = "1h"\ncompact_at = 120_000\n'
        '[roles.scout]\nagent = "researcher"\neffort = "low"\nthinking = "off"\ncache = "auto"\n',
    )
    scout = team.roles["scout"]
    assert (scout.effort, scout.thinking, scout.cache, scout.compact_at) == ("low", "off", "auto", None)
    assert team.lever(scout, "effort") == "low" and team.lever(scout, "compact_at") == 120_000
    assert team.lever(team.lead, "effort") == "medium" and team.lever(team.lead, "thinking") is None
    again = team_from_json(json.loads(json.dumps(team_to_json(team))))
    assert again == team
    old = team_to_json(team)
    for key in ("effort", "compact_at", "thinking", "cache"):  # a run kept before these keys existed
        del old[key], old["lead"][key], old["roles"]["scout"][key]
    assert team_from_json(old).lever(team_from_json(old).roles["scout"], "effort") is None


def test_a_manual_budget_on_a_model_that_takes_one(tmp_path: Path) -> None:
    team = load(tmp_path, '[team]\nmodel = "claude-haiku-4-5"\nthinking = 4096\n')
    assert team.thinking == 4096


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            '[team]\nmodel = "claude-opus-4-5"\neffort = "xhigh"\n',
            "[team] effort: claude-opus-4-5 takes low, medium, high, not 'xhigh'",
        ),
        (
            '[team]\nmodel = "claude-haiku-4-5"\n[lead]\neffort = "low"\n',
            "[lead] effort: claude-haiku-4-5 takes no effort setting; leave effort out for it",
        ),
        (
            '[team]\nmodel = "sim"\n[roles.r]\nagent = "reviewer"\nthinking = 4096\n',
            "[roles.r] thinking: sim thinks adaptively and refuses a manual budget",
        ),
        (
            '[team]\nmodel = "claude-opus-4-5"\nthinking = "adaptive"\n',
            "[team] thinking: claude-opus-4-5 does not think adaptively",
        ),
        (
            '[team]\nmodel = "claude-haiku-4-5"\nthinking = 64_000\n',
            "[team] thinking: claude-haiku-4-5 writes at most 64,000 tokens, budget included",
        ),
        (
            '[team]\nmodel = "claude-haiku-4-5"\ncompact_at = 195_000\n',
            "[team] compact_at: 195_000 leaves no room for a reply in claude-haiku-4-5's window of 200_000",
        ),
        (
            '[team]\nmodel = "sim"\n[roles.r]\nagent = "reviewer"\nmodel = "sim:claude-haiku-4-5"\n'
            'effort = "low"\n',
            "[roles.r] effort: sim:claude-haiku-4-5 takes no effort setting",
        ),
    ],
)
def test_a_setting_the_role_s_model_does_not_take_is_one_line(
    tmp_path: Path, text: str, problem: str
) -> None:
    assert error(tmp_path, text).startswith(problem)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            '[team]\neffort = "ultra"\n',
            "[team] effort must be one of low, medium, high, xhigh, max, not 'ultra'",
        ),
        ("[lead]\ncompact_at = -1\n", "[lead] compact_at must be a positive integer, not -1"),
        (
            '[team]\nthinking = "lots"\n',
            '[team] thinking must be "adaptive", "off" or a budget of tokens, not',
        ),
        (
            "[team]\nthinking = true\n",
            '[team] thinking must be "adaptive", "off" or a budget of tokens, not True',
        ),
        ("[team]\nthinking = 10\n", "[team] thinking: a budget must be at least 1024 tokens, not 10"),
        ('[roles.r]\nagent = "reviewer"\ncache = "forever"\n', "[roles.r] cache must be one of auto, 5m, 1h"),
        (f"[team]\ncompact_at = {2**70}\n", "[team] compact_at must be at most"),
        (
            '[team]\nthinking = "off"\neffort = "max"\n',
            '[lead] thinking "off" on claude-sonnet-5-5 is thinking.type "between_tools", which the API'
            " refuses at effort",
        ),
        (
            "[team]\neffort = ['low']\n",
            "[team] effort must be one of low, medium, high, xhigh, max, not ['low']",
        ),
    ],
)
@pytest.mark.hostile
def test_hostile_levers_end_in_one_line(tmp_path: Path, text: str, problem: str) -> None:
    assert error(tmp_path, text).startswith(problem)
