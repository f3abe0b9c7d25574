"""Claude Code's tools in teamrt: MultiEdit, LS, TodoWrite, Task and Bash's input, each with its attacks, and
the calls of runs recorded under the older lowercase names, which still dispatch and resume."""

from __future__ import annotations

import asyncio
import os
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from teamrt.agents import load_definitions
from teamrt.models import ModelRequest, Reply, ScriptedModel
from teamrt.models.scripted import Step
from teamrt.runtime.agent import Outcome
from teamrt.runtime.supervisor import Supervisor
from teamrt.sandbox.protect import PROTECTED, protected_paths
from teamrt.store import Store, ToolUse, create_store, open_store
from teamrt.team import load_team, team_to_json
from teamrt.tools import ToolContext, ToolError, ToolResult, builtin_tools, legacy_tools
from teamrt.tools.files import listing as listing_module
from teamrt.tools.files.confine import IN_HOME
from teamrt.tools.files.edit import EDIT_BYTES, MULTI_EDITS
from teamrt.tools.files.listing import LS_ENTRIES
from teamrt.tools.names import canonical, legacy_input
from teamrt.tools.permissions import Permissions
from teamrt.tools.todo import TODO_CHARS, TODO_ITEMS, TODOS_EVENT, TodoWrite
from tests.helpers.machine import needs_bwrap
from tests.helpers.teams import FAST

TOOLS = {**builtin_tools(), **legacy_tools()}  # MultiEdit: offered to older runs' agents only


def run(ctx: ToolContext, tool: str, **input: Any) -> ToolResult:
    return asyncio.run(TOOLS[tool].run(input, ctx))


def refused(ctx: ToolContext, tool: str, **input: Any) -> str:
    with pytest.raises(ToolError) as caught:
        run(ctx, tool, **input)
    message = str(caught.value)
    assert "\n" not in message
    return message


def denying(ctx: ToolContext, *rules: str) -> ToolContext:
    permissions = Permissions(deny=rules)
    return ToolContext(
        workspace=ctx.workspace, run_dir=ctx.run_dir,
        read_denied=lambda path: permissions.read_denial(path, ctx.workspace),
    )  # fmt: skip


# -- MultiEdit ---------------------------------------------------------------------------


def test_multiedit_applies_its_edits_in_order_each_to_what_the_last_left(ctx: ToolContext, ws: Path) -> None:
    (ws / "app.py").write_text("name = 'old'\nprint(name)\nprint(name)\n")
    os.chmod(ws / "app.py", 0o751)
    said = run(
        ctx, "MultiEdit", file_path="app.py",
        edits=[
            {"old_string": "name = 'old'", "new_string": "label = 'old'"},
            {"old_string": "print(name)", "new_string": "print(label)", "replace_all": True},
            {"old_string": "label = 'old'", "new_string": "label = 'new'"},
        ],
    ).content  # fmt: skip
    assert said == "edited app.py: 3 edit(s), 4 replacement(s)"
    assert (ws / "app.py").read_text() == "label = 'new'\nprint(label)\nprint(label)\n"
    assert (ws / "app.py").stat().st_mode & 0o777 == 0o751


def test_multiedit_creates_a_file_from_an_empty_first_old_string(ctx: ToolContext, ws: Path) -> None:
    edits = [
        {"old_string": "", "new_string": "a = 1\nb = 2\n"},
        {"old_string": "b = 2", "new_string": "b = 3"},
    ]
    said = run(ctx, "MultiEdit", file_path="pkg/new.py", edits=edits).content
    assert said == "created pkg/new.py (2 lines) and made 1 replacement(s)"
    assert (ws / "pkg/new.py").read_text() == "a = 1\nb = 3\n"


def test_multiedit_writes_all_its_edits_or_none(ctx: ToolContext, ws: Path) -> None:
    (ws / "f.txt").write_text("one two three\n")
    message = refused(
        ctx, "MultiEdit", file_path="f.txt",
        edits=[{"old_string": "one", "new_string": "1"}, {"old_string": "four", "new_string": "4"}],
    )  # fmt: skip
    assert message == (
        "MultiEdit: edit 2: old_string was not found in f.txt; read the file and copy the text exactly"
    )
    assert (ws / "f.txt").read_text() == "one two three\n"
    message = refused(
        ctx, "MultiEdit", file_path="f.txt",
        edits=[{"old_string": "e", "new_string": "3"}, {"old_string": "two", "new_string": "2"}],
    )  # fmt: skip
    assert message.startswith("MultiEdit: edit 1: old_string occurs 3 times in f.txt")
    assert (ws / "f.txt").read_text() == "one two three\n"


