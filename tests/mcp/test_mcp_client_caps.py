"""teamrt's MCP client capabilities (teamrt.mcp.capabilities): roots, sampling, elicitation, progress, logging
and tools/list_changed, against a hand-written stdio server (tests/mcp/caps_server.py) that sends whatever a
test asks, hostile input included, and in runs on a scripted model."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from teamrt.agents import AgentDefinition
from teamrt.mcp.capabilities import (
    ELICITATION_ASK,
    ELICITED,
    LOG,
    MAX_OPEN,
    PROGRESS,
    SAMPLED,
    TOOLS,
    ClientSide,
    Elicited,
    Sampled,
)
from teamrt.mcp.config import McpConfig, parse_entry
from teamrt.mcp.elicitation import Form, SchemaRefused, form, values
from teamrt.mcp.sampling import MAX_TOKENS_CAP, SampleRequest, SamplingRefused, choose_model, read_request
from teamrt.mcp.servers import McpServers
from teamrt.mcp.shown import summary
from teamrt.models import Reply, ScriptedModel
from teamrt.models.types import ModelRequest, ModelResponse, Usage
from teamrt.sandbox.confinement import Confinement
from teamrt.store import AgentRecord, ToolCallRecord
from teamrt.testing import run_on_sim
from teamrt.tools.base import ToolContext, ToolError
from teamrt.tools.permissions import Permissions, RuleError, Verdict
from teamrt.tui.activity import activity
from tests.helpers.teams import FAST, kept

SERVER = str(Path(__file__).with_name("caps_server.py"))
ESC = "\x1b"


class Journal:
    """A store's ``append_event``, kept in a list."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any], str | None]] = []

    async def append_event(self, kind: str, data: dict[str, Any], agent: str | None = None) -> None:
        self.events.append((kind, data, agent))

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [data for k, data, _ in self.events if k == kind]


class Host:
    """An ``McpHost`` that records what it is asked and answers from lists."""

    def __init__(self, answers: list[Elicited] | None = None, delay: float = 0.0) -> None:
        self.sampled: list[tuple[str, str, SampleRequest]] = []
        self.asked: list[tuple[str, Form, str]] = []
        self.answers = list(answers or [])
        self.delay = delay

    async def sample(self, agent: str, server: str, request: SampleRequest) -> Sampled:
        self.sampled.append((agent, server, request))
        return Sampled(f"sampled {ESC}[31mred{ESC}[0m and a bell \x07", "sim", "end_turn")

    async def elicit(self, agent: str, server: str, form: Form, problem: str) -> Elicited:
        self.asked.append((agent, form, problem))
        await asyncio.sleep(self.delay)
        return self.answers.pop(0) if self.answers else Elicited("decline")


def servers(ws: Path, host: Host | None, journal: Journal, timeout: int = 30) -> McpServers:
    entry = {"command": sys.executable, "args": [SERVER], "timeout": timeout}
    config = McpConfig({"t": parse_entry("t", entry, scope="team", source="test")})
    run_dir = ws / ".teamrt" / "runs" / "r1"
    run_dir.mkdir(parents=True, exist_ok=True)
    return McpServers(config, Confinement(workspace=ws, run_dir=run_dir), store=journal, host=host)  # type: ignore[arg-type]


async def call(s: McpServers, tool: str, agent: str = "alice", **args: Any) -> str:
    tools = {t.tool: t for t in s.tools(["t"])}
    result = await tools[tool].run(args, ToolContext(workspace=Path("/"), run_dir=Path("/"), agent=agent))
    assert not result.is_error, result
    assert isinstance(result.content, str)
    return result.content


def on(ws: Path, host: Host | None, go: Any, timeout: int = 30) -> Journal:
    journal = Journal()

    async def main() -> None:
        s = servers(ws, host, journal, timeout)
        try:
            await s.prepare(["t"])
            assert s.state("t") == ("running", ""), s.state("t")
            await go(s)
        finally:
            await s.close()

    asyncio.run(main())
    return journal


