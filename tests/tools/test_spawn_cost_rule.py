"""``Spawn(cost>$2)`` rules: how they read, what they match, a spawn asked about on sim (real SDK)."""

from __future__ import annotations

from pathlib import Path

import pytest

from teamrt.models import Reply
from teamrt.runtime.asking import ANSWERED, ASK
from teamrt.runtime.forecast import SPAWN_FORECAST
from teamrt.runtime.spawning import SPAWN_FAILED
from teamrt.sim import SimRequest, SimServer
from teamrt.team import TeamFileError, load_team
from teamrt.tools.permissions import Decision, Mode, Permissions, RuleError, Rules, Verdict
from teamrt.tools.specifiers import SpawnLimit, spawn_limit
from tests.runtime.test_team import run_team

# -- reading ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("specifier", "limit"),
    [
        ("cost>$2", SpawnLimit(None, 2.0)),
        ("cost >= $0.5", SpawnLimit(None, 0.5, inclusive=True)),
        ("reviewer, cost>$1", SpawnLimit("reviewer", 1.0)),
        ("cost>$0.25 , fork", SpawnLimit("fork", 0.25)),
        ("reviewer", SpawnLimit("reviewer", None)),
        ("cost>$0", SpawnLimit(None, 0.0)),
    ],
)
def test_spawn_rules_read(specifier: str, limit: SpawnLimit) -> None:
    assert spawn_limit(specifier) == limit


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("Spawn(cost>$)", "is not a cost limit"),
        ("Spawn(cost>-1)", "is not a cost limit"),
        ("Spawn(cost>$-1)", "is not a cost limit"),
        ("Spawn(cost>$1e309)", "is not a cost limit"),
        ("Spawn(cost>$inf)", "is not a cost limit"),
        ("Spawn(cost>$nan)", "is not a cost limit"),
        ("Spawn(cost>$1234567890)", "is not a cost limit"),
        ("Spawn(cost<$2)", "is not a cost limit"),
        ("Spawn(cost>2)", "is not a cost limit"),
        ("Spawn(cost>$2, cost>$3)", "one cost limit"),
        ("Spawn(reviewer, coder)", "one role"),
        ("Spawn(Reviewer)", "neither a role name nor a cost limit"),
        ("Spawn(reviewer,)", "neither a role name nor a cost limit"),
        ("Spawn(\x1b[31mx)", "neither a role name nor a cost limit"),
        ("Spawn()", "empty parentheses"),
    ],
)
def test_malformed_spawn_rules_are_one_line_at_load(tmp_path: Path, text: str, problem: str) -> None:
    with pytest.raises(RuleError, match="bad permission rule") as caught:
        Rules.parse(ask=[text])
    assert problem in str(caught.value)
    team = tmp_path / "team.toml"
    team.write_text(f'[team]\nmodel = "sim"\n[permissions]\nask = [{_toml(text)}]\n')
    with pytest.raises(TeamFileError) as loaded:
        load_team(team, project=tmp_path)
    said = str(loaded.value)
    assert "\n" not in said and "\x1b" not in said, "one line, no raw escape"
    assert said.startswith(f"{team}: [permissions] ask: bad permission rule") and problem in said


@pytest.mark.hostile
def test_a_spawn_rule_in_an_allow_list_is_refused_at_load(tmp_path: Path) -> None:
    with pytest.raises(RuleError, match="put it in the ask or deny list"):
        Rules.parse(allow=["Spawn(cost>$1)"])
    team = tmp_path / "team.toml"
    team.write_text('[team]\nmodel = "sim"\n[permissions]\nallow = ["Spawn(cost>$1)"]\n')
    with pytest.raises(TeamFileError, match=r"allow: bad permission rule .*put it in the ask or deny list"):
        load_team(team, project=tmp_path)