@pytest.mark.parametrize(
    ("edits", "message"),
    [
        ("x", "MultiEdit: edits must be a list of 1 to 100 edits"),
        ([], "MultiEdit: edits must be a list of 1 to 100 edits"),
        (
            [{"old_string": "a", "new_string": "b"}] * (MULTI_EDITS + 1),
            "MultiEdit: edits must be a list of 1 to",
        ),
        (["a"], "MultiEdit: edit 1: must be an object with old_string and new_string"),
        ([{"old_string": "a", "new_string": "b", "path": "/etc"}], "MultiEdit: edit 1: unknown key 'path'"),
        ([{"old_string": "a"}], "MultiEdit: edit 1: new_string must be a string"),
        (
            [{"old_string": "a", "new_string": "\ud800"}],
            "MultiEdit: edit 1: new_string holds a lone surrogate",
        ),
        (
            [{"old_string": "a", "new_string": "b", "replace_all": "yes"}],
            "MultiEdit: edit 1: replace_all must be",
        ),
        ([{"old_string": "", "new_string": "b"}], "MultiEdit: edit 1: old_string is empty, but f.txt exists"),
        (
            [{"old_string": "a", "new_string": "b"}, {"old_string": "", "new_string": "c"}],
            "MultiEdit: edit 2: old_string is empty; to create a file, use Write",
        ),
        (
            [{"old_string": "a", "new_string": "a"}],
            "MultiEdit: edit 1: old_string and new_string are the same",
        ),
    ],
)
def test_multiedit_hostile_input_gets_a_one_line_error_and_changes_nothing(
    ctx: ToolContext, ws: Path, edits: Any, message: str
) -> None:
    (ws / "f.txt").write_text("a\n")
    assert refused(ctx, "MultiEdit", file_path="f.txt", edits=edits).startswith(message)
    assert (ws / "f.txt").read_text() == "a\n"