def sampling(text: str = "hi", **more: Any) -> dict[str, Any]:
    message = {"role": "user", "content": {"type": "text", "text": text}}
    return {"method": "sampling/createMessage", "params": {"messages": [message], "maxTokens": 100, **more}}


# -- against a server ----------------------------------------------------------------------------------------


def test_the_client_declares_its_capabilities_and_roots_are_the_workspace_alone(ws: Path) -> None:
    async def go(s: McpServers) -> None:
        caps = json.loads(await call(s, "caps"))
        assert {"roots", "sampling", "elicitation"} <= set(caps)
        roots = json.loads(await call(s, "ask", method="roots/list"))
        assert roots == {"roots": [{"uri": ws.resolve().as_uri(), "name": ws.name}]}

    on(ws, Host(), go)


def test_sampling_reaches_the_host_as_the_callers_capped_and_its_answer_comes_back_clean(ws: Path) -> None:
    host = Host()

    async def go(s: McpServers) -> None:
        ask = sampling("summarise", maxTokens=1_000_000, systemPrompt="be brief",
                       modelPreferences={"hints": [{"name": "Sonnet"}]})  # fmt: skip
        answer = json.loads(await call(s, "ask", agent="bob", **ask))
        assert answer["model"] == "sim" and answer["stopReason"] == "endTurn"
        assert ESC not in answer["content"]["text"] and "red" in answer["content"]["text"]
        assert "\x07" not in answer["content"]["text"]

    journal = on(ws, host, go)
    (agent, server, request), = host.sampled  # fmt: skip
    assert (agent, server) == ("bob", "t")
    assert request.max_tokens == MAX_TOKENS_CAP and request.asked_tokens == 1_000_000
    assert request.system == "be brief" and request.hints == ("sonnet",)
    assert request.messages == [{"role": "user", "content": [{"type": "text", "text": "summarise"}]}]
    (event,) = journal.of(SAMPLED)
    assert event["max_tokens"] == MAX_TOKENS_CAP and "refused" not in event


@pytest.mark.hostile
def test_attack_hostile_sampling_requests_are_refused_with_one_line_each(ws: Path) -> None:
    audio = {"role": "user", "content": {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}}
    many = [{"role": "user", "content": {"type": "text", "text": "x"}}] * 60
    tool = {"name": "t", "inputSchema": {"type": "object"}}

    async def go(s: McpServers) -> None:
        for ask, said in [
            (sampling(tools=[tool]), "tools"),
            ({**sampling(), "params": {"messages": [audio], "maxTokens": 5}}, "audio"),
            ({**sampling(), "params": {"messages": many, "maxTokens": 5}}, "60 messages"),
            (sampling("x" * 200_000), "characters"),
            ({**sampling(), "params": {"messages": [], "maxTokens": 5}}, "no messages"),
        ]:
            answer = json.loads(await call(s, "ask", **ask))
            assert said in answer["error"]["message"] and "teamrt refused" in answer["error"]["message"]

    host = Host()
    journal = on(ws, host, go)
    assert host.sampled == [] and len(journal.of(SAMPLED)) == 5
    assert all("refused" in e for e in journal.of(SAMPLED))


@pytest.mark.hostile
def test_attack_a_burst_of_requests_gets_a_few_asks_at_once_and_refusals_for_the_rest(ws: Path) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    host = Host([Elicited("accept", "x")] * 50, delay=0.3)

    async def go(s: McpServers) -> None:
        params = {"message": "m", "requestedSchema": schema}
        answers = json.loads(await call(s, "burst", count=40, method="elicitation/create", params=params))
        accepted = [a for a in answers if a.get("action") == "accept"]
        refused = [a for a in answers if "error" in a]
        assert len(accepted) == MAX_OPEN and len(refused) == 40 - MAX_OPEN
        assert all("requests waiting already" in a["error"]["message"] for a in refused)

    on(ws, host, go)
    assert len(host.asked) == MAX_OPEN