def _toml(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\x1b", "\\u001b") + '"'


# -- matching ----------------------------------------------------------------------------


def test_spawn_rules_judge_a_forecast_by_role_and_sum() -> None:
    perms = Permissions(ask=["Spawn(cost>$2)"], deny=["Spawn(reviewer, cost>=$5)"])
    assert perms.spawn_decision("coder", 1.99, "forecast ~$1.99") is None
    asked = perms.spawn_decision("coder", 2.01, "forecast ~$2.01")
    assert asked is not None and asked.verdict is Verdict.ASK
    assert asked.reason == 'approval required by rule "Spawn(cost>$2)": forecast ~$2.01'
    denied = perms.spawn_decision("reviewer", 5.0, "forecast ~$5.00")
    assert denied is not None and denied.verdict is Verdict.DENY, "deny first, and >= takes the sum itself"
    assert perms.spawn_decision("coder", 5.0, "x") == Decision(
        Verdict.ASK, 'approval required by rule "Spawn(cost>$2)": x'
    ), "the role rule is a reviewer's only"
    unknown = perms.spawn_decision("coder", None, "its cost cannot be forecast")
    assert unknown is not None and unknown.verdict is Verdict.ASK, "no price: a cost rule fails closed"


def test_dont_ask_mode_denies_what_a_spawn_rule_would_ask() -> None:
    perms = Permissions(Mode.DONT_ASK, ask=["Spawn"])
    decision = perms.spawn_decision("fork", 0.0, "forecast ~$0.0000")
    assert decision is not None and decision.verdict is Verdict.DENY and "dontAsk" in decision.reason


@pytest.mark.hostile
def test_a_spawn_rule_matches_no_tool_call(tmp_path: Path) -> None:
    """``Spawn`` is no tool's name: a rule for it never decides a call, not even of a tool that calls itself
    Spawn, nor of an MCP server's tool named spawn (ruled as ``mcp__<server>__spawn``)."""
    perms = Permissions(Mode.BYPASS, deny=["Spawn", "Spawn(cost>$0)"], ask=["Spawn(fork)"])
    for tool in ("Spawn", "spawn", "mcp__tools__spawn", "mcp__spawn__run", "spawn_agent", "Task"):
        decision = perms.decide(tool, {}, read_only=False, workspace=tmp_path)
        assert decision.verdict is Verdict.ALLOW, (tool, decision)
    mcp = Permissions(Mode.BYPASS, deny=["mcp__tools__spawn"])
    assert mcp.decide("mcp__tools__spawn", {}, read_only=False, workspace=tmp_path).verdict is Verdict.DENY
    assert mcp.spawn_decision("fork", 100.0, "x") is None, "an MCP tool's rule is no Spawn rule"


# -- through the real SDK on sim ----------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


def _lead(request: SimRequest) -> Reply:
    if not request.calls("spawn_agent"):
        return Reply().call(
            "spawn_agent", {"kind": "team", "role": "reviewer", "directives": ["Review it."], "wait": True}
        )
    return Reply().say("Heard: " + request.tool_outcomes[0].output)


def _team(project: Path, rules: str, on_ask: str = "deny") -> None:
    (project / "team.toml").write_text(
        f'[team]\nmodel = "sim"\non_ask = "{on_ask}"\n[roles.reviewer]\n[permissions]\n{rules}\n'
    )


@pytest.mark.usefixtures("store_db")
def test_a_spawn_above_the_limit_is_asked_about_and_a_deny_stops_it(project: Path, sim: SimServer) -> None:
    _team(project, 'ask = ["Spawn(cost>$0.01)"]')
    sim.policies.update({"lead": _lead, "reviewer": lambda request: Reply().say("LGTM")})
    outcome, store = run_team(project, sim, "go")
    reader = store.reader
    assert [a.name for a in reader.agents()] == ["lead"], "the spawn did not happen"
    [ask] = reader.events(kinds=(ASK,))
    assert ask.agent == "lead" and ask.data["tool"] == "Spawn"
    assert ask.data["input"] == {"kind": "team", "role": "reviewer", "directives": ["Review it."]}
    reason = ask.data["reason"]
    assert reason.startswith('approval required by rule "Spawn(cost>$0.01)": forecast ~$'), reason
    assert "no reviewer has ended yet" in reason and "sim's prices" in reason, "the ask shows its basis"
    assert ask.data["rule"] is None, "allow always has no rule to add for a cost ask"
    [answered] = reader.events(kinds=(ANSWERED,))
    assert answered.data["allowed"] is False
    assert "permission denied: approval required by rule" in outcome.answer, "the lead is told why"
    assert "the run's policy is to deny" in outcome.answer
    [failed] = reader.events(kinds=(SPAWN_FAILED,))
    assert "Spawn(cost>$0.01)" in failed.data["reason"]
    assert not reader.events(kinds=(SPAWN_FORECAST,))


@pytest.mark.usefixtures("store_db")
def test_a_spawn_below_the_limit_is_not_asked_about(project: Path, sim: SimServer) -> None:
    _team(project, 'ask = ["Spawn(cost>$50)"]\ndeny = ["Spawn(coder, cost>$0)"]')
    sim.policies.update({"lead": _lead, "reviewer": lambda request: Reply().say("LGTM")})
    outcome, store = run_team(project, sim, "go")
    reader = store.reader
    assert outcome.answer.startswith("Heard: ## reviewer: idle") and "LGTM" in outcome.answer, outcome
    assert not reader.events(kinds=(ASK,)) and not reader.events(kinds=(SPAWN_FAILED,))
    [forecast] = reader.events(kinds=(SPAWN_FORECAST,))
    assert forecast.agent == "lead" and list(forecast.data["agents"]) == ["reviewer"]
    assert 0 < forecast.data["usd"] < 50 and forecast.data["tokens"] > 0


@pytest.mark.usefixtures("store_db")
def test_a_spawn_asked_about_and_allowed_goes_on(project: Path, sim: SimServer) -> None:
    _team(project, 'ask = ["Spawn(reviewer)"]', on_ask="allow")
    sim.policies.update({"lead": _lead, "reviewer": lambda request: Reply().say("LGTM")})
    outcome, store = run_team(project, sim, "go")
    assert outcome.answer.startswith("Heard: ## reviewer: idle") and "LGTM" in outcome.answer, outcome
    [ask] = store.reader.events(kinds=(ASK,))
    assert ask.data["reason"].startswith('approval required by rule "Spawn(reviewer)": forecast ~$')


@pytest.mark.usefixtures("store_db")
def test_a_deny_rule_refuses_a_spawn_without_asking(project: Path, sim: SimServer) -> None:
    _team(project, 'deny = ["Spawn(reviewer, cost>=$0)"]')
    sim.policies.update({"lead": _lead})
    outcome, store = run_team(project, sim, "go")
    assert 'permission denied: denied by rule "Spawn(reviewer, cost>=$0)": forecast ~$' in outcome.answer
    assert not store.reader.events(kinds=(ASK,))
    assert [a.name for a in store.reader.agents()] == ["lead"]
