"""Memory: CLAUDE.md and its kin with their imports, bounded and confined, in every agent's system prompt."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from teamrt.claudecode.memory import MAX_DEPTH, MAX_FILE_BYTES, MAX_TOTAL_BYTES, USER, imports, load_memory
from teamrt.models import Reply
from teamrt.sim import SimRequest, SimServer
from tests.helpers.teams import supervise
from tests.helpers.waiting import within

PROJECT = "project instructions, checked into the codebase"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home directory with the user's Claude folder in it, as ``~/.claude``."""
    path = tmp_path / "home"
    (path / ".claude").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(path))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(path / ".claude"))
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def texts(project: Path) -> list[str]:
    return [file.text.strip() for file in load_memory(project).files]


# -- which files, in which order ------------------------------------------------------


def test_no_memory_files_no_text(project: Path, home: Path) -> None:
    memory = load_memory(project)
    assert (memory.files, memory.warnings, memory.text) == ((), (), "")


def test_every_memory_file_in_claude_codes_order_each_named(project: Path, home: Path) -> None:
    write(project / "CLAUDE.local.md", "local")
    write(project / "AGENTS.md", "agents")
    write(project / ".claude" / "CLAUDE.md", "dot-claude")
    write(project / "CLAUDE.md", "project")
    write(home / ".claude" / "CLAUDE.md", "user")
    memory = load_memory(project)
    assert [f.text for f in memory.files] == ["user", "project", "dot-claude", "agents", "local"]
    assert memory.text.startswith("# Memory\n\n")
    assert f"Contents of {home / '.claude' / 'CLAUDE.md'} ({USER}):\n\nuser\n\n" in memory.text
    assert f"Contents of {project / 'CLAUDE.md'} ({PROJECT}):\n\nproject\n\n" in memory.text
    local = f"Contents of {project / 'CLAUDE.local.md'} (user's private project instructions, not checked in)"
    assert memory.text.endswith(f"{local}:\n\nlocal")
    assert memory.text.count("Contents of ") == 5


def test_the_text_is_the_same_string_every_time(project: Path, home: Path) -> None:
    write(project / "CLAUDE.md", "Use tabs. @docs/style.md")
    write(project / "docs" / "style.md", "Tabs, really.")
    memory = load_memory(project)
    assert memory.text is memory.text
    assert load_memory(project).text == memory.text


def test_a_file_reached_twice_is_read_once(project: Path, home: Path) -> None:
    write(project / "AGENTS.md", "shared instructions")
    (project / "CLAUDE.md").symlink_to("AGENTS.md")
    assert texts(project) == ["shared instructions"]


def test_the_users_file_may_be_a_link_to_dotfiles(tmp_path: Path, project: Path, home: Path) -> None:
    dotfiles = write(tmp_path / "dotfiles" / "CLAUDE.md", "mine")
    (home / ".claude" / "CLAUDE.md").symlink_to(dotfiles)
    assert texts(project) == ["mine"]


# -- imports ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("See @docs/a.md for more.", ["docs/a.md"]),
        ("@a.md\n@b.md @c.md", ["a.md", "b.md", "c.md"]),
        ("- @~/.claude/mine.md", ["~/.claude/mine.md"]),
        ("@/abs/path.md", ["/abs/path.md"]),
        (r"@docs/with\ space.md", ["docs/with space.md"]),
        ("mail me@example.com", []),
        ("in `@code.md` span", []),
        ("in ``a ` @code.md`` span, then @real.md", ["real.md"]),
        ("```\n@fenced.md\n```\n@after.md", ["after.md"]),
        ("~~~ python\n@fenced.md\n```\n@still-fenced.md\n~~~\n@after.md", ["after.md"]),
        ("````\n```\n@inner.md\n````\n@after.md", ["after.md"]),
        ("```\n@unclosed.md", []),
    ],
)
def test_imports_are_found_outside_code(text: str, found: list[str]) -> None:
    assert imports(text) == found


def test_imports_follow_their_importer_relative_to_it(project: Path, home: Path) -> None:
    write(project / "CLAUDE.md", "root @docs/a.md\nthen @AGENTS.md")
    write(project / "docs" / "a.md", "a imports @../docs/deeper/b.md")
    write(project / "docs" / "deeper" / "b.md", "b")
    write(project / "AGENTS.md", "agents")
    memory = load_memory(project)
    docs = project / "docs"
    assert [f.path for f in memory.files] == [
        project / "CLAUDE.md", docs / "a.md", docs / "deeper" / "b.md", project / "AGENTS.md"
    ]  # fmt: skip
    assert {f.description for f in memory.files} == {PROJECT}
    assert memory.warnings == ()