def test_a_form_is_put_to_the_person_and_answered_with_their_checked_values(ws: Path) -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Your name", "maxLength": 20},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "colour": {"type": "string", "enum": ["red", "green"]},
            "ok": {"type": "boolean", "default": True},
        },
        "required": ["name", "age"],
    }
    host = Host([Elicited("accept", "name=Ada; age=old"), Elicited("accept", '{"name": "Ada", "age": 36}')])

    async def go(s: McpServers) -> None:
        params = {"message": f"who {ESC}[2J are you?", "requestedSchema": schema}
        ask: dict[str, Any] = {"method": "elicitation/create", "params": params}
        answer = json.loads(await call(s, "ask", **ask))
        assert answer == {"action": "accept", "content": {"name": "Ada", "age": 36, "ok": True}}
        declined = json.loads(await call(s, "ask", **ask))  # no answers left: the host declines
        assert declined == {"action": "decline"}

    journal = on(ws, host, go)
    (_, first, problem), (_, _, again), _ = host.asked
    assert ESC not in first.message and [f.name for f in first.fields] == ["name", "age", "colour", "ok"]
    assert problem == "" and again == "age: not a number"
    assert [e["action"] for e in journal.of(ELICITED)] == ["accept", "decline"]
    assert all("Ada" not in json.dumps(e) for e in journal.of(ELICITED))  # values are never journaled


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("schema", "said"),
    [
        (
            {"type": "object", "properties": {"a": {"type": "object", "properties": {}}}},
            "only flat primitive",
        ),
        ({"type": "object", "properties": {"a": {"type": "object"}}}, 'type "object"'),
        ({"type": "object", "properties": {"a": {"$ref": "#/x"}}}, "$ref"),
        ({"type": "object", "properties": {f"f{i}": {"type": "string"} for i in range(21)}}, "21 fields"),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string", "enum": [str(i) for i in range(1000)]}},
            },
            "1000 choices",
        ),
        ({"type": "object", "properties": {"a b\x1b": {"type": "string"}}}, "not a plain name"),
        ({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "object"}}}}, "array"),
        ({"type": "object", "properties": {}, "required": ["ghost"]}, "does not describe"),
        ({"type": "object", "properties": {"a": {"type": "string", "format": "regex"}}}, "format"),
        ({"type": "object", "properties": {"a": {"type": "number", "minimum": "0"}}}, "finite"),
        ({"type": "array"}, "object"),
    ],
)
def test_attack_schemas_that_are_not_flat_forms_are_refused_clearly(schema: Any, said: str) -> None:
    with pytest.raises(SchemaRefused, match=None) as raised:
        form("m", schema)
    assert said in str(raised.value) and "\n" not in str(raised.value) and ESC not in str(raised.value)


@pytest.mark.hostile
def test_attack_a_hostile_schema_from_a_server_is_refused_and_nobody_is_asked(ws: Path) -> None:
    host = Host([Elicited("accept", "x")])

    async def go(s: McpServers) -> None:
        bad = {"type": "object", "properties": {"a": {"type": "object"}}}
        answer = json.loads(await call(s, "ask", method="elicitation/create",
                                       params={"message": "m", "requestedSchema": bad}))  # fmt: skip
        assert "teamrt refused the elicitation" in answer["error"]["message"]

    journal = on(ws, host, go)
    assert host.asked == [] and "refused" in journal.of(ELICITED)[0]


def test_time_spent_asking_a_person_does_not_count_against_the_calls_timeout(ws: Path) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    host = Host([Elicited("accept", "yes")], delay=1.5)

    async def go(s: McpServers) -> None:
        answer = json.loads(await call(s, "ask", method="elicitation/create",
                                       params={"message": "m", "requestedSchema": schema}))  # fmt: skip
        assert answer == {"action": "accept", "content": {"a": "yes"}}

    on(ws, host, go, timeout=1)


def test_a_calls_timeout_still_holds_without_an_ask(ws: Path) -> None:
    async def go(s: McpServers) -> None:
        tools = {t.tool: t for t in s.tools(["t"])}
        with pytest.raises(ToolError, match="did not answer within 1 s"):
            await tools["sleep"].run({"seconds": 1.8}, ToolContext(workspace=Path("/"), run_dir=Path("/")))

    on(ws, Host(), go, timeout=1)


