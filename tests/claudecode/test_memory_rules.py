"""``.claude/rules`` as Claude Code loads them: plain rules with the memory, path-scoped ones with the first
matching file an agent reads or edits, once; and attacks through rule files."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from teamrt.claudecode.memory import load_memory
from teamrt.claudecode.paths import claude_home
from teamrt.claudecode.rules import compile_glob
from teamrt.models import Reply, ScriptedModel
from teamrt.runtime import scopedrules
from teamrt.store import Store
from teamrt.testing import run_on_sim
from teamrt.tools.base import ToolContext, ToolResult
from tests.helpers.teams import FAST, kept


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


def test_plain_rules_join_the_memory_and_path_scoped_ones_wait(project: Path) -> None:
    write(project / "CLAUDE.md", "root memory")
    write(project / ".claude" / "CLAUDE.md", "dot memory")
    write(project / ".claude" / "rules" / "style.md", "Use tabs.")
    write(
        project / ".claude" / "rules" / "deep" / "api.md",
        '---\npaths:\n  - "src/api/**/*.py"\n---\nAPI rule.',
    )
    write(project / ".claude" / "rules" / "ts.md", "---\npaths: **/*.{ts,tsx}\n---\nTS rule.")
    write(project / ".claude" / "rules" / "meta.md", "---\ndescription: only metadata\n---\nMeta rule.")
    write(project / "AGENTS.md", "agents memory")
    write(claude_home() / "rules" / "mine.md", "My own rule.")
    memory = load_memory(project)
    assert memory.warnings == ()
    names = [str(f.path.relative_to(f.path.parents[2])) if "rules" in f.path.parts else f.path.name
             for f in memory.files]  # fmt: skip
    assert [f.text for f in memory.files] == [
        "My own rule.", "root memory", "dot memory", "Meta rule.", "Use tabs.", "agents memory",
    ], names  # fmt: skip
    assert "project rule, checked into the codebase" in memory.text and "Use tabs." in memory.text
    assert "API rule." not in memory.text and "TS rule." not in memory.text
    scoped = {r.path.name: r for r in memory.scoped}
    assert scoped["api.md"].matches("src/api/v1/users.py") and not scoped["api.md"].matches("src/web.py")
    assert scoped["ts.md"].matches("a/b/c.tsx") and scoped["ts.md"].matches("x.ts")


@pytest.mark.parametrize(
    ("glob", "yes", "no"),
    [
        ("*.md", ["README.md", "docs/a/b.md"], ["README.mdx"]),
        ("src/**", ["src/a", "src/a/b/c.py"], ["lib/src/a"]),
        ("src/*.py", ["src/a.py"], ["src/a/b.py"]),
        ("**/test_*.py", ["test_a.py", "x/y/test_b.py"], ["x/y/b_test.py"]),
        ("./docs/{api,guide}/*.md", ["docs/api/a.md", "docs/guide/b.md"], ["docs/other/c.md"]),
        ("file[0-9].txt", ["file3.txt"], ["filex.txt"]),
    ],
)
def test_globs_match_as_claude_code_documents(glob: str, yes: list[str], no: list[str]) -> None:
    pattern = compile_glob(glob)
    assert all(pattern.fullmatch(p) for p in yes) and not any(pattern.fullmatch(p) for p in no)


def test_a_path_scoped_rule_reaches_the_agent_once_with_its_first_matching_read(
    project: Path, tmp_path: Path
) -> None:
    write(project / ".claude" / "rules" / "api.md", "---\npaths: src/api/**\n---\nAlways validate input.")
    write(project / "src" / "api" / "a.py", "A = 1\n")
    write(project / "src" / "api" / "b.py", "B = 2\n")
    write(project / "README.md", "readme\n")
    (project / "team.toml").write_text('[team]\nname = "r"\nmodel = "sim"\n')
    steps = [
        Reply().call("Read", {"file_path": "README.md"}),
        Reply().call("Read", {"file_path": str(project / "src" / "api" / "a.py")}),
        Reply().call("Read", {"file_path": "src/api/b.py"}),
        Reply().say("done"),
    ]
    model = ScriptedModel(steps)
    outcome = run_on_sim(
        project / "team.toml", "go", project=project, run_dir=tmp_path / "run", run_id="r1",
        settings=FAST, timeout=60, models={"sim": model},
    )  # fmt: skip
    assert outcome.status == "done", outcome
    assert "Always validate input." not in model.requests[0].system

    def texts(turn: int) -> list[str]:
        return [
            b.get("text", "") for b in model.requests[turn].messages[-1]["content"] if b["type"] == "text"
        ]

    assert texts(1) == []  # README.md matches no rule
    (given,) = texts(2)
    assert given.startswith(f"Contents of {project / '.claude' / 'rules' / 'api.md'}") and given.endswith(
        "Always validate input."
    )
    assert model.requests[2].messages[-1]["content"][0]["type"] == "tool_result"  # results first
    assert texts(3) == []  # b.py: the rule was given already
    events = [e for e in kept(outcome).reader.events() if e.kind == "memory.rule"]
    assert [(e.agent, e.data["file"]) for e in events] == [("lead", "src/api/a.py")]
    # an agent rebuilt from the store (a resume) finds it journaled and does not give it again
    rules = scopedrules.AgentRules(
        load_memory(project).scoped, cast(Store, SimpleNamespace(reader=kept(outcome).reader)), "lead"
    )
    loop: Any = SimpleNamespace(
        env=SimpleNamespace(rules=rules, tools=ToolContext(workspace=project, run_dir=tmp_path)), messages=[]
    )

    asyncio.run(scopedrules.touched(loop, "Edit", {"file_path": "src/api/a.py"}, ToolResult("ok")))
    assert rules.pending == []
    # a fork, journaled under its own name, inherits the lead's history: the rule shown there counts
    forked = scopedrules.AgentRules(rules.rules, rules.store, "lead-fork")
    loop = SimpleNamespace(
        env=SimpleNamespace(rules=forked, tools=loop.env.tools), messages=model.requests[3].messages
    )
    asyncio.run(scopedrules.touched(loop, "Read", {"file_path": "src/api/b.py"}, ToolResult("ok")))
    assert forked.pending == []


@pytest.mark.hostile
def test_attack_rule_files_with_terminal_escapes_links_out_and_fifos_are_said_safely(
    project: Path, tmp_path: Path
) -> None:
    secret = write(tmp_path / "secret.txt", "TOP SECRET")
    rules = project / ".claude" / "rules"
    write(rules / "evil\x1b]0;owned\x07.md", "---\npaths: 7\n---\nRule \x1b[2J text.")
    os.symlink(secret, rules / "steal.md")
    os.mkfifo(rules / "pipe.md")
    os.symlink(tmp_path, rules / "folder")
    memory = load_memory(project)
    said = "\n".join(memory.warnings)
    assert "\x1b" not in said and "\x07" not in said
    assert "steal.md: left out: a link to" in said and "not a regular file" in said
    assert "a link to a folder" in said and "paths must be a glob" in said
    assert "TOP SECRET" not in memory.text and all("TOP SECRET" not in r.text for r in memory.scoped)
    assert json.dumps(memory.text).count("Rule") == 1  # the evil rule loads for every file, as text


@pytest.mark.hostile
def test_attack_a_rule_naming_files_outside_the_workspace_matches_nothing(project: Path) -> None:
    write(project / ".claude" / "rules" / "all.md", "---\npaths: ['**']\n---\nEverything.")
    (rule,) = load_memory(project).scoped
    assert scopedrules_relative("../../etc/passwd", project) is None and rule.matches("a/b")


def scopedrules_relative(path: str, workspace: Path) -> str | None:
    from teamrt.claudecode.rules import relative

    return relative(path, workspace)