def test_an_edit_that_would_blow_the_file_up_is_refused_before_it_is_made(ctx: ToolContext, ws: Path) -> None:
    (ws / "f.txt").write_text("a" * 100_000)
    big = "b" * 1000  # 100,000 replacements of it: 100 MB, which would all sit in teamrt's own memory
    tracemalloc.start()
    try:
        message = refused(ctx, "Edit", file_path="f.txt", old_string="a", new_string=big, replace_all=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20, f"refused only after building {peak // 2**20} MiB"
    assert (
        message
        == f"Edit: the edited file would be over {EDIT_BYTES // 2**20} MiB, too large to edit; use Bash"
    )
    edits = [{"old_string": "a", "new_string": big, "replace_all": True}]
    assert refused(ctx, "MultiEdit", file_path="f.txt", edits=edits).startswith(
        "MultiEdit: edit 1: the edited"
    )
    grown = [
        {"old_string": "", "new_string": "x" * 2**20},
        {"old_string": "x", "new_string": "y" * 5, "replace_all": True},
    ]
    assert refused(ctx, "MultiEdit", file_path="g.txt", edits=grown).startswith(
        "MultiEdit: edit 2: the edited file"
    )
    huge = [{"old_string": "", "new_string": "x" * (EDIT_BYTES + 1)}]
    assert refused(ctx, "MultiEdit", file_path="g.txt", edits=huge).startswith(
        "MultiEdit: the new file would be over"
    )
    assert (ws / "f.txt").read_text() == "a" * 100_000 and not (ws / "g.txt").exists()


def test_multiedit_stays_in_the_workspace_and_off_protected_paths(
    ctx: ToolContext, ws: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("a\n")
    (ws / "link").symlink_to(outside)
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("a\n")
    (ws / ".claude").mkdir()
    guarded = ToolContext(
        workspace=ws, run_dir=ctx.run_dir, protected=protected_paths((ws,), home=ctx.run_dir.parent.parent)
    )
    change = [{"old_string": "a", "new_string": "b"}]
    create = [{"old_string": "", "new_string": "planted"}]
    assert "outside the workspace" in refused(guarded, "MultiEdit", file_path="link", edits=change)
    assert "outside the workspace" in refused(guarded, "MultiEdit", file_path="../escape.txt", edits=create)
    assert refused(guarded, "MultiEdit", file_path=".git/config", edits=change).endswith(PROTECTED)
    settings = ".claude/settings.json"
    assert refused(guarded, "MultiEdit", file_path=settings, edits=create).endswith(PROTECTED)
    assert refused(guarded, "MultiEdit", file_path="sub/.git/hooks/pre-commit", edits=create).endswith(
        PROTECTED
    )
    store = f"{ctx.run_dir.relative_to(ws)}/run.db"
    assert "teamrt's home" in refused(
        guarded, "MultiEdit", file_path=store, edits=change
    ) or PROTECTED in refused(guarded, "MultiEdit", file_path=store, edits=change)
    assert outside.read_text() == "a\n" and (ws / ".git/config").read_text() == "a\n"
    assert not (tmp_path / "escape.txt").exists() and not (ws / settings).exists()
    assert (ctx.run_dir / "run.db").read_text() == "secret store\n"


def test_a_file_the_agent_may_not_read_cannot_be_probed_by_editing_it(ctx: ToolContext, ws: Path) -> None:
    """Edit's answers (not found, found 3 times) would tell what a read-denied file holds."""
    (ws / "secrets").mkdir()
    (ws / "secrets" / "key.txt").write_text("sk-123\n")
    denied = denying(ctx, "Read(secrets/**)")
    expected = "is denied by the rule Read(secrets/**); a file the agent may not read cannot be edited"
    edit = refused(denied, "Edit", file_path="secrets/key.txt", old_string="sk-1", new_string="x")
    assert edit == f"Edit: secrets/key.txt {expected}"
    edits = [{"old_string": "sk-1", "new_string": "x"}]
    assert refused(denied, "MultiEdit", file_path="secrets/key.txt", edits=edits).endswith(expected)
    assert (ws / "secrets" / "key.txt").read_text() == "sk-123\n"


# -- LS -------------------------------------------------------------------------------------


def test_ls_shows_the_tree_with_directories_and_symlinks_marked(ctx: ToolContext, ws: Path) -> None:
    (ws / "src" / "pkg").mkdir(parents=True)
    (ws / "src" / "pkg" / "mod.py").write_text("")
    (ws / "src" / "main.py").write_text("")
    (ws / "empty").mkdir()
    (ws / "README.md").write_text("")
    (ws / "docs").symlink_to("src")
    (ws / ".env.example").write_text("")
    assert run(ctx, "LS").content == "\n".join(
        [
            f"- {ws}/",
            "  - .env.example",
            "  - README.md",
            "  - docs@",
            "  - empty/",
            "  - src/",
            "    - main.py",
            "    - pkg/",
            "      - mod.py",
        ]
    )
    assert run(ctx, "LS", path="src/pkg").content == f"- {ws}/src/pkg/\n  - mod.py"
    assert run(ctx, "LS", path=str(ws / "empty")).content == f"- {ws}/empty/\n  (empty)"


def test_ls_leaves_out_what_its_ignore_patterns_match_with_all_below(ctx: ToolContext, ws: Path) -> None:
    for path in ("node_modules/x/index.js", "src/a.pyc", "src/a.py", "src/gen/b.py", "build/out.txt"):
        (ws / path).parent.mkdir(parents=True, exist_ok=True)
        (ws / path).write_text("")
    shown = run(ctx, "LS", ignore=["node_modules", "*.pyc", "src/gen/", "build"]).content
    assert shown == f"- {ws}/\n  - src/\n    - a.py"


def test_ls_never_shows_git_teamrts_home_or_what_leads_outside(
    ctx: ToolContext, ws: Path, tmp_path: Path
) -> None:
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / "sub").mkdir()
    (ws / "sub" / ".git").write_text("gitdir: elsewhere\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "private.txt").write_text("")
    (ws / "out").symlink_to(tmp_path / "outside")
    (ws / "out-file").symlink_to(tmp_path / "outside" / "private.txt")
    (ws / "to-store").symlink_to(ctx.run_dir / "run.db")
    (ws / "dangling").symlink_to(ws / "nothing")
    (ws / "ok.txt").write_text("")
    assert run(ctx, "LS").content == f"- {ws}/\n  - ok.txt\n  - sub/"  # .teamrt holds the run's store
    assert refused(ctx, "LS", path=".teamrt") == f"LS: .teamrt {IN_HOME}"
    assert refused(ctx, "LS", path="out").startswith("LS: out (which resolves to")
    assert "outside the workspace" in refused(ctx, "LS", path="..")
    assert "outside the workspace" in refused(ctx, "LS", path="/etc")


def test_ls_hides_what_a_deny_rule_covers_and_says_how_many(ctx: ToolContext, ws: Path) -> None:
    (ws / "secrets").mkdir()
    (ws / "secrets" / "key.pem").write_text("")
    (ws / "config.pem").write_text("")
    (ws / "app.py").write_text("")
    (ws / "alias.pem.txt").symlink_to("config.pem")
    denied = denying(ctx, "Read(secrets/**)", "Read(*.pem)")
    assert run(denied, "LS").content == (
        f"- {ws}/\n  - app.py\n(3 entries are hidden by the agent's deny rules)"
    )
    assert refused(denied, "LS", path="secrets") == "LS: secrets is denied by the rule Read(secrets/**)"


def test_ls_stops_at_its_entry_limit_and_at_deep_trees(ctx: ToolContext, ws: Path) -> None:
    (ws / "many").mkdir()
    for i in range(LS_ENTRIES + 50):
        (ws / "many" / f"f{i:05}").write_text("")
    lines = run(ctx, "LS").text.splitlines()
    assert len(lines) == LS_ENTRIES + 2 and lines[-1].startswith(f"(stopped after {LS_ENTRIES} entries")
    deep = ws / "deep"
    for _ in range(150):
        deep = deep / "d"
    deep.mkdir(parents=True)
    assert "d/" in run(ctx, "LS", path="deep").content


def test_a_directory_swapped_for_a_symlink_mid_listing_is_not_followed(
    ctx: ToolContext, ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "private.txt").write_text("")
    (ws / "a").mkdir()
    (ws / "a" / "mine.txt").write_text("")
    real = listing_module._entries

    def swap_after_listing(fd: int) -> Iterator[tuple[str, str]]:
        found = list(real(fd))
        if (ws / "a").is_dir() and not (ws / "a").is_symlink():
            (ws / "a").rename(ws / "a-moved")
            (ws / "a").symlink_to(tmp_path / "outside")
        return iter(found)

    monkeypatch.setattr(listing_module, "_entries", swap_after_listing)
    shown = run(ctx, "LS").content
    assert "private.txt" not in shown and "a/" in shown


@pytest.mark.parametrize(
    ("input", "message"),
    [
        ({"ignore": "node_modules"}, "LS: ignore must be a list of at most 100 glob patterns"),
        ({"ignore": ["*"] * 101}, "LS: ignore must be a list of at most 100 glob patterns"),
        ({"ignore": [7]}, "LS: ignore pattern 1 must be a non-empty string"),
        ({"ignore": ["a", "/"]}, "LS: ignore pattern 2 must be a non-empty string"),
        ({"ignore": ["a\0b"]}, "LS: ignore pattern 1 must be a non-empty string"),
        ({"ignore": ["x" * 1001]}, "LS: ignore pattern 1 must be a non-empty string"),
        ({"path": "f.txt"}, "LS: f.txt is not a directory; read it with Read"),
        ({"path": "nope"}, "LS: nope does not exist"),
        ({"path": "a\0b"}, "LS: path must be a non-empty path without NUL characters"),
        ({"path": "\udcff"}, "LS: path holds a lone surrogate"),
    ],
)
def test_ls_hostile_input_gets_a_one_line_error(
    ctx: ToolContext, ws: Path, input: dict[str, Any], message: str
) -> None:
    (ws / "f.txt").write_text("")
    assert refused(ctx, "LS", **input).startswith(message)


def test_a_pathological_ignore_pattern_does_not_hang_the_listing(ctx: ToolContext, ws: Path) -> None:
    for i in range(200):
        (ws / f"{'a' * 60}{i}").write_text("")
    start = time.monotonic()
    listing = run(ctx, "LS", ignore=["*a" * 30 + "b"] * 100)
    # A ceiling that bounds a backtracking match (which takes hours), far above the idle time (about 0.1 s).
    assert time.monotonic() - start < 60
    assert listing.text.count("a" * 60) == 200, "nothing matched the pattern: every file is listed"


# -- TodoWrite --------------------------------------------------------------------------------


class Sink:
    def __init__(self) -> None:
        self.kept: list[tuple[str, list[dict[str, str]]]] = []

    async def record_todos(self, agent: str, todos: list[dict[str, str]]) -> None:
        self.kept.append((agent, todos))


def write_todos(todos: Any, sink: Sink, ctx: ToolContext) -> ToolResult:
    return asyncio.run(TodoWrite(sink).run({"todos": todos}, ctx))


def test_todowrite_keeps_the_whole_list_and_says_where_it_stands(ctx: ToolContext) -> None:
    sink = Sink()
    ctx = ToolContext(workspace=ctx.workspace, run_dir=ctx.run_dir, agent="coder")
    todos = [
        {"content": "Run the tests", "status": "completed", "activeForm": "Running the tests"},
        {"content": "Fix the parser", "status": "in_progress", "activeForm": "Fixing the parser"},
        {"content": "Update the docs", "status": "pending", "activeForm": "Updating the docs", "id": "3"},
    ]
    said = write_todos(todos, sink, ctx).content
    assert (
        said
        == "todo list saved: 3 todo(s), 1 pending, 1 in progress, 1 completed. Keep it current as you work."
    )
    assert sink.kept == [("coder", [{k: v for k, v in t.items() if k != "id"} for t in todos])]
    assert write_todos([], sink, ctx).content == "todo list cleared"
    assert sink.kept[-1] == ("coder", [])


@pytest.mark.parametrize(
    ("todos", "message"),
    [
        ("Run the tests", f"TodoWrite: todos must be a list of at most {TODO_ITEMS} todos"),
        ([{"content": "x", "status": "pending"}] * (TODO_ITEMS + 1), "TodoWrite: todos must be a list"),
        (["Run the tests"], "TodoWrite: todo 1 must be an object with content, status and activeForm"),
        (
            [{"content": "x", "status": "done"}],
            "TodoWrite: todo 1: status must be one of pending, in_progress",
        ),
        ([{"content": " ", "status": "pending"}], "TodoWrite: todo 1: content must be a non-empty string"),
        ([{"content": "x" * (TODO_CHARS + 1), "status": "pending"}], "TodoWrite: todo 1: content must be"),
        ([{"content": "x", "status": "pending", "activeForm": 3}], "TodoWrite: todo 1: activeForm must be"),
        ([{"content": "\ud800", "status": "pending"}], "TodoWrite: todo 1: content holds a lone surrogate"),
    ],
)
def test_todowrite_hostile_input_gets_a_one_line_error_and_keeps_nothing(
    ctx: ToolContext, todos: Any, message: str
) -> None:
    sink = Sink()
    with pytest.raises(ToolError) as caught:
        write_todos(todos, sink, ctx)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
    assert sink.kept == []


# -- Bash's input --------------------------------------------------------------------------------


@needs_bwrap
def test_bash_takes_its_timeout_in_milliseconds_and_a_description(ctx: ToolContext) -> None:
    done = run(ctx, "Bash", command="echo hi", description="Say hi", timeout=5000)
    assert done.content == "hi\n" and not done.is_error
    slow = run(ctx, "Bash", command="sleep 5", timeout=300)
    assert slow.is_error and "timed out after 0.3 s" in slow.content, "300 ms, not 300 s"


@pytest.mark.parametrize(
    ("input", "message"),
    [
        (
            {"run_in_background": True},
            "Bash: run_in_background is not supported: each command ends with its call",
        ),
        ({"run_in_background": "yes"}, "Bash: run_in_background must be true or false"),
        ({"description": 7}, "Bash: description must be a string"),
        ({"timeout": 600_001}, "Bash: timeout must be a number of milliseconds above 0 and at most 600000"),
        ({"timeout": 0}, "Bash: timeout must be a number of milliseconds"),
        ({"timeout": True}, "Bash: timeout must be a number of milliseconds"),
    ],
)
def test_bash_refuses_what_it_cannot_do_politely(
    ctx: ToolContext, input: dict[str, Any], message: str
) -> None:
    assert refused(ctx, "Bash", command="touch ran", **input).startswith(message)
    assert not (ctx.workspace / "ran").exists()


# -- names ------------------------------------------------------------------------------------


def test_every_older_or_other_name_maps_to_the_tool_the_model_sees() -> None:
    pairs = [("read", "Read"), ("write", "Write"), ("edit", "Edit"), ("glob", "Glob"), ("grep", "Grep"),
             ("bash", "Bash"), ("Agent", "Task"), ("multiedit", "Edit"), ("ls", "LS")]  # fmt: skip
    for old, new in pairs:
        assert canonical(old) == new
    assert canonical("spawn_agent") is None and canonical("Notebookedit") is None
    assert canonical("mcp__x__y") is None
    assert canonical("skill") == "Skill"  # a run's skills (teamrt.tools.skill)
    assert legacy_input("bash", {"command": "x", "timeout": 5}) == {"command": "x", "timeout": 5000}
    assert legacy_input("Bash", {"command": "x", "timeout": 5}) == {"command": "x", "timeout": 5}
    assert legacy_input("bash", {"command": "x", "timeout": True}) == {"command": "x", "timeout": True}


# -- teams: TodoWrite, Task and older names through the supervisor ---------------------------------

TEAM = """
[team]
name = "t"
model = "sim"
on_ask = "deny"
max_agents = 4
[roles.reviewer]
[permissions]
allow = ["Bash(sleep:*)", "Bash(echo:*)"]
deny = ["Bash(rm:*)"]
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    (path / "team.toml").write_text(TEAM)
    (path / "notes.txt").write_text("the notes\n")
    return path


def new_store(project: Path) -> tuple[Path, Store]:
    run_dir = project / ".teamrt" / "runs" / "r1"
    run_dir.mkdir(parents=True)
    team = load_team(project / "team.toml", project=project)
    settings = {"team": team_to_json(team)}
    return run_dir, create_store(run_dir, "r1", task="go", workdir=str(project), settings=settings)


def supervise(project: Path, run_dir: Path, store: Store, model: ScriptedModel) -> Supervisor:
    return Supervisor(
        store=store, run_dir=run_dir, team=load_team(project / "team.toml", project=project),
        definitions=load_definitions(project), project=project, settings=FAST, models={"sim": model},
    )  # fmt: skip


def run_lead(project: Path, steps: list[Step]) -> tuple[Outcome, ScriptedModel, Store]:
    run_dir, store = new_store(project)
    model = ScriptedModel(steps)

    async def go() -> Outcome:
        return await asyncio.wait_for(supervise(project, run_dir, store, model).run("go"), 30)

    try:
        return asyncio.run(go()), model, store
    except BaseException:
        store.close()
        raise


def last_results(request: ModelRequest) -> list[str]:
    """The tool results the request's last user turn carries."""
    return [b["content"] for b in request.messages[-1]["content"] if b.get("type") == "tool_result"]


def test_the_lead_sees_claude_codes_tools_and_a_todo_list_is_kept_as_an_event(project: Path) -> None:
    todos = [{"content": "Read the notes", "status": "in_progress", "activeForm": "Reading the notes"}]
    outcome, model, store = run_lead(
        project, [Reply().call("TodoWrite", {"todos": todos}), Reply().say("planned")]
    )
    try:
        assert outcome.status == "done"
        names = [t["name"] for t in model.requests[0].tools]
        assert names[:11] == [
            "Read",
            "Write",
            "Edit",
            "Glob",
            "Grep",
            "LS",
            "Bash",
            "WebFetch",
            "web_search",  # WebSearch, the API's tool: the model sees it by the API's name
            "TodoWrite",
            "Task",
        ]
        assert last_results(model.requests[1])[0].startswith("todo list saved: 1 todo(s), 1 in progress")
        [event] = store.reader.events(kinds=(TODOS_EVENT,))
        assert event.agent == "lead" and event.data == {"todos": todos}
        assert store.reader.events(kinds=("ask",)) == [], "a todo list needs no permission"
    finally:
        store.close()


def test_task_runs_one_agent_of_a_role_that_answers_the_call_and_ends(project: Path) -> None:
    def reviewer(request: ModelRequest) -> Reply:
        assert request.agent == "reviewer" and len(request.messages) == 1
        assert request.messages[0]["content"][0]["text"] == "Review notes.txt."
        return Reply().say("looks fine")

    task = {"description": "Review the notes", "prompt": "Review notes.txt.", "subagent_type": "Reviewer"}
    outcome, model, store = run_lead(project, [Reply().call("Task", task), reviewer, Reply().say("reviewed")])
    try:
        assert outcome.status == "done"
        assert last_results(model.requests[2]) == ["## reviewer: done\nlooks fine"]
        child = store.reader.agent("reviewer")
        assert (child.kind, child.role, child.parent, child.status) == ("task", "reviewer", "lead", "done")
        assert child.workspace == str(project)
        assert "You are a reviewer." in model.requests[1].system, "its own definition, not the lead's context"
    finally:
        store.close()


def test_task_without_a_role_or_as_general_purpose_forks_and_agent_is_its_other_name(project: Path) -> None:
    def fork(request: ModelRequest) -> Reply:
        assert request.agent.startswith("lead-fork")
        return Reply().say(f"forked on: {request.messages[-1]['content'][-1]['text']}")

    calls = Reply().call("Task", {"description": "Look", "prompt": "Look at A."})
    agent = Reply().call(
        "Agent", {"description": "Look", "prompt": "Look at B.", "subagent_type": "general-purpose"}
    )
    outcome, model, store = run_lead(project, [calls, fork, agent, fork, Reply().say("done")])
    try:
        assert outcome.status == "done"
        assert last_results(model.requests[2]) == ["## lead-fork: done\nforked on: Look at A."]
        assert last_results(model.requests[4])[0].endswith("forked on: Look at B.")
        assert [a.kind for a in store.reader.agents()] == ["lead", "fork", "fork"]
    finally:
        store.close()


def test_task_refuses_an_unknown_role_a_fork_and_the_teams_limits(project: Path) -> None:
    unknown = {"description": "x", "prompt": "x", "subagent_type": "../../etc/passwd"}

    def fork_tries(request: ModelRequest) -> Reply:
        return Reply().call("Task", {"description": "deeper", "prompt": "go deeper"})

    def fork_reports(request: ModelRequest) -> Reply:
        return Reply().say(last_results(request)[0])

    steps: list[Step] = [
        Reply().call("Task", unknown),
        Reply().call("Task", {"description": "x", "prompt": "  "}),
        Reply().call("Task", {"prompt": "x"}),
        Reply().call("Task", {"description": "fork", "prompt": "fork"}),
        fork_tries,
        fork_reports,
        Reply().say("done"),
    ]
    outcome, model, store = run_lead(project, steps)
    try:
        assert outcome.status == "done"
        known = "use one of: general-purpose, reviewer"
        assert last_results(model.requests[1]) == [
            f"subagent_type '../../etc/passwd' is not a role of this team; {known}"
        ]
        assert last_results(model.requests[2]) == ["prompt must not be empty"]
        assert last_results(model.requests[3]) == ["description is required"]
        assert last_results(model.requests[5]) == [
            "a fork cannot spawn agents; report back to your parent instead"
        ]
        assert [a.name for a in store.reader.agents()] == ["lead", "lead-fork"]
    finally:
        store.close()


def test_task_comes_only_to_an_agent_whose_definition_names_it(project: Path) -> None:
    (project / ".claude" / "agents").mkdir(parents=True)
    (project / ".claude" / "agents" / "reader.md").write_text(
        "---\nname: reader\ndescription: Reads.\ntools: Read, Grep\n---\nYou read.\n"
    )
    (project / "team.toml").write_text(TEAM.replace("[roles.reviewer]", "[roles.reviewer]\n[roles.reader]"))

    def reader(request: ModelRequest) -> Reply:
        names = {t["name"] for t in request.tools}
        return Reply().say(
            " ".join(sorted(n for n in names if n[0].isupper())) + f" spawn:{'spawn_agent' in names}"
        )

    task = {"description": "Read", "prompt": "Read.", "subagent_type": "reader"}
    outcome, model, store = run_lead(project, [Reply().call("Task", task), reader, Reply().say("done")])
    try:
        assert outcome.status == "done"
        assert last_results(model.requests[2]) == ["## reader: done\nGrep Read spawn:True"]
    finally:
        store.close()


def test_calls_by_the_older_names_still_run_and_rules_see_the_new_names(project: Path) -> None:
    steps: list[Step] = [
        Reply().call("read", {"file_path": "notes.txt"}).call("bash", {"command": "rm notes.txt"}),
        Reply().say("done"),
    ]
    outcome, model, store = run_lead(project, steps)
    try:
        assert outcome.status == "blocked", "its one call that would act was refused"
        read, rm = last_results(model.requests[1])
        assert read == "     1\tthe notes"
        assert rm == 'permission denied: denied by rule "Bash(rm:*)"'
        assert (project / "notes.txt").exists()
        calls = {c.name: c.read_only for c in store.reader.tool_calls("lead")}
        assert calls == {"read": True, "bash": False}, "journaled as called, read-only as the tool is"
    finally:
        store.close()


def test_a_run_recorded_with_the_older_names_resumes(project: Path) -> None:
    """A run kept before the rename: its lead's last turn called ``read``, ``bash`` (a timeout in seconds)
    and ``write``, and the run crashed with the write running. The resume runs the two never started,
    by their new tools, reports the write interrupted, and the lead goes on."""
    run_dir, store = new_store(project)
    calls: list[dict[str, Any]] = [
        {"type": "tool_use", "id": "toolu_old_1", "name": "read", "input": {"file_path": "notes.txt"}},
        {"type": "tool_use", "id": "toolu_old_2", "name": "bash",
         "input": {"command": "sleep 0.2; echo slept", "timeout": 5}},
        {"type": "tool_use", "id": "toolu_old_3", "name": "write",
         "input": {"file_path": "x.txt", "content": "x"}},
    ]  # fmt: skip

    async def record() -> None:
        await store.add_agent("lead", kind="lead", model="sim", role="lead", workspace=str(project))
        epoch = await store.begin_epoch("lead")
        await store.append_turn("lead", epoch=epoch, role="user", content=[{"type": "text", "text": "go"}])
        uses = [ToolUse(c["id"], c["name"], c["input"], c["name"] == "read") for c in calls]
        await store.append_turn("lead", epoch=epoch, role="assistant", content=calls, tool_uses=uses)
        await store.move_tool_call("toolu_old_3", "running")

    asyncio.run(record())
    store.close()
    store = open_store(run_dir, "r1")
    model = ScriptedModel([Reply().say("went on")])
    try:

        async def resume() -> Outcome:
            return await asyncio.wait_for(supervise(project, run_dir, store, model).resume(), 30)

        outcome = asyncio.run(resume())
        assert outcome.status == "done" and outcome.answer == "went on"
        read, slept, written = last_results(model.requests[0])
        assert read == "     1\tthe notes"
        assert written.startswith("interrupted by a crash") and not (project / "x.txt").exists()
        if slept.startswith("Bash: refused: bubblewrap"):
            pytest.skip("bubblewrap is not installed here")
        assert slept == "slept\n", "the old timeout of 5 s, not 5 ms"
    finally:
        store.close()


def test_a_task_call_the_crash_cut_short_starts_its_agent_on_resume_and_gets_its_answer(
    project: Path,
) -> None:
    run_dir, store = new_store(project)
    task = {"description": "Review", "prompt": "Review notes.txt.", "subagent_type": "reviewer"}
    call: dict[str, Any] = {"type": "tool_use", "id": "toolu_task_1", "name": "Task", "input": task}

    async def record() -> None:
        await store.add_agent("lead", kind="lead", model="sim", role="lead", workspace=str(project))
        epoch = await store.begin_epoch("lead")
        await store.append_turn("lead", epoch=epoch, role="user", content=[{"type": "text", "text": "go"}])
        use = ToolUse(call["id"], "Task", task, False)
        await store.append_turn("lead", epoch=epoch, role="assistant", content=[call], tool_uses=[use])
        await store.move_tool_call(call["id"], "running")

    asyncio.run(record())
    store.close()
    store = open_store(run_dir, "r1")

    def reviewer(request: ModelRequest) -> Reply:
        assert (
            request.agent == "reviewer" and request.messages[0]["content"][0]["text"] == "Review notes.txt."
        )
        return Reply().say("fine")

    model = ScriptedModel([reviewer, Reply().say("reviewed")])
    try:

        async def resume() -> Outcome:
            return await asyncio.wait_for(supervise(project, run_dir, store, model).resume(), 30)

        assert asyncio.run(resume()).status == "done"
        assert last_results(model.requests[1]) == ["## reviewer: done\nfine"]
        child = store.reader.agent("reviewer")
        assert (child.kind, child.role, child.status) == ("task", "reviewer", "done")
    finally:
        store.close()