@pytest.mark.hostile
def test_attack_progress_and_log_floods_are_journaled_at_a_bounded_rate_and_cleaned(ws: Path) -> None:
    async def go(s: McpServers) -> None:
        assert await call(s, "progress", count=2000, message=f"{ESC}]0;pwned\x07 going") == "progressed"
        assert await call(s, "log", count=2000, text=f"{ESC}[2J noise") == "logged"
        await asyncio.sleep(0.3)  # the last notifications are handled after the call's answer

    journal = on(ws, Host(), go)
    progress, logs = journal.of(PROGRESS), journal.of(LOG)
    assert 1 <= len(progress) <= 3 and progress[0]["tool"] == "progress" and progress[0]["total"] == 2000
    assert 1 <= len(logs) <= 25 and all(ESC not in json.dumps(e) for e in progress + logs)
    assert all(agent == "alice" for kind, _, agent in journal.events if kind == PROGRESS)
    assert "going" in summary(PROGRESS, progress[0]) and "noise" in summary(LOG, logs[0])


@pytest.mark.hostile
def test_attack_a_list_changed_storm_is_listed_again_a_few_times_and_agents_take_it_between_turns(
    ws: Path,
) -> None:
    definition = AgentDefinition("lead", "d", "p", None, (), None, None, None, "test")
    seen: list[bool] = []

    async def go(s: McpServers) -> None:
        follow = s.follow(definition)
        tools: dict[str, Any] = {"Read": object(), **{t.name: t for t in s.tools_for(definition)}}
        assert follow(tools) is False and "mcp__t__extra" not in tools
        assert await call(s, "toggle", count=500) == "extra is on"
        for _ in range(100):
            if "mcp__t__extra" in {t.name for t in s.tools(["t"])}:
                break
            await asyncio.sleep(0.05)
        seen.append(follow(tools))
        seen.append(follow(tools))
        assert next(iter(tools)) == "Read" and "mcp__t__extra" in tools
        assert await call(s, "extra") == "extra here"

    journal = on(ws, Host(), go)
    assert seen == [True, False]
    listed = journal.of(TOOLS)
    assert 1 <= len(listed) <= 3 and listed[0]["added"] == ["mcp__t__extra"]


@pytest.mark.hostile
def test_attack_a_server_whose_tools_never_settle_cannot_hold_a_calls_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A call's answer waits for the listing its server's ``tools/list_changed`` asked for (so the agent's
    next turn has the new tools), but a listing that never comes back, or notifications that never stop,
    hold it no longer than one gap and one listing's time."""
    import time
    from types import SimpleNamespace

    from teamrt.mcp import relisting
    from teamrt.mcp.lifecycle import Server

    monkeypatch.setattr(relisting, "RELIST_GAP", 0.2)
    notes: list[dict[str, Any]] = []

    class Hung:
        async def list_tools(self, cursor: Any = None) -> Any:
            await asyncio.Event().wait()

    class Changing:  # says its tools changed again during each listing: no listing takes every change
        async def list_tools(self, cursor: Any = None) -> Any:
            r.tools_changed(changing)
            return SimpleNamespace(tools=[], next_cursor=None)

    async def journal(kind: str, data: dict[str, Any], agent: str | None = None) -> None:
        notes.append(data)

    async def waited(r: relisting.Relisting, server: Server) -> float:
        start = time.monotonic()
        await asyncio.wait_for(r.listed(server), 10)
        return time.monotonic() - start

    r = relisting.Relisting(journal, None, lambda: None, 0.3)  # type: ignore[arg-type]
    config = parse_entry("t", {"command": "x"}, scope="team", source="test")
    hung = Server(config, state="running", client=Hung())
    changing = Server(config, state="running", client=Changing())

    async def go() -> tuple[float, float, bool]:
        r.tools_changed(hung)
        hung_s = await waited(r, hung)
        r.tools_changed(changing)
        storm_s = await waited(r, changing)
        still = not changing.listed.is_set()  # its changes go on: the call went on without them
        tasks = [t for t in (hung.relisting, changing.relisting) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return hung_s, storm_s, still

    hung_s, storm_s, still = asyncio.run(go())
    assert hung_s < 3 and "could not list its tools" in notes[0]["note"]
    assert 0.4 <= storm_s < 3 and still


# -- pieces ---------------------------------------------------------------------------------------------


def test_sampling_and_elicitation_outside_a_call_or_a_run_are_refused() -> None:
    async def go() -> None:
        journal = Journal()
        side = ClientSide("t", Path("/w"), host=Host(), journal=journal.append_event, caller=lambda: None,
                          on_tools_changed=lambda: None)  # fmt: skip
        params = read_request_params()
        assert "only during a call" in (await side.sample(None, params)).message
        outside = ClientSide("t", Path("/w"), host=None, journal=journal.append_event, caller=lambda: "a",
                             on_tools_changed=lambda: None)  # fmt: skip
        assert "only in a run" in (await outside.sample(None, params)).message

    asyncio.run(go())


def read_request_params() -> Any:
    from mcp_types import CreateMessageRequestParams

    return CreateMessageRequestParams.model_validate(sampling()["params"])


def test_model_hints_choose_only_among_the_teams_models() -> None:
    assert choose_model(("opus",), "sim", ["sim", "claude-opus-4-5"]) == "claude-opus-4-5"
    assert choose_model(("gpt-4",), "sim", ["sim", "claude-opus-4-5"]) == "sim"
    assert choose_model((), "claude-haiku", ["claude-opus-4-5"]) == "claude-haiku"
    with pytest.raises(SamplingRefused, match="end with a user"):
        from mcp_types import CreateMessageRequestParams

        params = {
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "a"}},
                {"role": "assistant", "content": {"type": "text", "text": "b"}},
            ],
            "maxTokens": 5,
        }
        read_request(CreateMessageRequestParams.model_validate(params))