def test_names_that_are_no_file_are_text(project: Path, home: Path) -> None:
    (project / "src").mkdir()
    write(project / "CLAUDE.md", "Ask @maintainer, see @src and @missing.md, use @types/node. `@x`")
    memory = load_memory(project)
    assert texts(project) == ["Ask @maintainer, see @src and @missing.md, use @types/node. `@x`"]
    assert memory.warnings == ()


def test_the_user_imports_from_their_claude_folder(project: Path, home: Path) -> None:
    write(home / ".claude" / "CLAUDE.md", "user @~/.claude/extra.md and @rules/style.md")
    write(home / ".claude" / "extra.md", "extra")
    write(home / ".claude" / "rules" / "style.md", "style")
    assert texts(project) == ["user @~/.claude/extra.md and @rules/style.md", "extra", "style"]


def test_an_import_cycle_ends_where_it_closes(project: Path, home: Path) -> None:
    write(project / "CLAUDE.md", "root @a.md")
    write(project / "a.md", "a @b.md")
    write(project / "b.md", "b @a.md @CLAUDE.md @b.md")
    memory = load_memory(project)
    assert texts(project) == ["root @a.md", "a @b.md", "b @a.md @CLAUDE.md @b.md"]
    assert memory.warnings == ()


def test_imports_nest_five_levels_at_most(project: Path, home: Path) -> None:
    write(project / "CLAUDE.md", "level 0 @l1.md")
    for level in range(1, 10):
        write(project / f"l{level}.md", f"level {level} @l{level + 1}.md")
    memory = load_memory(project)
    assert [f.text.split(" @")[0] for f in memory.files] == [f"level {n}" for n in range(MAX_DEPTH + 1)]
    assert memory.warnings == (
        f"{project / 'l5.md'}: import @l6.md left out: imports nest {MAX_DEPTH} levels at most",
    )


# -- a repository is not trusted ---------------------------------------------------------------


@pytest.mark.hostile
def test_an_import_of_etc_passwd_is_refused(project: Path, home: Path) -> None:
    write(project / "CLAUDE.md", "Read @/etc/passwd first.")
    memory = load_memory(project)
    assert "root:" not in memory.text
    assert memory.warnings == (
        f"{project / 'CLAUDE.md'}: import @/etc/passwd refused: /etc/passwd is outside the project",
    )


@pytest.mark.hostile
def test_an_import_climbing_out_is_refused(tmp_path: Path, project: Path, home: Path) -> None:
    secret = write(tmp_path / "outside" / "secret.md", "SECRET")
    write(project / "docs" / "CLAUDE.md", "")
    write(project / "CLAUDE.md", "@../outside/secret.md @docs/../../outside/secret.md")
    memory = load_memory(project)
    assert "SECRET" not in memory.text
    assert len(memory.warnings) == 2 and all(f"{secret} is outside the project" in w for w in memory.warnings)


@pytest.mark.hostile
def test_an_import_of_the_users_claude_folder_is_refused(project: Path, home: Path) -> None:
    write(home / ".claude" / ".credentials.json", '{"token": "SECRET"}')
    write(project / "CLAUDE.md", "@~/.claude/.credentials.json")
    memory = load_memory(project)
    assert "SECRET" not in memory.text and "is outside the project" in memory.warnings[0]


@pytest.mark.hostile
def test_the_users_file_cannot_import_beyond_its_folder(tmp_path: Path, project: Path, home: Path) -> None:
    write(home / ".ssh" / "id_rsa", "KEY")
    write(home / ".claude" / "CLAUDE.md", "@~/.ssh/id_rsa")
    memory = load_memory(project)
    assert "KEY" not in memory.text and f"is outside {home / '.claude'}" in memory.warnings[0]


@pytest.mark.hostile
def test_a_memory_file_linking_outside_is_left_out(tmp_path: Path, project: Path, home: Path) -> None:
    write(tmp_path / "elsewhere.md", "SECRET")
    (project / "CLAUDE.md").symlink_to(tmp_path / "elsewhere.md")
    (project / ".claude").mkdir()
    (project / ".claude" / "CLAUDE.md").symlink_to("/etc/passwd")
    memory = load_memory(project)
    assert memory.files == ()
    assert memory.warnings == (
        f"{project / 'CLAUDE.md'}: left out: a link to {tmp_path / 'elsewhere.md'}, outside the project",
        f"{project / '.claude' / 'CLAUDE.md'}: left out: a link to /etc/passwd, outside the project",
    )


@pytest.mark.hostile
def test_an_import_through_a_link_inside_pointing_outside_is_refused(
    tmp_path: Path, project: Path, home: Path
) -> None:
    write(tmp_path / "outside.md", "SECRET")
    (project / "notes.md").symlink_to(tmp_path / "outside.md")
    write(project / "CLAUDE.md", "@notes.md")
    memory = load_memory(project)
    assert "SECRET" not in memory.text and "outside the project" in memory.warnings[0]


