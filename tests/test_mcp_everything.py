"""The MCP conformance run: ``@modelcontextprotocol/server-everything`` (npm, pinned by
``tests/mcp_everything/package-lock.json``, installed into ``.npm/`` by ``make test``) through teamrt's own
client, over stdio (teamrt's transport, in the sandbox) and streamable HTTP (a loopback port the team file
names in ``[mcp] private_hosts``), and over the deprecated SSE transport where the server has it.

In CI (``CI`` set) a missing node or package fails these tests: ``make test`` installs both, so their
absence is a broken set-up, not a machine without the tools. Elsewhere they are skipped with the reason.

Fixtures for other tests of this file: ``everything`` (parametrized over the transports: an ``Everything``
with ``entry``, ``private_hosts`` and ``policy``) and ``open_servers(everything, ws)``, an async context
manager yielding a prepared ``McpServers`` whose server is named ``SERVER``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import shutil
import socket
import subprocess
import types
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from teamrt.mcp.config import McpConfig, parse_entry
from teamrt.mcp.servers import McpServers
from teamrt.mcp.tools import McpTool
from teamrt.sandbox.confinement import Confinement
from teamrt.sandbox.policy import SandboxPolicy
from teamrt.tools.base import ToolContext, ToolError, ToolResult
from tests.helpers.waiting import within

REPO = Path(__file__).parents[1]
NPM_DIR = REPO / ".npm"
"""Where ``make test`` installs the pinned package (the Makefile's ``NPM_DIR``)."""
PINNED = json.loads((REPO / "tests" / "mcp_everything" / "package.json").read_text())["dependencies"][
    "@modelcontextprotocol/server-everything"
]
PACKAGE = NPM_DIR / "node_modules" / "@modelcontextprotocol" / "server-everything"
MAIN = PACKAGE / "dist" / "index.js"
SERVER = "everything"
"""The name the server has in every configuration of this file: its tools are ``mcp__everything__<tool>``."""
NODE = shutil.which("node")
pytestmark = pytest.mark.slow  # each test starts node servers: about 1 s idle, 2-5 s on a loaded machine


def _missing() -> str:
    """Why the conformance run cannot run here ('' when it can)."""
    if NODE is None:
        return "node is not installed (Node.js 18 or newer; make test installs the package with npm)"
    if not MAIN.is_file():
        return f"{PACKAGE} is not installed: run make test (or make .npm/.installed)"
    installed = json.loads((PACKAGE / "package.json").read_text()).get("version")
    if installed != PINNED:
        return f"{PACKAGE} is version {installed}, not the pinned {PINNED}: run make .npm/.installed"
    return ""


MISSING = _missing()


@pytest.fixture(autouse=True)
def _needs_everything() -> None:
    """Skip here, fail in CI, when the server cannot run (see the module's docstring)."""
    if MISSING:
        if os.environ.get("CI"):
            pytest.fail(f"the MCP conformance run needs its server: {MISSING}")
        pytest.skip(MISSING)


@dataclass
class Everything:
    """How one transport reaches server-everything: the entry as ``.mcp.json`` writes it, the hosts the team
    file names in ``[mcp] private_hosts``, and the sandbox policy a stdio server runs under."""

    transport: str
    entry: dict[str, Any]
    private_hosts: tuple[str, ...] = ()
    policy: SandboxPolicy = field(default_factory=SandboxPolicy)
    log: Path | None = None
    """An HTTP server's output (it runs outside teamrt), for a failing test to show."""


def stdio_everything(**entry: Any) -> Everything:
    """server-everything over stdio, started by teamrt in its sandbox. The package lies in the repository,
    which may be under a home the sandbox hides: ``[sandbox] read`` shows it, as a person would."""
    return Everything(
        "stdio",
        {"command": "node", "args": [str(MAIN), "stdio"], **entry},
        policy=SandboxPolicy(read=(str(NPM_DIR),)),
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def served(mode: str, path: str, tmp_path: Path) -> Iterator[Everything]:
    """server-everything in ``mode`` (``streamableHttp``, ``sse``) on a loopback port, as a service a person
    runs: started here, outside teamrt; the entry names 127.0.0.1 and the team file allows it."""
    log = tmp_path / f"everything-{mode}.log"
    for _ in range(3):  # another process may take the free port before the server binds it
        port = _free_port()
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [str(NODE), str(MAIN), mode], env={**os.environ, "PORT": str(port)}, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        try:
            if within(30, functools.partial(_listening, proc, port)):
                kind = "http" if mode == "streamableHttp" else "sse"
                entry = {"type": kind, "url": f"http://127.0.0.1:{port}{path}"}
                yield Everything(kind, entry, private_hosts=(f"127.0.0.1:{port}",), log=log)
                return
        finally:
            proc.kill()
            proc.wait()
    pytest.fail(f"server-everything {mode} did not start: {log.read_text()[-2000:]}")


def _listening(proc: subprocess.Popen[bytes], port: int) -> bool:
    """Wait until ``proc`` accepts connections on ``port`` (True) or exits (False)."""
    while proc.poll() is None:
        with socket.socket() as s:
            s.settimeout(0.2)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(0.05)
    return False


@pytest.fixture(params=["stdio", "http"])
def everything(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Everything]:
    """server-everything over each transport Claude Code's set-ups name in the wild."""
    if request.param == "stdio":
        yield stdio_everything()
    else:
        with served("streamableHttp", "/mcp", tmp_path) as found:
            yield found


@contextlib.asynccontextmanager
async def open_servers(
    everything: Everything, ws: Path, *, timeout: float | None = None
) -> AsyncIterator[McpServers]:
    """A run's ``McpServers`` holding server-everything as the person's own server ``SERVER``, prepared
    (started and its tools listed); stopped on exit. ``timeout``: the entry's seconds per call."""
    entry = dict(everything.entry, **({"timeout": timeout} if timeout is not None else {}))
    config = parse_entry(SERVER, entry, scope="team", source="test")
    run_dir = ws / ".teamrt" / "runs" / "r1"
    run_dir.mkdir(parents=True, exist_ok=True)
    confinement = Confinement(workspace=ws, run_dir=run_dir, policy=everything.policy)
    servers = McpServers(McpConfig({SERVER: config}, private_hosts=everything.private_hosts), confinement)
    try:
        await servers.prepare([SERVER])
        state, error = servers.state(SERVER)
        assert state == "running", f"{error}\n{everything.log.read_text()[-2000:] if everything.log else ''}"
        yield servers
    finally:
        await servers.close()


def tools_of(servers: McpServers) -> dict[str, McpTool]:
    """The server's tools by their own names (``echo``, ``get-sum``)."""
    return {t.tool: t for t in servers.tools([SERVER])}


async def call(tool: McpTool, **args: Any) -> ToolResult:
    return await tool.run(args, ToolContext(workspace=Path("/"), run_dir=Path("/")))


def conformance(everything: Everything, ws: Path, check: Any, *, timeout: float | None = None) -> None:
    """Run ``check(servers)`` (async) against a prepared server, bounded."""

    async def go() -> None:
        async with open_servers(everything, ws, timeout=timeout) as servers:
            await check(servers)

    within(90, lambda: asyncio.run(go()))


# -- tools that need no client capability ----------------------------------------------------------------


def test_the_tools_of_the_pinned_version_are_listed_with_their_schemas(
    everything: Everything, ws: Path
) -> None:
    async def check(servers: McpServers) -> None:
        tools = tools_of(servers)
        plain = {
            "echo", "get-annotated-message", "get-env", "get-resource-links", "get-resource-reference",
            "get-structured-content", "get-sum", "get-tiny-image", "trigger-long-running-operation",
        }  # fmt: skip
        assert plain <= set(tools), sorted(tools)
        assert not servers.refused(SERVER)
        assert tools["echo"].name == "mcp__everything__echo" and tools["echo"].read_only
        assert tools["get-sum"].input_schema["type"] == "object"
        assert set(tools["get-sum"].input_schema["properties"]) == {"a", "b"}

    conformance(everything, ws, check)


def test_echo_add_and_structured_content(everything: Everything, ws: Path) -> None:
    async def check(servers: McpServers) -> None:
        tools = tools_of(servers)
        assert await call(tools["echo"], message="hé 🌍") == ToolResult("Echo: hé 🌍")
        assert await call(tools["get-sum"], a=2, b=40.5) == ToolResult("The sum of 2 and 40.5 is 42.5.")
        weather = await call(tools["get-structured-content"], location="New York")
        assert isinstance(weather.content, str) and not weather.is_error
        assert set(json.loads(weather.content)) >= {"temperature", "conditions", "humidity"}
        refused = await call(tools["get-sum"], a="two", b=2)  # the server's own input check
        assert refused.is_error or "error" in str(refused.content).lower()

    conformance(everything, ws, check)


def test_images_annotated_messages_and_resources_in_results(everything: Everything, ws: Path) -> None:
    async def check(servers: McpServers) -> None:
        tools = tools_of(servers)
        image = await call(tools["get-tiny-image"])
        assert isinstance(image.content, list)
        [picture] = [b for b in image.content if b["type"] == "image"]
        assert picture["source"]["media_type"] == "image/png" and len(picture["source"]["data"]) > 100

        annotated = await call(tools["get-annotated-message"], messageType="error", includeImage=True)
        assert isinstance(annotated.content, list)
        assert [b["type"] for b in annotated.content] == ["text", "image"]

        links = await call(tools["get-resource-links"], count=3)
        assert isinstance(links.content, str)
        assert links.content.count("[resource link: ") == 3
        assert "demo://resource/dynamic/text/2" in links.content

        text = await call(tools["get-resource-reference"], resourceType="Text", resourceId=2)
        assert isinstance(text.content, str)
        assert "[resource demo://resource/dynamic/text/2]" in text.content
        blob = await call(tools["get-resource-reference"], resourceType="Blob", resourceId=2)
        assert "[resource demo://resource/dynamic/blob/2: " in str(blob.content)

    conformance(everything, ws, check)


def test_a_long_running_operation_finishes_or_times_out_and_the_server_goes_on(
    everything: Everything, ws: Path
) -> None:
    async def check(servers: McpServers) -> None:
        tools = tools_of(servers)
        done = await call(tools["trigger-long-running-operation"], duration=0.2, steps=2)
        assert "completed" in str(done.content).lower(), done
        with pytest.raises(ToolError, match="did not answer within 1 s"):
            await call(tools["trigger-long-running-operation"], duration=30, steps=3)
        assert await call(tools["echo"], message="after") == ToolResult("Echo: after")

    conformance(everything, ws, check, timeout=1)


def test_the_environment_a_stdio_server_gets_is_the_allowlist_and_its_own_env(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-never-passed")
    everything = stdio_everything(env={"EVERYTHING_GREETING": "${EVERYTHING_UNSET:-hi}"})

    async def check(servers: McpServers) -> None:
        env = json.loads(str((await call(tools_of(servers)["get-env"])).content))
        assert env["EVERYTHING_GREETING"] == "hi"
        assert not [k for k in env if k.startswith("ANTHROPIC") or k == "TEAMRT_DB"]
        assert set(env) <= {"PATH", "HOME", "LANG", "TERM", "TZ", "USER", "LOGNAME", "PWD", "SHLVL", "_",
                            "OLDPWD", "PYTHONDONTWRITEBYTECODE", "EVERYTHING_GREETING"} | {
            k for k in env if k.startswith("LC_")}  # fmt: skip

    conformance(everything, ws, check)


# -- resources (Claude Code's ListMcpResourcesTool and ReadMcpResourceTool) ---------------------------------


def agent(name: str = "lead", tools: list[str] | None = None, disallowed: tuple[str, ...] = ()) -> Any:
    """An agent definition as ``McpServers.tools_for`` reads one (its name, tools and disallowed tools)."""
    listed = None if tools is None else tuple(tools)
    return types.SimpleNamespace(name=name, tools=listed, disallowed_tools=disallowed)


def test_resources_are_listed_with_their_templates_and_read_as_text_and_blobs(
    everything: Everything, ws: Path
) -> None:
    async def check(servers: McpServers) -> None:
        offered = {t.name: t for t in servers.tools_for(agent())}
        listing, reading = offered["ListMcpResourcesTool"], offered["ReadMcpResourceTool"]
        assert listing.read_only and reading.read_only
        assert reading.input_schema["required"] == ["server", "uri"]
        assert reading.input_schema["properties"]["server"]["enum"] == [SERVER]

        listed = await call(listing)
        assert isinstance(listed.content, str) and not listed.is_error
        found = json.loads(listed.content)
        uris = {e["uri"] for e in found if "uri" in e}
        assert "demo://resource/static/document/features.md" in uris
        templates = {e["uriTemplate"] for e in found if "uriTemplate" in e}
        assert templates == {
            "demo://resource/dynamic/text/{resourceId}",
            "demo://resource/dynamic/blob/{resourceId}",
        }
        assert all(e["server"] == SERVER for e in found)
        assert json.loads(str((await call(listing, server=SERVER)).content)) == found

        doc = await call(reading, server=SERVER, uri="demo://resource/static/document/features.md")
        assert isinstance(doc.content, str)
        assert doc.content.startswith("[resource demo://resource/static/document/features.md]\n# Everything")
        text = await call(
            reading, server=SERVER, uri="demo://resource/dynamic/text/7"
        )  # a template filled in
        assert "[resource demo://resource/dynamic/text/7]" in str(text.content)
        blob = await call(reading, server=SERVER, uri="demo://resource/dynamic/blob/7")
        assert str(blob.content).startswith("[resource demo://resource/dynamic/blob/7: ")
        with pytest.raises(ToolError, match=r"MCP server 'everything' refused ReadMcpResourceTool of"):
            await call(reading, server=SERVER, uri="demo://resource/nowhere")
        with pytest.raises(ToolError, match=r"no MCP server \"other\" with resources here"):
            await call(reading, server="other", uri="demo://resource/dynamic/text/1")

        narrow = {t.name for t in servers.tools_for(agent(tools=["mcp__everything__echo"]))}
        assert narrow == {"mcp__everything__echo"}  # an agent's tools list leaves the resource tools out
        barred = {t.name for t in servers.tools_for(agent(disallowed=("ReadMcpResourceTool",)))}
        assert "ListMcpResourcesTool" in barred and "ReadMcpResourceTool" not in barred

    conformance(everything, ws, check)


def test_the_deprecated_sse_transport_reaches_the_server_under_the_same_checks(
    tmp_path: Path, ws: Path
) -> None:
    with served("sse", "/sse", tmp_path) as found:

        async def check(servers: McpServers) -> None:
            tools = tools_of(servers)
            assert await call(tools["echo"], message="over sse") == ToolResult("Echo: over sse")
            image = await call(tools["get-tiny-image"])
            assert isinstance(image.content, list) and "image" in [b["type"] for b in image.content]
            [reading] = [t for t in servers.tools_for(agent()) if t.name == "ReadMcpResourceTool"]
            doc = await call(reading, server=SERVER, uri="demo://resource/dynamic/text/3")
            assert "[resource demo://resource/dynamic/text/3]" in str(doc.content)

        conformance(found, ws, check)

        refused = Everything("sse", found.entry)  # the team file does not name the loopback host

        async def refusing() -> tuple[str, str]:
            config = parse_entry(SERVER, refused.entry, scope="team", source="test")
            run_dir = ws / ".teamrt" / "runs" / "r2"
            run_dir.mkdir(parents=True)
            servers = McpServers(McpConfig({SERVER: config}), Confinement(workspace=ws, run_dir=run_dir))
            try:
                await servers.prepare([SERVER])
                return servers.state(SERVER)
            finally:
                await servers.close()

        state, error = within(60, lambda: asyncio.run(refusing()))
    assert state == "failed" and "[mcp] private_hosts" in error, error


# -- the client's capabilities: roots, sampling, elicitation, progress, logging (teamrt.mcp.capabilities) --


@contextlib.asynccontextmanager
async def open_with_host(
    everything: Everything, ws: Path, host: Any, journal: Any
) -> AsyncIterator[McpServers]:
    """``open_servers``, with ``host`` answering the server's sampling and elicitation requests and
    ``journal`` (a store's ``append_event``) keeping the client's events."""
    config = parse_entry(SERVER, everything.entry, scope="team", source="test")
    run_dir = ws / ".teamrt" / "runs" / "r1"
    run_dir.mkdir(parents=True, exist_ok=True)
    confinement = Confinement(workspace=ws, run_dir=run_dir, policy=everything.policy)
    config_all = McpConfig({SERVER: config}, private_hosts=everything.private_hosts)
    servers = McpServers(config_all, confinement, store=journal, host=host)
    try:
        await servers.prepare([SERVER])
        assert servers.state(SERVER)[0] == "running", servers.state(SERVER)
        yield servers
    finally:
        await servers.close()


def with_host(everything: Everything, ws: Path, host: Any, check: Any) -> Any:
    """Run ``check(servers)`` against a server whose requests ``host`` answers; the journal kept."""
    from tests.mcp.test_mcp_client_caps import Journal

    journal = Journal()

    async def go() -> None:
        async with open_with_host(everything, ws, host, journal) as servers:
            await check(servers)

    within(90, lambda: asyncio.run(go()))
    return journal


LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


async def as_agent(tool: McpTool, agent: str = "lead", **args: Any) -> ToolResult:
    return await tool.run(args, ToolContext(workspace=Path("/"), run_dir=Path("/"), agent=agent))


def test_the_capability_tools_appear_and_the_roots_are_the_workspace(
    everything: Everything, ws: Path
) -> None:
    from tests.mcp.test_mcp_client_caps import Host

    async def check(servers: McpServers) -> None:
        tools = tools_of(servers)
        shown = {
            "get-roots-list",
            "trigger-sampling-request",
            "trigger-elicitation-request",
            "trigger-url-elicitation",
        }
        assert shown <= set(tools), sorted(tools)
        roots = str((await as_agent(tools["get-roots-list"])).content)
        assert "(1 total)" in roots and f"URI: {ws.resolve().as_uri()}" in roots

    with_host(everything, ws, Host(), check)


def test_sampling_from_everything_reaches_the_host_capped_and_answers_it(
    everything: Everything, ws: Path
) -> None:
    from tests.mcp.test_mcp_client_caps import Host

    host = Host()

    async def check(servers: McpServers) -> None:
        tool = tools_of(servers)["trigger-sampling-request"]
        said = str((await as_agent(tool, prompt="two words", maxTokens=1_000_000)).content)
        assert "LLM sampling result" in said and "sampled red" in said and "\\u001b" not in said

    journal = with_host(everything, ws, host, check)
    ((agent, server, request),) = host.sampled
    assert (agent, server) == ("lead", SERVER) and request.asked_tokens == 1_000_000
    assert request.max_tokens == 4096 and request.system == "You are a helpful test server."
    assert request.temperature == 0.7 and "two words" in request.messages[0]["content"][0]["text"]
    assert [e["model"] for e in journal.of("mcp.sampled")] == ["sim"]


def test_everythings_form_is_answered_with_checked_values_or_declined(
    everything: Everything, ws: Path
) -> None:
    from teamrt.mcp.capabilities import Elicited
    from tests.mcp.test_mcp_client_caps import Host

    note = (
        "name=Ada; email=ada@example.org; untitledMultipleSelectEnum=Piano, Drums;"
        " titledSingleSelectEnum=Wonder Woman"
    )
    host = Host([Elicited("accept", note), Elicited("decline")])

    async def check(servers: McpServers) -> None:
        tool = tools_of(servers)["trigger-elicitation-request"]
        accepted = str((await as_agent(tool)).content)
        assert "- Name: Ada" in accepted and "- Email: ada@example.org" in accepted
        raw = json.loads(accepted.split("Raw result: ", 1)[1])
        assert raw["content"]["untitledMultipleSelectEnum"] == ["Piano", "Drums"]
        assert raw["content"]["titledSingleSelectEnum"] == "hero-3"  # the title chosen, its value sent
        assert raw["content"]["integer"] == 42 and raw["content"]["firstLine"].startswith(
            "It was"
        )  # defaults
        assert "declined" in str((await as_agent(tool)).content)

    journal = with_host(everything, ws, host, check)
    form = host.asked[0][1]
    assert len(form.fields) == 13 and [f.name for f in form.fields if f.required] == ["name"]
    assert [e["action"] for e in journal.of("mcp.elicited")] == ["accept", "decline"]


def test_a_url_elicitation_is_put_to_the_person_with_its_address(everything: Everything, ws: Path) -> None:
    from tests.mcp.test_mcp_client_caps import Host

    host = Host()  # it declines

    async def check(servers: McpServers) -> None:
        tool = tools_of(servers)["trigger-url-elicitation"]
        said = str((await as_agent(tool, url="https://example.org/consent")).content)
        assert "decline" in said.lower()

    with_host(everything, ws, host, check)
    assert host.asked[0][1].url == "https://example.org/consent" and host.asked[0][1].fields == ()


def test_a_long_operations_progress_and_the_servers_logs_are_journaled(
    everything: Everything, ws: Path
) -> None:
    from tests.mcp.test_mcp_client_caps import Host

    async def check(servers: McpServers) -> None:
        tools = tools_of(servers)
        done = await as_agent(tools["trigger-long-running-operation"], duration=2.5, steps=5)
        assert "completed" in str(done.content).lower()
        await as_agent(tools["toggle-simulated-logging"])  # one message at once, then one each 5 s

    journal = with_host(everything, ws, Host(), check)
    progress = journal.of("mcp.progress")
    assert 2 <= len(progress) <= 5 and all(p["total"] == 5 for p in progress)
    assert progress == sorted(progress, key=lambda p: p["progress"])
    assert all(agent == "lead" for kind, _, agent in journal.events if kind == "mcp.progress")
    logs = journal.of("mcp.log")
    assert any(log["text"].startswith("Roots updated: 1 root") for log in logs)  # at its start
    assert any("message" in log["text"].lower() and log["level"] in LEVELS for log in logs)  # the toggled


@pytest.mark.parametrize(("rules", "allowed"), [('allow = ["mcp__everything"]', True),
                                                ('deny = ["mcp__everything"]', False)])  # fmt: skip
def test_an_agent_reads_a_resource_in_a_run_under_its_servers_rules(
    tmp_path: Path, rules: str, allowed: bool
) -> None:
    """Through the real loop on sim: the model lists the resources, then reads one; ``mcp__everything``
    rules decide the read as they decide the server's tools."""
    from teamrt.models import Reply
    from teamrt.sim import SimRequest, SimServer
    from tests.helpers.teams import supervise

    project = tmp_path / "project"
    project.mkdir()
    (project / "team.toml").write_text(
        f'[team]\nname = "t"\nmodel = "sim"\n[permissions]\n{rules}\n'
        f"[sandbox]\nread = [{json.dumps(str(NPM_DIR))}]\n"
        f'[mcp.servers.{SERVER}]\ncommand = "node"\nargs = {json.dumps([str(MAIN), "stdio"])}\n'
    )
    seen: list[SimRequest] = []
    uri = "demo://resource/static/document/features.md"

    def lead(request: SimRequest) -> Reply:
        seen.append(request)
        if request.turns == 0:
            return Reply().call("ListMcpResourcesTool", {})
        if request.turns == 1:
            return Reply().call("ReadMcpResourceTool", {"server": SERVER, "uri": uri})
        return Reply().say("done")

    with SimServer({"lead": lead}) as sim:
        outcome = supervise(project, sim, tmp_path / "run")
    assert outcome.status == "done", outcome
    assert {"ListMcpResourcesTool", "ReadMcpResourceTool"} <= set(seen[0].tool_names)
    [listed] = seen[1].tool_outcomes
    assert not listed.is_error and uri in listed.output
    [read] = seen[2].tool_outcomes
    if allowed:
        assert not read.is_error and read.output.startswith(f"[resource {uri}]\n# Everything"), read
    else:
        assert read.is_error and 'denied by rule "mcp__everything"' in read.output, read


# -- prompts: the person's /mcp__everything__<prompt> commands -------------------------------------------


def test_everythings_prompts_are_listed_as_commands_and_expand_with_arguments_and_resources(
    everything: Everything, ws: Path
) -> None:
    from teamrt.mcp.prompts import PromptError, expand, list_prompts

    uri_base = "demo://resource/dynamic"  # the pinned version's dynamic resources

    async def check(servers: McpServers) -> None:
        assert await servers.prompt_servers([SERVER]) == [SERVER]
        prompts, problems = await list_prompts(servers, SERVER)
        usage = {p.command: p.usage() for p in prompts}
        assert set(usage) == {
            "/mcp__everything__args-prompt", "/mcp__everything__completable-prompt",
            "/mcp__everything__resource-prompt", "/mcp__everything__simple-prompt",
        } and not problems  # fmt: skip
        assert usage["/mcp__everything__args-prompt"] == "/mcp__everything__args-prompt <city> [state]"
        simple = await expand(servers, "/mcp__everything__simple-prompt")
        assert simple is not None
        assert simple.blocks == [{"type": "text", "text": "This is a simple prompt without arguments."}]
        args = await expand(servers, '/mcp__everything__args-prompt "New York" NY')
        assert args is not None and args.blocks[0]["text"] == "What's weather in New York, NY?"
        with pytest.raises(PromptError, match="missing city"):
            await expand(servers, "/mcp__everything__args-prompt")
        embedded = await expand(servers, "/mcp__everything__resource-prompt Text 1")
        assert embedded is not None and len(embedded.blocks) == 2
        assert embedded.blocks[0]["text"].startswith("This prompt includes the Text resource with id: 1.")
        assert embedded.blocks[1]["text"].startswith(f"[resource {uri_base}/text/1]\n")
        with pytest.raises(PromptError, match="refused prompt 'resource-prompt'"):
            await expand(servers, "/mcp__everything__resource-prompt Nonsense 1")

    conformance(everything, ws, check)