def test_values_are_read_from_a_note_as_json_pairs_or_a_lone_value() -> None:
    fields = form("m", {"type": "object", "properties": {
        "n": {"type": "number", "minimum": 1}, "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
        "when": {"type": "string", "format": "date"}}, "required": ["n"]}).fields  # fmt: skip
    assert values("n=2; tags=a, b; when=2026-01-02", fields) == {
        "n": 2.0,
        "tags": ["a", "b"],
        "when": "2026-01-02",
    }
    assert values('{"n": 3}', fields) == {"n": 3}
    assert values("n=0", fields) == "n: outside 1..inf"
    assert values("when=tomorrow", fields) == "n is required"
    assert values("n=1; when=tomorrow", fields) == "when: not a valid date"
    assert values("n=1; zz=2", fields) == "no field is named zz"
    (one,) = form("m", {"type": "object", "properties": {"name": {"type": "string"}}}).fields
    assert values("Ada Lovelace", (one,)) == {"name": "Ada Lovelace"}


def test_mcp_sampling_rules_decide_a_servers_requests() -> None:
    allowed = Permissions("default", allow=["McpSampling(t)"])
    ws = Path("/w")
    assert (
        allowed.decide("McpSampling", {"server": "t"}, read_only=True, workspace=ws).verdict is Verdict.ALLOW
    )
    assert allowed.decide("McpSampling", {"server": "u"}, read_only=True, workspace=ws).verdict is Verdict.ASK
    denied = Permissions("bypassPermissions", deny=["McpSampling"])
    assert denied.decide("McpSampling", {"server": "t"}, read_only=True, workspace=ws).verdict is Verdict.DENY
    quiet = Permissions("dontAsk")
    assert quiet.decide("McpSampling", {"server": "t"}, read_only=True, workspace=ws).verdict is Verdict.DENY
    with pytest.raises(RuleError, match="McpSampling takes the name"):
        Permissions(allow=["McpSampling(a b)"])


