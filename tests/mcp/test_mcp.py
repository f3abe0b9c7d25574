"""MCP servers against real servers (tests/helpers/procs/mcp_server.py, over stdio and streamable HTTP):
listing, calls, errors, timeouts, images, a server killed mid-call, a supervisor killed mid-call, and
attacks."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from teamrt.api import RunResult
from teamrt.claudecode.paths import claude_home
from teamrt.cli import main
from teamrt.mcp.config import McpConfig, ServerConfig, load_mcp_config, parse_entry
from teamrt.mcp.servers import EXITED, FAILED, NOTICE, PROCESS, STARTED, McpServers
from teamrt.mcp.tools import McpTool
from teamrt.models import Reply, ScriptedModel
from teamrt.procs import is_running
from teamrt.sandbox.bwrap import default_sandbox
from teamrt.sandbox.confinement import Confinement
from teamrt.sim import SimRequest, SimServer
from teamrt.store import open_reader
from teamrt.testing import run_on_sim
from teamrt.tools.base import ToolContext, ToolError, ToolResult
from tests.helpers.machine import needs_bwrap
from tests.helpers.teams import FAST, kept, supervise
from tests.helpers.waiting import within

SERVER = str(Path(__file__).parents[1] / "helpers" / "procs" / "mcp_server.py")
PNG_DATA = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def entry(*args: str, **more: Any) -> dict[str, Any]:
    """A stdio entry running tests/helpers/procs/mcp_server.py with ``args``."""
    return {"command": sys.executable, "args": [SERVER, *args], **more}


def servers_of(ws: Path, private_hosts: tuple[str, ...] = (), **entries: dict[str, Any]) -> McpServers:
    """The person's own servers ``entries``; ``private_hosts``: as the team file's ``[mcp] private_hosts``."""
    configs = {name: parse_entry(name, e, scope="team", source="test") for name, e in entries.items()}
    run_dir = ws / ".teamrt" / "runs" / "r1"
    run_dir.mkdir(parents=True, exist_ok=True)
    config = McpConfig(configs, private_hosts=private_hosts)
    return McpServers(config, Confinement(workspace=ws, run_dir=run_dir))


def by_name(servers: McpServers, *names: str) -> dict[str, McpTool]:
    return {t.name: t for t in servers.tools(names)}


async def run(tool: McpTool, **args: Any) -> ToolResult:
    return await tool.run(args, ToolContext(workspace=Path("/"), run_dir=Path("/")))


def test_a_stdio_server_lists_its_tools_and_answers_fails_times_out_and_returns_images(ws: Path) -> None:
    async def go() -> None:
        servers = servers_of(ws, t=entry(env={"MCP_GREETING": "${MCP_UNSET:-hello}"}, timeout=1))
        try:
            await servers.prepare(["t"])
            assert servers.state("t") == ("running", "")
            tools = by_name(servers, "t")
            assert list(tools) == sorted(tools) and "mcp__t__echo" in tools
            assert tools["mcp__t__echo"].read_only and not tools["mcp__t__write_note"].read_only
            schema = tools["mcp__t__echo"].input_schema
            assert schema["type"] == "object" and schema["required"] == ["text"]

            assert await run(tools["mcp__t__echo"], text="hi") == ToolResult("hi")
            assert await run(tools["mcp__t__fail"]) == ToolResult("failed: it always fails", is_error=True)
            image = await run(tools["mcp__t__image"])
            assert image.content == [
                {"type": "text", "text": "a 1x1 PNG:"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_DATA}},
            ]
            said = await run(tools["mcp__t__resource"])
            assert (
                said.content
                == "[resource file:///notes.txt]\nthe notes\n[resource link: doc https://example.invalid/doc]"
            )
            with pytest.raises(ToolError, match=r"mcp__t__hang did not answer within 1 s"):
                await run(tools["mcp__t__hang"])
            assert await run(tools["mcp__t__echo"], text="still here") == ToolResult("still here")

            whoami = str((await run(tools["mcp__t__whoami"])).content)
            assert f"cwd={ws}" in whoami and "MCP_GREETING=hello" in whoami and "ANTHROPIC" not in whoami
            if default_sandbox().confined:  # in the sandbox: no network, a PID namespace of its own
                assert "network: no" in whoami and "pid=2 " in whoami
        finally:
            await servers.close()

    within(60, lambda: asyncio.run(go()))


@needs_bwrap  # what the sandbox hides; in CI a missing bwrap fails it
@pytest.mark.hostile
def test_attack_a_server_in_a_hidden_place_sees_its_own_file_and_nothing_beside_it(
    ws: Path, tmp_path: Path
) -> None:
    """The sandbox hides /tmp and the homes; a server whose script lives there (``python
    ~/mcp/server.py``) still starts, its script shown read-only, and a file beside it stays hidden."""
    hidden = tmp_path / "elsewhere"  # under /tmp (pytest's tmp_path): hidden in the sandbox
    hidden.mkdir()
    script = hidden / "server.py"
    script.write_bytes(Path(SERVER).read_bytes())
    (hidden / "secret.txt").write_text("do not read")

    async def go() -> None:
        servers = servers_of(ws, t={"command": sys.executable, "args": [str(script)]})
        try:
            await servers.prepare(["t"])
            assert servers.state("t") == ("running", "")
            tools = by_name(servers, "t")
            own = await run(tools["mcp__t__read_note"], path=str(script))
            assert not own.is_error and "def main() -> None:" in own.text
            assert (await run(tools["mcp__t__read_note"], path=str(hidden / "secret.txt"))).is_error
            assert (await run(tools["mcp__t__write_note"], path=str(script), text="planted")).is_error
        finally:
            await servers.close()

    within(60, lambda: asyncio.run(go()))
    assert "planted" not in script.read_text()


@pytest.fixture
def http_server() -> Iterator[str]:
    """tests/helpers/procs/mcp_server.py over streamable HTTP on 127.0.0.1: its URL."""
    proc = subprocess.Popen([sys.executable, SERVER, "--http"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield within(30, proc.stdout.readline).strip()
    finally:
        proc.kill()
        proc.wait()


def test_a_streamable_http_server_gets_its_headers_and_answers_fails_and_times_out(
    ws: Path, http_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_TEST_TOKEN", "sesame")
    headers = {"X-Token": "Bearer ${MCP_TEST_TOKEN}", "X-Other": "${MCP_NOT_SET:-fallback}"}

    async def go() -> None:
        web = {"type": "http", "url": http_server, "headers": headers, "timeout": 1}
        servers = servers_of(ws, private_hosts=("127.0.0.1",), web=web)  # the test server is on loopback
        try:
            await servers.prepare(["web"])
            tools = by_name(servers, "web")
            assert tools["mcp__web__echo"].read_only
            assert await run(tools["mcp__web__echo"], text="over http") == ToolResult("over http")
            assert await run(tools["mcp__web__header"], name="x-token") == ToolResult("Bearer sesame")
            assert await run(tools["mcp__web__header"], name="x-other") == ToolResult("fallback")
            assert (await run(tools["mcp__web__fail"], why="no")).is_error
            image = (await run(tools["mcp__web__image"])).content
            assert isinstance(image, list) and [b["type"] for b in image] == ["text", "image"]
            with pytest.raises(ToolError, match="did not answer within 1 s"):
                await run(tools["mcp__web__hang"])
        finally:
            await servers.close()

    within(60, lambda: asyncio.run(go()))


@contextlib.contextmanager
def unauthorized_server() -> Iterator[tuple[str, list[str]]]:
    """A loopback HTTP server that answers every request 401 with an OAuth challenge, as a server behind
    OAuth does: its URL, and the Authorization headers it was sent."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def answer(self) -> None:
            seen.append(self.headers.get("Authorization", ""))
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = b'{"error": "invalid_token"}'
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Bearer resource_metadata="http://127.0.0.1/.well-known/x"')
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_DELETE = answer

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(("kind", "path"), [("http", "/mcp"), ("sse", "/sse")])
def test_a_server_answering_401_fails_its_start_with_one_line_naming_oauth_and_what_to_do(
    ws: Path, kind: str, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_TEST_TOKEN", "expired")
    with unauthorized_server() as (url, seen):

        async def go() -> tuple[str, str]:
            entry = {
                "type": kind,
                "url": url + path,
                "headers": {"Authorization": "Bearer ${MCP_TEST_TOKEN}"},
            }
            servers = servers_of(ws, private_hosts=("127.0.0.1",), locked=entry)
            try:
                await servers.prepare(["locked"])
                return servers.state("locked")
            finally:
                await servers.close()

        state, error = within(60, lambda: asyncio.run(go()))
    assert state == "failed" and "\n" not in error, error
    assert error.startswith("could not start: the server answered 401 Unauthorized (WWW-Authenticate: Bearer")
    assert "OAuth sign-in, which teamrt does not run" in error
    assert '"headers": {"Authorization": "Bearer ${TOKEN}"}' in error
    assert seen and seen[0] == "Bearer expired"  # the configured header was sent


# -- in a run -------------------------------------------------------------------------------------------


def team_toml(project: Path, servers: str, *, allow: str = '"mcp__t"') -> None:
    (project / "team.toml").write_text(
        f'[team]\nname = "m"\nmodel = "sim"\n[permissions]\nallow = [{allow}]\n{servers}'
    )


def stdio_table(name: str = "t", *args: str, timeout: int = 60) -> str:
    return (
        f"[mcp.servers.{name}]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = {json.dumps([SERVER, *args])}\ntimeout = {timeout}\n"
    )


def test_an_image_reaches_the_model_as_an_image_block_and_the_tools_come_sorted_after_the_builtins(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    team_toml(project, stdio_table("t") + stdio_table("a"), allow='"mcp__t", "mcp__a"')

    def lead(request: SimRequest) -> Reply:
        if request.turns == 0:
            return Reply().call("mcp__t__image", {}).call("mcp__a__echo", {"text": "x"})
        return Reply().say("seen")

    with SimServer({"lead": lead}, record=True) as sim:
        outcome = supervise(project, sim, tmp_path / "run")
        assert outcome.status == "done", outcome
        bodies = [json.loads(body) for _, body in sim.bodies]
    names = [t["name"] for t in bodies[0]["tools"]]
    mcp = [n for n in names if n.startswith("mcp__")]
    assert mcp == sorted(mcp) and mcp[0] == "mcp__a__crash"
    # the servers declare resources: Claude Code's resource tools come after their tools, last
    assert names[-len(mcp) - 2 :] == [*mcp, "ListMcpResourcesTool", "ReadMcpResourceTool"]
    results = {
        b["tool_use_id"]: b for b in bodies[1]["messages"][-1]["content"] if b["type"] == "tool_result"
    }
    image, echo = results.values()
    assert image["content"][1] == {
        "type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_DATA}
    }  # fmt: skip
    assert echo["content"] == "x"


def leader_of(marker: str) -> int | None:
    """The process group of the process whose command line holds ``marker`` (a server the test started)."""
    for entry_ in os.scandir("/proc"):
        if entry_.name.isdigit():
            try:
                cmdline = Path(entry_.path, "cmdline").read_bytes()
                if marker.encode() in cmdline:
                    return os.getpgid(int(entry_.name))
            except OSError:
                continue
    return None


def kill_when(path: Path, text: str, marker: str) -> threading.Thread:
    """A thread that SIGKILLs the server marked ``marker`` once ``path`` holds ``text``."""

    def watch() -> None:
        while not (path.exists() and text in path.read_text()):
            threading.Event().wait(0.02)
        group = leader_of(marker)
        assert group is not None
        os.killpg(group, signal.SIGKILL)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def lead_run(project: Path, run_dir: Path, steps: list[Reply]) -> tuple[ScriptedModel, Any]:
    """The project's team led by a scripted model taking ``steps``; the model and the run's events."""
    model = ScriptedModel(steps)
    outcome = run_on_sim(
        project / "team.toml",
        "go",
        project=project,
        run_dir=run_dir,
        run_id="r1",
        settings=FAST,
        timeout=90,
        models={"sim": model},
    )
    assert outcome.status == "done", outcome
    return model, kept(outcome).reader.events()


def results_of(model: ScriptedModel, turn: int) -> list[tuple[Any, bool]]:
    blocks = model.requests[turn].messages[-1]["content"]
    return [(b["content"], bool(b.get("is_error"))) for b in blocks if b.get("type") == "tool_result"]


def test_a_server_killed_mid_call_gives_a_clear_error_and_is_restarted_once(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    marker = "killed-mid-call"
    team_toml(project, stdio_table("t", "--marker", marker))
    first, second, never = project / "first", project / "second", str(project / "never")
    killers = [kill_when(first, "one", marker), kill_when(second, "two", marker)]
    steps = [
        Reply().call("mcp__t__write_note", {"path": str(first), "text": "one", "wait_for": never}),
        Reply()
        .call("mcp__t__echo", {"text": "back"})
        .call("mcp__t__write_note", {"path": str(second), "text": "two", "wait_for": never}),
        Reply().call("mcp__t__echo", {"text": "gone"}),
        Reply().say("done"),
    ]
    model, events = lead_run(project, tmp_path / "run", steps)
    for killer in killers:
        killer.join(5)
    [(said, failed)] = results_of(model, 1)
    assert (
        failed and "the MCP server 't' was killed by signal 9 during the call, which did not finish" in said
    )
    assert said.endswith("it is started again for the next call")
    [(echo, echo_failed), (again, again_failed)] = results_of(model, 2)
    assert (echo, echo_failed) == ("back", False)
    assert (
        again_failed
        and "had been restarted once already, so its tools fail for the rest of this run" in again
    )
    [(gone, gone_failed)] = results_of(model, 3)
    assert gone_failed and "is not running" in gone and "not started again" in gone
    assert [e.data["attempt"] for e in events if e.kind == STARTED] == [1, 2]
    assert [e.data["restart"] for e in events if e.kind == EXITED] == [True, False]
    assert first.read_text() == "one\n" and second.read_text() == "two\n"


RESUMED_RUN = """
import sys
from pathlib import Path
from teamrt.models import Reply, ScriptedModel
from teamrt.testing import run_on_sim
from tests.helpers.teams import FAST

project, run_dir, note, cue = map(Path, sys.argv[1:5])
model = ScriptedModel([
    Reply()
    .call("mcp__t__write_note", {"path": str(note), "text": "once", "wait_for": str(cue)})
    .call("mcp__t__read_note", {"path": str(note), "wait_for": str(cue)}),
    lambda request: Reply().say("never reached"),
])
run_on_sim(project / "team.toml", "go", project=project, run_dir=run_dir, settings=FAST,
           models={"sim": model})
"""


def test_a_supervisor_killed_mid_call_resumes_reporting_the_write_rerunning_the_read_and_killing_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from teamrt import home
    from teamrt.runtime import teamrun

    monkeypatch.setenv(home.HOME_ENV, str(tmp_path / "home"))
    project = tmp_path / "project"
    project.mkdir()
    team_toml(project, stdio_table("t"))
    run_dir = home.run_dir("r1")
    note, cue = project / "note.txt", project / "cue"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    proc = subprocess.Popen(
        [sys.executable, "-c", RESUMED_RUN, str(project), str(run_dir), str(note), str(cue)], env=env
    )
    try:
        within(60, lambda: _wait_for(lambda: note.exists() and note.read_text() == "once\n"))
        proc.send_signal(signal.SIGKILL)
        assert proc.wait() == -signal.SIGKILL
    finally:
        proc.kill()
    reader = open_reader(run_dir, "r1")
    try:
        [process] = [e.data for e in reader.events(kinds=(PROCESS,))]
    finally:
        reader.close()
    cue.touch()  # the read-only call, run again, finds it at once

    model = ScriptedModel([Reply().say("resumed")])
    monkeypatch.setattr(teamrun, "open_model", lambda name, **_: model)
    summary = within(90, lambda: asyncio.run(teamrun.resume_run("r1")))
    assert summary.outcome.status == "done", summary
    assert not is_running(process["pid"], process["start_time"])
    [(write, write_failed), (read, read_failed)] = results_of(model, 0)
    assert write_failed and "interrupted by a crash" in write
    assert (read, read_failed) == ("once\n", False)
    assert note.read_text() == "once\n"  # the write ran once
    reader = open_reader(run_dir, "r1")
    try:
        assert len(reader.events(kinds=(PROCESS,))) == 2  # a new server for the resumed run
    finally:
        reader.close()


def _wait_for(condition: Any) -> None:
    while not condition():
        threading.Event().wait(0.05)


# -- attacks ---------------------------------------------------------------------------------------------


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def repository(tmp_path: Path) -> Path:
    """A cloned repository whose .mcp.json starts a server, and whose own settings try to enable it."""
    project = tmp_path / "repo"
    write_json(project / ".mcp.json", {"mcpServers": {"evil": entry()}})
    write_json(project / ".claude" / "settings.json", {"enableAllProjectMcpServers": True})
    write_json(project / ".claude" / "settings.local.json", {"enabledMcpjsonServers": ["evil"]})
    git = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    for args in (["init", "-q"], ["add", "-A", "-f"], ["commit", "-qm", "x"]):
        subprocess.run(["git", *args], cwd=project, env=git, check=True)
    return project


@pytest.mark.hostile
def test_attack_an_untrusted_repositorys_mcp_json_does_not_start_whatever_its_own_settings_say(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = repository(tmp_path)
    config = load_mcp_config(project, {})
    assert config.servers == {} and "not trusted" in config.blocked["evil"].reason

    # the person's own word: their user settings, or trust
    write_json(claude_home() / "settings.json", {"enabledMcpjsonServers": ["evil"]})
    assert "evil" in load_mcp_config(project, {}).servers
    write_json(claude_home() / "settings.json", {"disabledMcpjsonServers": ["evil"]})
    assert "disabled" in load_mcp_config(project, {}).blocked["evil"].reason
    (claude_home() / "settings.json").unlink()
    monkeypatch.chdir(project)
    assert main(["trust"]) == 0
    assert "evil (.mcp.json)" in capsys.readouterr().out
    assert "evil" in load_mcp_config(project, {}).servers
    write_json(project / ".mcp.json", {"mcpServers": {"evil": entry("--changed")}})
    assert "evil" in load_mcp_config(project, {}).blocked  # a change needs trust again

    # an untracked local settings file is the person's (Claude Code writes it when they approve)
    subprocess.run(["git", "rm", "-q", "--cached", ".claude/settings.local.json"], cwd=project, check=True)
    assert "evil" in load_mcp_config(project, {}).servers


def test_a_repositorys_settings_that_would_enable_its_servers_are_said_to_be_ignored(tmp_path: Path) -> None:
    from teamrt.claudecode.settings import load_claude_settings

    project = repository(tmp_path)
    [warning] = load_claude_settings(project).warnings
    assert warning.startswith(".claude/settings.json: 'enableAllProjectMcpServers' ignored: a repository's")


@pytest.mark.hostile
def test_attack_an_untrusted_server_never_runs_in_a_run(tmp_path: Path, sim: SimServer) -> None:
    run_dir = tmp_path / "run"
    project = repository(tmp_path)
    marker = project / "ran"
    write_json(project / ".mcp.json", {"mcpServers": {"evil": {"command": "touch", "args": [str(marker)]}}})
    team_toml(project, "")
    assert supervise(project, sim, run_dir).status == "done"
    assert not marker.exists()
    reader = open_reader(run_dir, "r1")
    try:
        notes = [e.data["note"] for e in reader.events(kinds=(NOTICE,))]
        assert not reader.events(kinds=(PROCESS, STARTED))
    finally:
        reader.close()
    assert any("'evil'" in n and "teamrt trust" in n for n in notes)


def test_a_run_says_at_its_start_which_servers_do_not_start_and_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from teamrt import home

    project = repository(tmp_path)
    monkeypatch.setenv(home.HOME_ENV, str(tmp_path / "home"))
    marker = project / "ran"
    write_json(project / ".mcp.json", {"mcpServers": {"evil": {"command": "touch", "args": [str(marker)]},
                                                      "bad": {"type": "http"}}})  # fmt: skip
    monkeypatch.chdir(project)
    assert main(["run", "--model", "sim", "--prompt", "hi"]) == 0
    err = capsys.readouterr().err
    assert "teamrt: note: MCP server 'evil' (" in err and "run teamrt trust" in err
    assert "teamrt: warning:" in err and "MCP server 'bad': url must be a non-empty string" in err
    assert not marker.exists()


@pytest.mark.parametrize(
    ("written", "said"),
    [
        ({"command": ""}, "command must be a non-empty string"),
        ({"command": "x", "args": "--flag"}, "args must be a list of strings"),
        ({"type": "websocket", "url": "ws://x"}, 'type "websocket" is not one teamrt speaks'),
        ({"type": "sse", "url": "ws://x"}, "url must start with http:// or https://"),
        ({"type": "http", "url": "ftp://x"}, "url must start with http:// or https://"),
        ({"command": "x", "env": {"K": "${ANTHROPIC_API_KEY}"}}, "teamrt's own credential"),
        ({"type": "http", "url": "https://x", "headers": {"A": "${NOT_SET_AT_ALL}"}}, "is not set"),
        ({"command": "x", "timeout": -1}, "timeout must be a number of seconds"),
        ("x", "must be an object"),
    ],
)
@pytest.mark.hostile
def test_attack_a_bad_entry_is_left_out_with_one_line(tmp_path: Path, written: Any, said: str) -> None:
    config = load_mcp_config(tmp_path, {"bad": written, "fine": {"command": "x"}}, team_source="team.toml")
    assert list(config.servers) == ["fine"]
    [problem] = config.problems
    assert problem.startswith("team.toml: MCP server 'bad': ") and said in problem and "\n" not in problem


@pytest.mark.hostile
def test_attack_server_names_that_would_confuse_rules_are_refused(tmp_path: Path) -> None:
    config = load_mcp_config(
        tmp_path, {"a__b": {"command": "x"}, "a b": {"command": "x"}, "ok-1": {"command": "x"}}
    )
    assert list(config.servers) == ["ok-1"] and len(config.problems) == 2
    assert all("without '__'" in p for p in config.problems)


@pytest.mark.hostile
def test_attack_hostile_tool_names_schemas_and_a_huge_result(ws: Path) -> None:
    async def go() -> None:
        servers = servers_of(ws, h=entry("--hostile"), raw=entry("--raw"))
        try:
            await servers.prepare(["h", "raw"])
            tools = by_name(servers, "h")
            assert sorted(tools) == ["mcp__h__dotted_name", "mcp__h__fine", "mcp__h__huge", "mcp__h__wordy"]
            assert tools["mcp__h__dotted_name"].tool == "dotted.name"
            assert len(tools["mcp__h__wordy"].description) == 2048
            refused = servers.refused("h")
            assert len(refused) == 2 and all(line.startswith("MCP server 'h': tool ") for line in refused)
            assert "'__'" in refused[0] and "the API takes 128" in refused[1]
            assert await run(tools["mcp__h__dotted_name"]) == ToolResult("called dotted.name")
            # a listing that is not valid MCP (schemas that are a list, a string) offers nothing, said plainly
            state, error = servers.state("raw")
            assert state == "failed" and error.startswith("could not start: ") and "\n" not in error
            assert servers.tools(["raw"]) == []
        finally:
            await servers.close()

    within(60, lambda: asyncio.run(go()))


@pytest.mark.hostile
def test_attack_a_huge_result_is_spilled_and_the_run_goes_on(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    team_toml(project, stdio_table("t", "--hostile"))
    model, _ = lead_run(project, tmp_path / "run", [Reply().call("mcp__t__huge", {}), Reply().say("done")])
    [(said, failed)] = results_of(model, 1)
    assert not failed and len(said) < 3000 and "[output cut: 300,000 characters in all" in said
    spilled = Path(said.rsplit(" in ", 1)[1].split(";")[0])
    assert spilled.read_text() == "h" * 300_000


@pytest.mark.hostile
def test_attack_an_agent_cannot_write_mcp_json(scene: Any) -> None:
    said = scene.attack(
        ("Write", {"file_path": str(scene.project / ".mcp.json"), "content": json.dumps({"mcpServers": {}})})
    )
    assert said[0].is_error and "protected" in said[0].content
    assert not (scene.project / ".mcp.json").exists()


def test_a_server_that_cannot_start_is_said_and_the_run_goes_on(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    team_toml(project, '[mcp.servers.t]\ncommand = "/nonexistent/mcp-server"\n')
    model, events = lead_run(project, tmp_path / "run", [Reply().say("done")])
    assert not [t for t in model.requests[0].tools if t["name"].startswith("mcp__")]
    [failed] = [e.data for e in events if e.kind == FAILED]
    assert failed["server"] == "t" and failed["error"].startswith("could not start")


# -- agent files and teamrt mcp ------------------------------------------------------------------------------


def test_an_agent_file_names_the_mcp_tools_it_gets_and_brings_its_own_server(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".teamrt" / "agents").mkdir(parents=True)
    (claude_home() / "agents").mkdir(parents=True)
    inline = json.dumps([{"mine": entry()}, "t"])
    (claude_home() / "agents" / "picky.md").write_text(
        f"---\nname: picky\ndescription: d\ntools: Read, mcp__t__echo\nmcpServers: {inline}\n---\nBe picky.\n"
    )
    team_toml(project, stdio_table("t"), allow='"mcp__t", "mcp__mine"')
    (project / "team.toml").write_text((project / "team.toml").read_text() + '[lead]\nagent = "picky"\n')
    model, _ = lead_run(project, tmp_path / "run", [Reply().say("done")])
    names = [t["name"] for t in model.requests[0].tools]
    assert [n for n in names if n.startswith("mcp__")] == ["mcp__mine__crash", *[
        n for n in names if n.startswith("mcp__mine__") and n != "mcp__mine__crash"
    ], "mcp__t__echo"]  # fmt: skip
    assert "Bash" not in names and "Read" in names


def test_teamrt_mcp_lists_servers_their_origin_state_and_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from teamrt import home

    project = repository(tmp_path)
    monkeypatch.setenv(home.HOME_ENV, str(tmp_path / "home"))
    write_json(project / ".teamrt" / "team.toml", {})
    (project / ".teamrt" / "team.toml").write_text('[team]\nname = "m"\nmodel = "sim"\n' + stdio_table("t"))
    monkeypatch.chdir(project)
    assert main(["mcp"]) == 0
    out = capsys.readouterr().out
    assert f"evil  stdio: {sys.executable} {SERVER}" in out and "from: the project's .mcp.json" in out
    assert "starts: no: it came with the repository" in out
    assert "t  stdio:" in out and "from: the team file" in out and "starts: yes" in out

    assert main(["mcp", "--tools"]) == 0
    out = capsys.readouterr().out
    assert "tools (11):" in out and "mcp__t__echo (read-only): Say the text back." in out
    assert "mcp__evil__" not in out  # an untrusted server is not started even to list its tools

    assert main(["mcp", "--run", "nosuchrun"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nosuchrun" in err


def test_teamrt_mcp_shows_a_servers_state_in_a_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from teamrt import home

    monkeypatch.setenv(home.HOME_ENV, str(tmp_path / "home"))
    project = tmp_path / "project"
    project.mkdir()
    team_toml(project, stdio_table("t") + '[mcp.servers.broken]\ncommand = "/nonexistent"\n')
    run_dir = home.run_dir("r1")
    model = ScriptedModel([Reply().call("mcp__t__echo", {"text": "x"}), Reply().say("done")])

    def go() -> RunResult:
        return run_on_sim(
            project / "team.toml",
            "go",
            project=project,
            run_dir=run_dir,
            settings=FAST,
            models={"sim": model},
        )

    assert within(60, go).status == "done"
    assert main(["mcp", "--run", "r1"]) == 0
    out = capsys.readouterr().out
    assert "in the run: stopped with the run" in out and "in the run: failed: could not start" in out


def test_a_resumed_agent_file_keeps_its_mcp_servers() -> None:
    from teamrt.agents.definitions import kept_definition, parse_definition

    servers = '["t", {"u": {"command": "x"}}]'
    text = f"---\nname: a\ndescription: d\ntools: mcp__t, mcp__u__*\nmcpServers: {servers}\n---\nHi\n"
    definition = parse_definition(text, "a.md")
    assert definition.tools == ("mcp__t", "mcp__u__*") and not definition.warnings
    import dataclasses

    assert kept_definition(dataclasses.asdict(definition)).mcp_servers == ("t", {"u": {"command": "x"}})


def test_server_config_where_says_what_it_runs() -> None:
    stdio = ServerConfig("s", "team", "x", "stdio", "cmd", ("a", "b"))
    assert stdio.where == "cmd a b"
    assert ServerConfig("h", "team", "x", "http", url="https://h/mcp").where == "https://h/mcp"
