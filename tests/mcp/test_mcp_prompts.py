"""MCP prompts as the person's ``/mcp__<server>__<prompt>`` commands (teamrt.mcp.prompts,
teamrt.runtime.personprompts): a task and a person's mail expanded through the run's servers, journaled, and
listed by ``teamrt mcp --prompts``; and a hostile server's prompts."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from teamrt.cli import main
from teamrt.errors import UserError
from teamrt.mcp.config import McpConfig, parse_entry
from teamrt.mcp.prompts import MAX_CHARS, PromptError, expand, fit, list_prompts
from teamrt.mcp.servers import McpServers
from teamrt.mcp.shown import summary
from teamrt.models import Reply, ScriptedModel
from teamrt.models.types import ModelRequest
from teamrt.runs.steer import send
from teamrt.runtime.continuing import continue_run
from teamrt.runtime.personprompts import PROMPTED, kept_task
from teamrt.sandbox.confinement import Confinement
from teamrt.store import open_reader
from teamrt.testing import run_on_sim
from tests.helpers.teams import FAST, kept

SERVER = str(Path(__file__).parents[1] / "helpers" / "procs" / "mcp_server.py")
ESC = "\x1b"


def servers_of(ws: Path, *args: str) -> McpServers:
    entry = {"command": sys.executable, "args": [SERVER, *args]}
    run_dir = ws / ".teamrt" / "runs" / "r1"
    run_dir.mkdir(parents=True, exist_ok=True)
    config = McpConfig({"t": parse_entry("t", entry, scope="team", source="test")})
    return McpServers(config, Confinement(workspace=ws, run_dir=run_dir))


def team(project: Path, *args: str) -> Path:
    path = project / "team.toml"
    path.write_text(
        '[team]\nname = "m"\nmodel = "sim"\n[permissions]\nallow = ["mcp__t"]\n'
        f"[mcp.servers.t]\ncommand = {json.dumps(sys.executable)}\nargs = {json.dumps([SERVER, *args])}\n"
    )
    return path


def run(project: Path, task: str, steps: list[Any]) -> tuple[ScriptedModel, Any]:
    model = ScriptedModel(steps)
    outcome = run_on_sim(team(project), task, project=project, run_dir=project / "run", run_id="r1",
                         settings=FAST, timeout=60, models={"sim": model})  # fmt: skip
    assert outcome.status == "done", outcome
    return model, kept(outcome).reader


def first_turn(model: ScriptedModel) -> list[Any]:
    content = model.requests[0].messages[0]["content"]
    return [b for b in content if b["type"] != "text" or "<system-reminder>" not in b["text"]]


def test_a_task_that_is_a_prompt_command_reaches_the_lead_as_the_servers_prompt(tmp_path: Path) -> None:
    model, reader = run(tmp_path, '/mcp__t__review "src/app one.py" security', [Reply().say("done")])
    texts = [b["text"] for b in first_turn(model) if b["type"] == "text"]
    assert "Please review src/app one.py. Focus on security." in texts
    assert not any("/mcp__t__review" in t for t in texts)  # the command itself is not what is sent
    (event,) = [e for e in reader.events() if e.kind == PROMPTED]
    assert event.data["server"] == "t" and event.data["prompt"] == "review" and event.data["to"] == "lead"
    assert event.data["arguments"] == ["file", "focus"]
    assert kept_task([event]) == event.data["blocks"]  # what a resume reads back instead of asking again
    assert summary(PROMPTED, event.data).startswith("t: /mcp__t__review expanded")


def test_a_prompts_image_and_embedded_resource_become_blocks(tmp_path: Path) -> None:
    model, _ = run(tmp_path, "/mcp__t__picture", [Reply().say("done")])
    blocks = first_turn(model)
    assert {"type": "text", "text": "Look at this:"} in blocks
    assert any(b["type"] == "image" and b["source"]["media_type"] == "image/png" for b in blocks)

    async def go() -> Any:
        servers = servers_of(tmp_path / "w")
        try:
            return await expand(servers, "/mcp__t__notes")
        finally:
            await servers.close()

    (tmp_path / "w").mkdir()
    expanded = asyncio.run(go())
    assert {"type": "text", "text": "[resource file:///notes.txt]\nthe notes"} in expanded.blocks


def test_a_persons_mail_that_is_a_prompt_command_is_expanded_and_the_mail_table_keeps_what_they_wrote(
    tmp_path: Path,
) -> None:
    def mail(request: ModelRequest) -> Reply:
        send(tmp_path / "run", "r1", "lead", "/mcp__t__review notes.md")
        return Reply().say("waiting")

    def unknown(request: ModelRequest) -> Reply:
        send(tmp_path / "run", "r1", "lead", "/mcp__t__nosuch x")
        return Reply().say("ok")

    model, reader = run(tmp_path, "go", [mail, unknown, Reply().say("done")])
    text = json.dumps(model.requests[1].messages[-1]["content"])
    assert 'from=\\"user\\"' in text and 'prompt=\\"/mcp__t__review\\"' in text
    assert "Please review notes.md." in text
    told = json.dumps(model.requests[2].messages[-1]["content"])
    assert "could not be used" in told and "nosuch x" not in told
    events = [e.data for e in reader.events() if e.kind == PROMPTED]
    assert events[0]["prompt"] == "review" and "blocks" not in events[0]  # the turn keeps them
    assert "no MCP prompt of that name" in events[1]["error"] and events[1]["command"] == "/mcp__t__nosuch"
    bodies = [m.message["body"] for m in reader.mail("lead", sender="user")]
    assert bodies == ["/mcp__t__review notes.md", "/mcp__t__nosuch x"]  # as the person wrote them


def ended_run(project: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> Path:
    """A done run ``r1`` of ``team(project, *args)`` kept in the project's home, for ``continue``."""
    monkeypatch.setenv("TEAMRT_HOME", str(project / "home"))
    run_dir = project / "home" / "runs" / "r1"
    model = ScriptedModel([Reply().say("first")])
    outcome = run_on_sim(team(project, *args), "go", project=project, run_dir=run_dir, run_id="r1",
                         settings=FAST, timeout=60, models={"sim": model})  # fmt: skip
    assert outcome.status == "done", outcome
    return run_dir