def test_a_servers_sampling_is_charged_to_the_agents_budgets_and_a_spent_budget_refuses_the_next() -> None:
    """What a sampled call used counts against every budget of the agent (the run's, its role's), as its
    own calls do: a server cannot spend past a budget by sampling again and again."""
    from types import SimpleNamespace

    from teamrt.runtime.budget import Budget
    from teamrt.runtime.mcphost import RunMcpHost

    class Answering:
        async def complete(self, call: ModelRequest) -> ModelResponse:
            usage = Usage(input_tokens=40, output_tokens=3000)
            return ModelResponse("msg_s", "sim", [{"type": "text", "text": "4"}], "end_turn", usage, 0.25)

    class Usages:
        async def add_usage(self, agent: str, usage: Any) -> None:
            pass

    run, role = Budget("run", max_tokens=5000), Budget("agent lead", max_usd=1.0)
    spec = SimpleNamespace(permissions=Permissions("default", allow=["McpSampling(t)"]), model_name="sim",
                           model=Answering(), info=None, role=None, team="m")  # fmt: skip
    env = SimpleNamespace(tools=ToolContext(workspace=Path("/w"), run_dir=Path("/w")), budgets=[run, role],
                          store=Usages())  # fmt: skip
    member = SimpleNamespace(
        done=SimpleNamespace(done=lambda: False), loop=SimpleNamespace(spec=spec, env=env)
    )
    host = RunMcpHost({"lead": member}, lambda name: Answering(), ["sim"])  # type: ignore[arg-type, dict-item, return-value]
    request = SampleRequest([{"role": "user", "content": [{"type": "text", "text": "2+2"}]}], "", 100, 100)
    assert asyncio.run(host.sample("lead", "t", request)).text == "4"
    assert (run.spent_tokens, run.held_tokens, role.spent_usd, role.held_usd) == (3040, 0, 0.25, 0.0)
    asyncio.run(host.sample("lead", "t", request))
    with pytest.raises(SamplingRefused, match="budget: run token budget: 6,080 spent"):
        asyncio.run(host.sample("lead", "t", request))


def test_the_tui_shows_an_mcp_calls_latest_progress() -> None:
    agent = AgentRecord.__new__(AgentRecord)
    object.__setattr__(agent, "status", "running")
    call = ToolCallRecord.__new__(ToolCallRecord)
    for key, value in {"status": "running", "name": "mcp__t__progress", "input": {}}.items():
        object.__setattr__(call, key, value)
    data = {"server": "t", "tool": "progress", "progress": 3, "total": 10, "message": "copying"}
    assert activity(agent, "assistant", [call], progress=data).endswith("3/10 copying")
    assert "copying" not in activity(agent, "assistant", [call], progress={**data, "tool": "other"})


# -- in a run -------------------------------------------------------------------------------------------


def team(project: Path, *, allow: str, more: str = "") -> Path:
    path = project / "team.toml"
    path.write_text(
        f'[team]\nname = "m"\nmodel = "sim"\n{more}[permissions]\nallow = [{allow}]\n'
        f"[mcp.servers.t]\ncommand = {json.dumps(sys.executable)}\nargs = {json.dumps([SERVER])}\n"
    )
    return path


def run(project: Path, steps: list[Any]) -> tuple[ScriptedModel, Any]:
    model = ScriptedModel(steps)
    outcome = run_on_sim(team_path(project), "go", project=project, run_dir=project / "run", run_id="r1",
                         settings=FAST, timeout=60, models={"sim": model})  # fmt: skip
    assert outcome.status == "done", outcome
    return model, kept(outcome).reader


def team_path(project: Path) -> Path:
    return project / "team.toml"


def test_in_a_run_a_servers_sampling_runs_on_the_agents_model_without_tools_and_is_charged(
    tmp_path: Path,
) -> None:
    project = tmp_path / "p"
    project.mkdir()
    team(project, allow='"mcp__t", "McpSampling(t)"')
    sampled: list[ModelRequest] = []

    def answer(request: ModelRequest) -> ModelResponse:
        sampled.append(request)
        content = [{"type": "text", "text": "a sampled answer"}]
        return ModelResponse(
            "msg_sampled", "sim", content, "end_turn", Usage(input_tokens=40, output_tokens=7777)
        )

    ask = sampling("what is 2+2", systemPrompt="you are a calculator")
    model, reader = run(project, [Reply().call("mcp__t__ask", ask), answer, Reply().say("done")])
    (request,) = sampled
    assert request.tools == [] and request.system == "you are a calculator" and request.agent == "lead"
    assert request.max_tokens == 100
    result = model.requests[2].messages[-1]["content"][0]["content"]
    assert "a sampled answer" in result
    (event,) = [e for e in reader.events() if e.kind == SAMPLED]
    assert event.agent == "lead" and event.data["model"] == "sim"
    assert reader.agent("lead").usage.output_tokens > 7777  # the sampling call's tokens are the lead's too


