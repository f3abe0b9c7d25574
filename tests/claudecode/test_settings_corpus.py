"""A corpus of settings files in the styles found in public repositories (``tests/data/settings_corpus``):
rules Claude Code writes itself with shell keywords (``Bash(time:*)``), pipes and compound commands
inside rules, malformed and unknown-tool rules, JSON with comments and trailing commas, files Claude Code
leaves out, keys teamrt does not use (``statusLine``, ``enabledPlugins``), Claude Code's ``env`` knobs,
hooks of every kind, people's global files with many rules, and attack-style files.

Each ``NN-name.json`` has a sidecar ``NN-name.expect.json``, written by hand: the scope it is loaded as,
the warnings it must get (each a piece of exactly one warning line, one per problem, every line
accounted for), and calls its deny rules must deny (its ask rules ask about, its allow rules allow)
through the real ``Permissions`` check. For every file: loading never raises (no file stops a run).
A handful go through ``teamrt run`` on sim, each warning printed once.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from teamrt.claudecode.hooks import parse_hooks
from teamrt.claudecode.settings import ClaudeSettings, load_claude_settings, read_settings_files
from teamrt.cli import main
from teamrt.tools.permissions import Permissions, Verdict

CORPUS = Path(__file__).parent.parent / "data" / "settings_corpus"
FILES = sorted(path for path in CORPUS.glob("*.json") if not path.name.endswith(".expect.json"))
READ_ONLY = frozenset({"Read", "Glob", "Grep", "LS"})


def expectation(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.with_name(path.stem + ".expect.json").read_text())
    return data


def cases() -> list[Any]:
    return [
        pytest.param(path, id=path.stem, marks=[pytest.mark.hostile] if expectation(path)["hostile"] else [])
        for path in FILES
    ]


def place(path: Path, scope: str, project: Path, user: Path) -> Path:
    """Put the corpus file where ``scope`` reads it; the project is no git repository, so its
    ``settings.local.json`` is the person's own."""
    target = {
        "user": user / "settings.json",
        "project": project / ".claude" / "settings.json",
        "local": project / ".claude" / "settings.local.json",
    }[scope]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(path.read_bytes())
    return target


@pytest.fixture
def user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "claude-home"
    home.mkdir()
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home))
    return home


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    (path / ".claude").mkdir(parents=True)
    return path


def test_the_corpus_is_as_large_as_promised() -> None:
    assert len(FILES) >= 60
    assert all(path.with_name(path.stem + ".expect.json").is_file() for path in FILES)


def assert_warnings(lines: tuple[str, ...] | list[str], expected: list[str]) -> None:
    """Each expected piece is in exactly one line, and every line is expected: each problem named once."""
    for piece in expected:
        holding = [line for line in lines if piece in line]
        assert len(holding) == 1, (piece, lines)
    unexpected = [line for line in lines if not any(piece in line for piece in expected)]
    assert not unexpected and len(lines) == len(expected), lines


def call(tool: str, input: dict[str, Any]) -> dict[str, Any]:
    path = input.get("file_path")
    if isinstance(path, str) and path.startswith("~"):
        return {**input, "file_path": os.path.expanduser(path)}
    return input


def decide(settings: ClaudeSettings, mode: str, tool: str, input: dict[str, Any], project: Path) -> Verdict:
    permissions = Permissions(mode, then=settings.rules)
    return permissions.decide(tool, call(tool, input), read_only=tool in READ_ONLY, workspace=project).verdict


@pytest.mark.parametrize("path", cases())
def test_each_file_loads_names_each_problem_once_and_its_denies_deny(
    path: Path, project: Path, user: Path
) -> None:
    expect = expectation(path)
    target = place(path, expect["scope"], project, user)
    settings = load_claude_settings(project)
    shown = str(target.relative_to(project)) if target.is_relative_to(project) else str(target)
    assert all(line.startswith(f"{shown}: ") for line in settings.warnings), settings.warnings
    assert_warnings(settings.warnings, expect["warnings"])
    for tool, input in expect["denied"]:
        assert decide(settings, "bypassPermissions", tool, input, project) is Verdict.DENY, (tool, input)
    for tool, input in expect["asked"]:
        assert decide(settings, "bypassPermissions", tool, input, project) is Verdict.ASK, (tool, input)
    for tool, input in expect["allowed"]:
        assert decide(settings, "default", tool, input, project) is Verdict.ALLOW, (tool, input)
    parse_hooks(read_settings_files(project))  # the hooks reader takes every file too (its problems: lines)


def test_every_deny_rule_of_the_corpus_is_tried() -> None:
    """Each file whose text holds a deny list names at least one call to deny (or none can be made:
    a rule for a tool teamrt lacks, a Spawn rule)."""
    for path in FILES:
        expect = expectation(path)
        text = path.read_bytes().decode("utf-8", "replace")
        if '"deny"' in text and '"deny": []' not in text and not expect["denied"]:
            assert any(
                word in text for word in ("NotebookEdit(", "Spawn(", "DangerousTool", "Bash(rm\\u0000")
            ), path


RUN_FILES = ["11-malformed-rm", "26-broken-missing-brace", "30-not-utf8", "50-env-hostile-values"]


@pytest.mark.parametrize("stem", RUN_FILES)
def test_teamrt_run_goes_on_and_says_each_problem_once(
    stem: str,
    tmp_path: Path,
    project: Path,
    user: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = CORPUS / f"{stem}.json"
    expect = expectation(path)
    place(path, expect["scope"], project, user)
    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(project)
    (project / "team.toml").write_text('[team]\nmodel = "sim"\non_ask = "deny"\n')
    assert main(["run", "--model", "sim", "--prompt", "look around"]) == 0
    err = capsys.readouterr().err
    said = [
        line.removeprefix("teamrt: warning: ")
        for line in err.splitlines()
        if line.startswith("teamrt: warning: ")
    ]
    assert_warnings([line for line in said if "settings" in line.split(": ", 1)[0]], expect["warnings"])
