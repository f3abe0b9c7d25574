"""The agent corpus (``tests/data/agent_corpus``): files written in the styles of public collections of Claude
Code agents. Every well-formed one loads with its model, tools and mode; every broken one is named in a
warning with its cause; what a loaded one asks for and teamrt lacks is a warning too, never a silent drop."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from teamrt.agents import AgentScan, choose_model, role_name, scan_definitions
from teamrt.agents.frontmatter import split
from teamrt.mailbox import is_name
from teamrt.runtime.fromproject import with_agent_roles
from teamrt.runtime.teamrun import DEFAULT_TEAM
from teamrt.team import load_team

CORPUS = Path(__file__).parents[1] / "data" / "agent_corpus"
ALL = None
LONG_NAME = (
    "Data Platform Lead (Senior) – Analytics & Warehousing Architecture and Pipeline Reliability Owner"
)

# file: (name, model as written, tools ("" none, ALL every tool), permission mode, maxTurns)
LOADS: dict[str, tuple[str, str | None, str | None, str | None, int | None]] = {
    "data/data-engineer.md": ("data-engineer", None, "", None, None),
    "data/data-scientist.md": ("data-scientist", "sonnet", "Read Write Bash", None, None),
    "data/ml-engineer.md": ("ml-engineer", "opus", "Read Write Edit Bash Glob Grep", None, None),
    "data/sql-expert.md": ("SQL.Expert", None, "Read Bash", None, None),
    "design/ui-designer.md": ("ui-designer", None, "Write Read Edit WebSearch WebFetch", None, None),
    "design/ux-researcher.md": ("ux-researcher", None, "Read Write Grep", None, None),
    "design/whimsy-injector.md": ("whimsy-injector", None, "Read Write Edit Grep Glob", None, None),
    "docs/docs-architect.md": ("docs-architect", "opus", ALL, None, None),
    "docs/technical-writer.md": ("technical-writer", None, "Read Write Edit Glob Grep", None, None),
    "docs/tutorial-engineer.md": ("tutorial-engineer", None, "Read Write Edit", None, None),
    "engineering/api-documenter.md": ("api-documenter", "haiku", "Read Write WebFetch WebSearch", None, None),
    "engineering/backend-architect.md": ("backend-architect", "sonnet", ALL, None, None),
    "engineering/database-optimizer.md": (
        "database-optimizer", "opus", "Read Write Edit Bash mcp__postgres__query mcp__postgres__explain",
        None, None,
    ),
    "engineering/devops-troubleshooter.md": ("devops-troubleshooter", None, ALL, None, None),
    "engineering/frontend-developer.md": (
        "frontend-developer", None, "Write Read Edit Bash Grep Glob", None, None,
    ),
    "engineering/golang-pro.md": (
        "golang-pro", "claude-sonnet-4-5-20250929", "Read Write Edit Bash Glob Grep", None, None,
    ),
    "engineering/python-pro.md": ("python-pro", None, "Read Write Edit Bash", None, None),
    "engineering/rust-expert.md": ("rust-expert", "opus", "Read Edit Bash Grep", None, None),
    "engineering/test-automator.md": ("test-automator", None, "Read Write Edit Bash TodoWrite", None, 30),
    "engineering/typescript-pro.md": ("typescript-pro", "sonnet", "Read Edit Bash", None, None),
    "lang/Vue.Expert.md": ("Vue.Expert", "haiku", ALL, None, None),
    "lang/java_architect.md": ("Java_Architect", "sonnet", ALL, None, None),
    "lang/node.js-specialist.md": ("node.js-specialist", None, "Read Write Edit Bash", None, None),
    "lang/react.v19.md": ("react.v19-expert", None, "Read Write Edit Bash", None, None),
    "meta/agent-organizer.md": ("agent-organizer", None, "Read Write Edit Glob Grep Task", None, None),
    "meta/context-manager.md": ("context-manager", None, "Read Write Edit TodoWrite", None, None),
    "meta/task-distributor.md": (
        "task-distributor", None, "Read Glob Grep send_message task_create task_list", None, None,
    ),
    "misc/advisor.md": ("advisor", None, "", None, None),
    "misc/bom-agent.md": ("bom-agent", None, ALL, None, None),
    "misc/commented.md": ("commented", None, "Read Grep", None, None),
    "misc/crlf-agent.md": ("crlf-agent", "haiku", "Read Grep", None, None),
    "misc/release-manager.md": ("release-manager", None, "Read Bash Edit", None, None),
    "misc/short-lived.md": ("short-lived", "haiku", ALL, None, 8),
    "misc/spaced-out.md": ("spaced-out", None, "Read Grep", None, None),
    "misc/tab-indented.md": ("tab-indented", None, "Read", None, None),
    "misc/translator.md": ("translator", None, "Read Write", None, None),
    "misc/verifier.md": ("verifier", None, "Bash", "default", None),
    "names/Data.Platform.Lead.md": (LONG_NAME, None, "Read Bash Edit", None, None),
    "names/japanese.md": ("コードレビュアー", None, "Read Grep", None, None),
    "names/long-rule.md": ("changelog-writer", None, "Read Edit", None, None),
    "names/python-testing-expert.md": (
        "Python Testing Expert", "sonnet", "Read Write Edit Bash Grep", None, None,
    ),
    "names/release-notes.md": ("Release Notes Editor", None, "Read Write", None, None),
    "names/team-reviewer.md": ("team/reviewer", None, "Read Grep Glob", None, None),
    "modes/acceptEdits.md": ("mode-acceptedits", None, "Read Edit Bash", "acceptEdits", None),
    "modes/auto.md": ("mode-auto", None, "Read Edit Bash", None, None),  # not from a repository
    "modes/bypassPermissions.md": (
        "mode-bypasspermissions", None, "Read Edit Bash", None, None,
    ),
    "modes/default.md": ("mode-default", None, "Read Edit Bash", "default", None),
    "modes/dontAsk.md": ("mode-dontask", None, "Read Edit Bash", "dontAsk", None),
    "modes/manual.md": ("mode-manual", None, "Read Edit Bash", "default", None),
    "modes/plan.md": ("mode-plan", None, "Read Edit Bash", "plan", None),
    "modes/yolo.md": ("mode-yolo", None, "Read Edit Bash", None, None),
    "ops/cloud-architect.md": ("cloud-architect", "gpt-4o", "Read Write", None, None),
    "ops/incident-responder.md": ("incident-responder", "sonnet", ALL, None, None),
    "ops/infra/kubernetes-architect.md": ("kubernetes-architect", "opus", "Read Write Edit Bash", None, None),
    "ops/infra/terraform-specialist.md": (
        "terraform-specialist", "claude-sonnet-4-20250514", "Read Write Edit Bash", None, None,
    ),
    "product/feedback-synthesizer.md": (
        "feedback-synthesizer", None, "Read Write Grep WebFetch Edit", None, None,
    ),
    "product/sprint-prioritizer.md": ("sprint-prioritizer", None, "Write Read TodoWrite Grep", None, None),
    "product/trend-researcher.md": (
        "trend-researcher", None, "WebSearch WebFetch Read Write Grep", None, None,
    ),
    "quality/accessibility-tester.md": (
        "accessibility-tester", None, "Read Grep Glob Bash WebFetch", None, None,
    ),
    "quality/code-reviewer.md": ("code-reviewer", None, "Read Grep Glob Bash", None, None),
    "quality/debugger.md": ("debugger", None, "Read Edit Bash Grep Glob", None, None),
    "quality/performance-engineer.md": (
        "performance-engineer", "claude-opus-4-1-20250805", "Read Bash Grep Glob LS Task", None, None,
    ),
    "quality/security-auditor.md": ("security-auditor", "opus", ALL, "plan", None),
}  # fmt: skip

# file: what its skip line says
SKIPPED = {
    "README.md": "no front matter",
    "broken/bad-flow-list.md": "line 4: YAML error",
    "broken/duplicate-key.md": "line 3: YAML error: key 'name' given twice",
    "broken/empty-body.md": "empty body",
    "broken/latin1.md": "not UTF-8 text",
    "broken/leading-blank-line.md": "no front matter",
    "broken/list-description.md": "field 'description' must be a non-empty string",
    "broken/max-turns-word.md": "field 'maxTurns' must be a positive integer, not 'many'",
    "broken/missing-description.md": "missing required field 'description'",
    "broken/missing-name.md": "missing required field 'name'",
    "broken/no-front-matter.md": "no front matter",
    "broken/prose-in-front-matter.md": "line 4: YAML error: not a 'key: value' line",
    "broken/python-tag.md": "line 4: YAML error: could not determine a constructor",
    "broken/tools-number.md": "field 'tools' must be a comma-separated string or a list of strings, not 5",
    "broken/unclosed.md": "front matter not closed",
    "zz-duplicates/code-reviewer.md": "agent 'code-reviewer' is defined already in",
    "zz-duplicates/display-name.md": "agent 'Code Reviewer' and agent 'code-reviewer' of",
}

# file: what its warnings say, in order; a loaded file not listed has none
WARNED = {
    "data/data-engineer.md": [
        "tools: no such tool 'Read Write Edit Bash'; left out",
        "none of the tools it names is available: it has only the team tools",
    ],
    "data/data-scientist.md": ["tools: 'NotebookEdit' is not available in teamrt yet"],
    "data/ml-engineer.md": ["unknown field 'version' ignored"],
    "docs/docs-architect.md": ["Claude Code's field 'background' is not used by teamrt"],
    "docs/technical-writer.md": ["field 'memory' is not used"],  # its skills: teamrt.claudecode.skills
    "engineering/python-pro.md": [
        f"no such tool {t!r}" for t in ("pip", "pytest", "black", "mypy", "poetry", "ruff")
    ],
    "lang/node.js-specialist.md": ["no such tool 'npm'"],
    "meta/context-manager.md": ["field 'initialPrompt' is not used", "field 'isolation' is not used"],
    "modes/auto.md": ["permissionMode 'auto' ignored: a repository's agent file may not lift"],
    "modes/bypassPermissions.md": [
        "permissionMode 'bypassPermissions' ignored: a repository's agent file may not lift"
    ],
    "modes/yolo.md": [
        "permissionMode 'yolo' is not one of default, acceptEdits, plan, bypassPermissions, dontAsk"
    ],
    "ops/cloud-architect.md": ["model 'gpt-4o' is not one teamrt knows"],
    "ops/incident-responder.md": ["field 'hooks' is not used"],
    "ops/infra/kubernetes-architect.md": ["no such tool 'kubectl'", "no such tool 'helm'"],
    "ops/infra/terraform-specialist.md": ["model 'claude-sonnet-4-20250514' was retired on 2026-06-15"],
    "quality/accessibility-tester.md": ["no such tool 'axe'", "no such tool 'lighthouse'"],
    "quality/performance-engineer.md": ["model 'claude-opus-4-1-20250805' was retired on 2026-08-05"],
}

LENIENT = (
    "engineering/frontend-developer.md",
    "product/sprint-prioritizer.md",
    "quality/debugger.md",
    "design/ux-researcher.md",
    "design/whimsy-injector.md",
    "misc/release-manager.md",
    "misc/translator.md",
    "misc/tab-indented.md",
)
"""Files strict YAML refuses and Claude Code loads: unquoted descriptions with ': ', a tab."""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = tmp_path_factory.mktemp("corpus-project")
    shutil.copytree(CORPUS, project / ".claude" / "agents")
    return project


@pytest.fixture(scope="module")
def scan(project: Path) -> AgentScan:
    return scan_definitions(project)  # conftest points CLAUDE_CONFIG_DIR at a missing folder


def folder(project: Path) -> Path:
    return project / ".claude" / "agents"


def test_the_corpus_is_large_and_varied() -> None:
    files = sorted(str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*.md"))
    assert len(files) >= 60
    assert files == sorted([*LOADS, *SKIPPED]), "every corpus file has an expectation"
    raw = {name: (CORPUS / name).read_bytes() for name in files}
    assert sum(b"\r\n" in data for data in raw.values()) >= 3, "CRLF files"
    assert sum(data.startswith(b"\xef\xbb\xbf") for data in raw.values()) >= 2, "BOM files"
    assert any("🎨".encode() in data for data in raw.values()) and any(
        "翻訳".encode() in data for data in raw.values()
    )
    assert any(b"<example>" in data for data in raw.values())
    modes = {mode for *_, mode, _ in LOADS.values()} | {"bypassPermissions", "auto"}  # warned of (WARNED)
    assert len(modes - {None}) == 6, "every permission mode"


@pytest.mark.parametrize("name", LENIENT)
def test_strict_yaml_refuses_the_hand_written_ones(name: str) -> None:
    header = split((CORPUS / name).read_bytes().decode("utf-8-sig")).header
    with pytest.raises(yaml.YAMLError):
        yaml.safe_load(header)


def test_every_well_formed_file_loads_with_its_model_tools_and_mode(project: Path, scan: AgentScan) -> None:
    loaded = {
        str(Path(d.source).relative_to(folder(project))): d
        for d in scan.definitions.values()
        if d.scope == "project"
    }
    assert sorted(loaded) == sorted(LOADS)
    for path, (name, model, tools, mode, turns) in LOADS.items():
        definition = loaded[path]
        expected_tools = None if tools is None else tuple(tools.split())
        got = (definition.name, definition.model, definition.tools, definition.permission_mode)
        assert got == (name, model, expected_tools, mode), path
        assert definition.max_turns == turns, path
        assert definition.description and definition.prompt, path
        assert "\r" not in definition.prompt and not definition.prompt.startswith("\ufeff"), path


def test_every_broken_file_is_named_with_its_cause(project: Path, scan: AgentScan) -> None:
    lines = {}
    for line in scan.skipped:
        path, _, cause = line.partition(".md: ")
        lines[str(Path(path + ".md").relative_to(folder(project)))] = cause
    assert sorted(lines) == sorted(SKIPPED)
    for path, cause in SKIPPED.items():
        assert lines[path].startswith(cause) or cause in lines[path], (path, lines[path])
        assert "\n" not in lines[path]
    assert set(scan.skipped) <= set(scan.warnings)


def test_what_a_loaded_file_asks_for_and_teamrt_lacks_is_a_warning(project: Path, scan: AgentScan) -> None:
    for definition in scan.definitions.values():
        if definition.scope != "project":
            continue
        path = str(Path(definition.source).relative_to(folder(project)))
        expected = WARNED.get(path, [])
        assert len(definition.warnings) == len(expected), (path, definition.warnings)
        for line, said in zip(definition.warnings, expected, strict=True):
            assert line.startswith(f"{definition.source}: ") and said in line, (path, line)
        assert set(definition.warnings) <= set(scan.warnings)


def test_lenient_descriptions_keep_their_colons_and_examples(scan: AgentScan) -> None:
    assert scan.definitions["debugger"].description.startswith(
        "Debugging specialist for errors, test failures and odd behaviour. Use when: a test fails,"
    )
    assert "<example>\nuser: the build is red since this morning" in scan.definitions["debugger"].description
    assert scan.definitions["frontend-developer"].description.startswith("Use this agent when building user")
    assert "<example>" in scan.definitions["feedback-synthesizer"].description
    assert scan.definitions["translator"].description.startswith("日本語と英語の翻訳を行います。Use when:")
    assert scan.definitions["verifier"].description == "Don't guess: verify. Runs the checks and reports."


def test_models_resolve_on_a_sim_team_and_stay_offline(scan: AgentScan) -> None:
    on_sim = {name: choose_model(None, scan.definitions[name], "sim") for name in (
        "rust-expert", "api-documenter", "backend-architect", "golang-pro", "devops-troubleshooter",
        "cloud-architect", "performance-engineer",
    )}  # fmt: skip
    assert on_sim == {
        "rust-expert": "sim:claude-opus-5-5",
        "api-documenter": "sim:claude-haiku-5-5",
        "backend-architect": "sim:claude-sonnet-5-5",
        "golang-pro": "sim:claude-sonnet-4-5-20250929",
        "devops-troubleshooter": "sim",
        "cloud-architect": "sim",
        "performance-engineer": "sim",  # claude-opus-4-1 is retired: the team's model instead
    }
    assert all(choose_model(None, d, "sim").startswith("sim") for d in scan.definitions.values()), (
        "no agent file turns a sim run into a billed one"
    )


def test_every_loaded_agent_becomes_a_role_of_the_built_in_team(project: Path, scan: AgentScan) -> None:
    said: list[str] = []
    team = with_agent_roles(load_team(DEFAULT_TEAM, project=project), scan, said.append)
    agents = {role.agent for role in team.roles.values()}
    assert {d.name for d in scan.definitions.values() if d.scope == "project"} == agents - {
        "coder",
        "reviewer",
    }
    assert all(is_name(name) and name == role_name(team.roles[name].agent) for name in team.roles)
    assert said == []


def test_teamrt_agents_lists_the_corpus(project: Path) -> None:
    env = os.environ.copy()
    result = subprocess.run(
        [sys.executable, "-m", "teamrt", "agents", "--json"],
        cwd=project, capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert len([a for a in data["agents"] if a["scope"] == "project"]) == len(LOADS)
    assert len(data["skipped"]) == len(SKIPPED)
    text = subprocess.run(
        [sys.executable, "-m", "teamrt", "agents"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert text.returncode == 0 and text.stdout.count("\n") > len(LOADS) + len(SKIPPED)