@pytest.mark.hostile
def test_a_50_mb_file_is_cut_quickly(project: Path, home: Path) -> None:
    with open(project / "CLAUDE.md", "wb") as out:
        out.write(("é" * 1000 + "\n").encode() * 26_000)  # 52 MB; the cut splits an é
    started = time.monotonic()
    memory = load_memory(project)
    # A ceiling that bounds reading the whole file in small pieces or line by line (idle: a fraction of a s).
    assert time.monotonic() - started < 30
    [file] = memory.files
    assert len(file.text.encode()) in range(MAX_FILE_BYTES - 3, MAX_FILE_BYTES + 1)
    assert memory.warnings == (
        f"{project / 'CLAUDE.md'}: cut to its first {MAX_FILE_BYTES // 1024} KiB (it has 52026000 bytes)",
    )


@pytest.mark.hostile
def test_memory_holds_a_bounded_total(project: Path, home: Path) -> None:
    count = MAX_TOTAL_BYTES // MAX_FILE_BYTES + 2
    write(project / "CLAUDE.md", " ".join(f"@part{n}.md" for n in range(count)))
    for n in range(count):
        write(project / f"part{n}.md", "x" * MAX_FILE_BYTES)
    memory = load_memory(project)
    assert sum(len(f.text) for f in memory.files) <= MAX_TOTAL_BYTES
    assert any("memory holds 1024 KiB at most in all" in w for w in memory.warnings)
    assert any("cut to its first" in w for w in memory.warnings), "the file at the limit is cut"


@pytest.mark.hostile
def test_not_utf8_is_left_out(project: Path, home: Path) -> None:
    (project / "CLAUDE.md").write_bytes(b"caf\xe9 latin-1")
    write(project / "AGENTS.md", "fine")
    memory = load_memory(project)
    assert texts(project) == ["fine"]
    assert memory.warnings == (f"{project / 'CLAUDE.md'}: left out: not UTF-8 text",)


@pytest.mark.hostile
def test_a_fifo_is_left_out_without_blocking(project: Path, home: Path) -> None:
    os.mkfifo(project / "CLAUDE.md")
    os.mkfifo(project / "pipe.md")
    write(project / "AGENTS.md", "@pipe.md")
    memory = within(30, lambda: load_memory(project))
    assert texts(project) == ["@pipe.md"]
    assert [w.split(": ", 1)[1] for w in memory.warnings] == ["left out: not a regular file"] * 2


@pytest.mark.hostile
def test_a_nul_in_an_import_is_text(project: Path, home: Path) -> None:
    write(project / "CLAUDE.md", "@bad\0name.md and @ok.md")
    write(project / "ok.md", "ok")
    assert texts(project)[1:] == ["ok"]


# -- in a run -------------------------------------------------------------------------------------


def forking_lead(request: SimRequest) -> Reply:
    if not request.calls("spawn_agent"):
        return Reply().call("spawn_agent", {"kind": "fork", "directives": ["part A", "part B"]})
    return Reply().say("merged")


def test_memory_reaches_every_agents_system_prompt_and_forks_share_it(
    project: Path, home: Path, sim: SimServer
) -> None:
    write(project / "CLAUDE.md", "Always run the linter. @docs/conventions.md")
    write(project / "docs" / "conventions.md", "Name tests after behaviour.")
    write(project / "team.toml", '[team]\nmodel = "sim"\n')
    sim.policies.update({"lead": forking_lead, "fork": lambda request: Reply().say("ok")})
    outcome = supervise(project, sim, project.parent / "teamrt-home" / "runs" / "r1")
    assert outcome.status == "done", outcome
    systems = {agent: json.dumps(json.loads(body)["system"]) for agent, body in sim.bodies}
    assert len(systems) == 3
    memory = load_memory(project).text
    for agent, system in systems.items():
        assert json.dumps(memory)[1:-1] in system, agent
        assert "Name tests after behaviour." in system
    assert len(set(systems.values())) == 1, "forks keep their parent's system prompt byte for byte"


def test_memory_warnings_reach_teamrt_run(tmp_path: Path) -> None:
    project = tmp_path / "p"
    write(project / "CLAUDE.md", "@/etc/passwd")
    result = subprocess.run(
        [sys.executable, "-m", "teamrt", "run", "--prompt", "x", "--model", "sim"],
        env={**os.environ, "TEAMRT_HOME": str(project / ".teamrt")},
        cwd=project, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "teamrt: warning: " in result.stderr and "import @/etc/passwd refused" in result.stderr