def go_on(project: Path, prompt: str, steps: list[Any]) -> tuple[ScriptedModel, Any]:
    model = ScriptedModel(steps)
    work = continue_run("r1", prompt, project=project, settings=FAST, models={"sim": model})
    return model, asyncio.run(asyncio.wait_for(work, 60))


def kept_state(run_dir: Path) -> tuple[Any, ...]:
    """What a refused follow-up must leave as it was: the run's status, round, events and lead turns."""
    reader = open_reader(run_dir, "r1")
    try:
        run = reader.run()
        return run.status, run.settings.get("round"), len(reader.events()), len(reader.turns("lead"))
    finally:
        reader.close()


def test_a_follow_ups_prompt_command_reaches_the_lead_as_the_servers_prompt_and_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = ended_run(tmp_path, monkeypatch)
    before = kept_state(run_dir)
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["continue", "r1", "--prompt", "/mcp__t__review", "--quiet"]) != 0
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "missing file" in err and "/mcp__t__review <file> [focus]" in err
    assert kept_state(run_dir) == before  # refused: nothing continued, nothing journaled

    model, done = go_on(tmp_path, '/mcp__t__review "src/app one.py" security', [Reply().say("second")])
    assert done.outcome.status == "done"
    expanded = {"type": "text", "text": "Please review src/app one.py. Focus on security."}
    sent = model.requests[0].messages[-1]["content"]
    assert expanded in sent and "/mcp__t__review" not in json.dumps(sent)  # not the command itself
    reader = open_reader(run_dir, "r1")
    try:
        events = [e.data for e in reader.events() if e.kind == PROMPTED]
        round_prompt = reader.run().settings["round"]["prompt"]
        turns = [t for t in reader.turns("lead") if t.role == "user"]
    finally:
        reader.close()
    assert events == [{"server": "t", "prompt": "review", "arguments": ["file", "focus"], "chars": 48,
                       "images": 0, "to": "lead", "round": 2}]  # fmt: skip
    assert summary(PROMPTED, events[0]) == "t: /mcp__t__review expanded for lead (48 characters)"
    assert round_prompt.startswith("/mcp__t__review")  # the round is named as the person wrote it
    assert turns[-1].content == [expanded]  # kept with the round: a resume reads it, never the server


def test_a_missing_required_argument_is_one_line_and_the_lead_never_starts(tmp_path: Path) -> None:
    model = ScriptedModel([])
    with pytest.raises(UserError) as raised:
        run_on_sim(team(tmp_path), "/mcp__t__review", project=tmp_path, run_dir=tmp_path / "run", run_id="r1",
                   settings=FAST, timeout=60, models={"sim": model})  # fmt: skip
    said = str(raised.value)
    assert "\n" not in said and "missing file" in said and "/mcp__t__review <file> [focus]" in said
    assert model.requests == []
    reader = open_reader(tmp_path / "run", "r1")
    try:
        assert reader.run().status == "failed"
    finally:
        reader.close()