def test_in_an_unattended_run_sampling_without_a_rule_is_denied_and_a_question_declined(
    tmp_path: Path,
) -> None:
    project = tmp_path / "p"
    project.mkdir()
    team(project, allow='"mcp__t"')
    form_ask = {"method": "elicitation/create",
                "params": {"message": "name?", "requestedSchema": {"type": "object", "properties": {
                    "name": {"type": "string"}}}}}  # fmt: skip
    steps = [Reply().call("mcp__t__ask", sampling()).call("mcp__t__ask", form_ask), Reply().say("done")]
    model, reader = run(project, steps)
    results = [b["content"] for b in model.requests[1].messages[-1]["content"]]
    assert "permission denied" in results[0] and json.loads(results[1]) == {"action": "decline"}
    asks = [e for e in reader.events() if e.kind == "ask"]
    assert [e.data["tool"] for e in asks] == ["McpSampling", ELICITATION_ASK]
    assert asks[1].data["input"]["fields"]["name"]["type"] == "string"


def test_in_a_run_a_servers_new_tools_reach_the_agent_at_its_next_turn(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    team(project, allow='"mcp__t"')

    def later(request: ModelRequest) -> Reply:
        return Reply().call("mcp__t__extra", {})

    # the server answers the listing after its tools/list_changed late: the agent's next turn still waits
    # for it (teamrt.mcp.relisting), so the new tool is in place, however busy the machine is
    toggle = Reply().call("mcp__t__toggle", {"list_delay": 0.5})
    model, reader = run(project, [toggle, later, Reply().say("done")])
    before = {t["name"] for t in model.requests[0].tools}
    after = {t["name"] for t in model.requests[1].tools}
    assert after - before == {"mcp__t__extra"}
    assert model.requests[2].messages[-1]["content"][0]["content"] == "extra here"
    assert any(e.kind == TOOLS for e in reader.events())


class _Reader:
    def events(self, **_: Any) -> list[Any]:
        return []


class _Store(Journal):
    reader = _Reader()


def test_a_persons_answer_by_mail_fills_the_form_and_the_policy_declines_it() -> None:
    from types import SimpleNamespace

    from teamrt.mcp.elicitation import form as read_form
    from teamrt.runtime.asking import HumanAsker
    from teamrt.runtime.mcphost import RunMcpHost

    asked = read_form("who?", {"type": "object", "properties": {"name": {"type": "string"}}})

    async def go() -> tuple[Elicited, Elicited]:
        store = _Store()
        asker = HumanAsker(store, policy="allow", wait_s=5)  # type: ignore[arg-type]
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        member = SimpleNamespace(done=done, loop=SimpleNamespace(env=SimpleNamespace(asker=asker)))
        host = RunMcpHost({"lead": member}, lambda name: None, ["sim"])  # type: ignore[arg-type, dict-item, return-value]
        pending = asyncio.ensure_future(host.elicit("lead", "t", asked, ""))
        while not store.of("ask"):
            await asyncio.sleep(0.01)
        (ask,) = store.of("ask")
        assert ask["tool"] == ELICITATION_ASK and "name (string, optional)" in ask["reason"]
        assert asker.answer(ask["id"], True, by="user", reason="name=Ada")
        by_mail = await pending
        asker.wait_s = 0  # nobody answers now: the run's policy (allow) cannot fill in a form
        by_policy = await host.elicit("lead", "t", asked, "")
        return by_mail, by_policy

    by_mail, by_policy = asyncio.run(go())
    assert by_mail == Elicited("accept", "name=Ada") and values(by_mail.note, asked.fields) == {"name": "Ada"}
    assert by_policy == Elicited("decline")