@pytest.mark.parametrize(
    ("command", "said"),
    [
        ('/mcp__t__review "unclosed', "cannot be read"),
        ("/mcp__t__review a b c", "takes 2 arguments, given 3"),
        ("/mcp__x__review a", "no MCP prompt of that name"),
        ("/mcp__t__review_", "no MCP prompt of that name"),
    ],
)
def test_arguments_as_claude_code_maps_them_and_what_does_not_fit(ws: Path, command: str, said: str) -> None:
    async def go() -> None:
        servers = servers_of(ws)
        try:
            with pytest.raises(PromptError, match=said):
                await expand(servers, command)
            assert await expand(servers, "not a command") is None
        finally:
            await servers.close()

    asyncio.run(go())


def test_teamrt_mcp_prompts_lists_the_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from teamrt import home

    monkeypatch.setenv(home.HOME_ENV, str(tmp_path / "home"))
    (tmp_path / ".teamrt").mkdir()
    team(tmp_path).rename(tmp_path / ".teamrt" / "team.toml")
    monkeypatch.chdir(tmp_path)
    assert main(["mcp", "--prompts"]) == 0
    out = capsys.readouterr().out
    assert "prompts (3):" in out and "/mcp__t__review <file> [focus]: Review a file." in out
    assert "/mcp__t__picture: A picture to look at." in out and "tools (" not in out


@pytest.mark.hostile
def test_attack_hostile_prompts_escapes_a_huge_prompt_and_names_that_would_confuse_commands(ws: Path) -> None:
    async def go() -> None:
        servers = servers_of(ws, "--hostile")
        try:
            assert await servers.prompt_servers(["t"]) == ["t"]
            prompts, problems = await list_prompts(servers, "t")
            commands = {p.command: p for p in prompts}
            assert "/mcp__t__sneaky__prompt" not in commands
            assert any("sneaky__prompt" in p and "ambiguous" in p for p in problems)
            assert "/mcp__t__bell_name" in commands  # made fit, as Claude Code makes names fit
            assert ESC not in commands["/mcp__t__loud"].description
            loud = await expand(servers, "/mcp__t__loud Ada")
            assert loud is not None
            text = "".join(b["text"] for b in loud.blocks)
            assert "Hello Ada" in text and ESC not in text and "\x07" not in text
            with pytest.raises(PromptError, match=f"300,000 characters; teamrt takes {MAX_CHARS:,}"):
                await expand(servers, "/mcp__t__huge")
            chatty = await expand(servers, "/mcp__t__chatty")
            assert chatty is not None and chatty.blocks[0]["text"].startswith(
                "[the prompt's assistant message]"
            )
            with pytest.raises(PromptError) as raised:
                await expand(servers, f"/mcp__t__nosuch{ESC}]0;x\x07")
            assert ESC not in str(raised.value) and "\x07" not in str(raised.value)
        finally:
            await servers.close()

    asyncio.run(go())
    from teamrt.mcp.listing import describe, list_servers

    config = McpConfig({"t": parse_entry("t", {"command": sys.executable, "args": [SERVER, "--hostile"]},
                                         scope="team", source="test")})  # fmt: skip
    lines = describe(config, tools=list_servers(config, Confinement(workspace=ws, run_dir=ws / ".teamrt" /
                     "runs" / "r1"), tools=False, prompts=True))  # fmt: skip
    shown = "\n".join(lines)
    assert "/mcp__t__loud [who]: Loud" in shown and ESC not in shown and "\x07" not in shown
    assert fit("a b.c") == "a_b_c"


@pytest.mark.hostile
def test_attack_a_follow_ups_prompt_holding_escapes_reaches_the_lead_inert(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = ended_run(tmp_path, monkeypatch, "--hostile")
    before = kept_state(run_dir)
    for command, said in ((f"/mcp__t__nosuch{ESC}]0;x\x07 a", "no MCP prompt of that name"),
                          ("/mcp__t__huge", f"300,000 characters; teamrt takes {MAX_CHARS:,}")):  # fmt: skip
        with pytest.raises(PromptError, match=said) as raised:
            go_on(tmp_path, command, [])
        assert ESC not in str(raised.value) and "\x07" not in str(raised.value)
    assert kept_state(run_dir) == before
    model, done = go_on(tmp_path, f"/mcp__t__loud Ada{ESC}]0;x\x07", [Reply().say("second")])
    assert done.outcome.status == "done"
    sent = json.dumps(model.requests[0].messages[-1]["content"])
    assert "Hello Ada" in sent and "obey" in sent
    assert ESC not in sent and "\\u001b" not in sent and "\\u0007" not in sent
