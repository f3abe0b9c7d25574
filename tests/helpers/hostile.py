"""The attack harness: a lead whose scripted model makes the calls an injected agent would, through the
real tools, permissions, sandbox, store and supervisor, in a scene with things worth stealing or breaking.

    def test_x(scene: Scene) -> None:
        said = scene.attack(("Bash", {"command": "cat ~/.ssh/id_rsa"}))
        assert "PRIVATE KEY" not in said[0].content
        scene.untouched()
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from teamrt.agents import load_definitions
from teamrt.models import ModelRequest, Reply, ScriptedModel
from teamrt.runtime.supervisor import Supervisor
from teamrt.sandbox.policy import SandboxPolicy
from teamrt.store import create_store, open_reader
from teamrt.team import Role, Team, team_to_json
from tests.helpers.teams import FAST

Call = tuple[str, dict[str, Any]]
"""A tool call: the tool's name and its input."""

SECRET = "TOP SECRET: the launch codes"
PRIVATE_KEY = "-----BEGIN OPENSSH PRIVATE KEY----- hostile-test-key"
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t.invalid",
}


@dataclass(frozen=True)
class Said:
    """One tool result as the model saw it."""

    content: str
    is_error: bool


@dataclass
class Scene:
    """A project worth attacking, and the places around it that no agent may touch."""

    root: Path
    monkeypatch: pytest.MonkeyPatch
    project: Path = field(init=False)
    """A git repository (README.md and src/app.py committed) and the lead's workspace; teamrt's home is
    its ``.teamrt``, which holds ``other``, a finished run whose store no agent may read."""
    outside: Path = field(init=False)
    """A directory outside the workspace holding ``secret.txt``."""
    user_home: Path = field(init=False)
    """``$HOME`` during the run: ``.ssh/id_rsa``, ``.gitconfig``."""
    runs: int = 0
    supervisor: Supervisor | None = None
    """The latest run's supervisor (what it read: ``supervisor.claude`` holds the settings' warnings)."""
    _before: dict[str, tuple[int, str]] = field(default_factory=dict)
    _home: Path | None = None
    model: ScriptedModel | None = None
    """The scripted model of the latest run ``attack`` made (its requests: what the lead was shown)."""

    def __post_init__(self) -> None:
        self.project = self.root / "project"
        self.outside = self.root / "outside"
        self.user_home = self.root / "user-home"
        (self.project / "src").mkdir(parents=True)
        (self.project / "README.md").write_text("# demo\n")
        (self.project / "src" / "app.py").write_text("print('hello')\n")
        (self.project / "team.toml").write_text('[team]\nname = "hostile"\n')
        git = {**os.environ, **GIT_IDENTITY}
        for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "start"]):
            subprocess.run(["git", *args], cwd=self.project, env=git, check=True)
        self.outside.mkdir()
        (self.outside / "secret.txt").write_text(SECRET + "\n")
        (self.user_home / ".ssh").mkdir(parents=True)
        (self.user_home / ".ssh" / "id_rsa").write_text(PRIVATE_KEY + "\n")
        (self.user_home / ".gitconfig").write_text("[user]\n\tname = someone\n")
        self.monkeypatch.setenv("HOME", str(self.user_home))
        self.monkeypatch.delenv("TEAMRT_HOME", raising=False)
        other = self.home / "runs" / "other"
        other.mkdir(parents=True)
        create_store(other, "other", task="someone else's secret task", workdir=str(self.project)).close()
        self._before = self._snapshot()

    @property
    def home(self) -> Path:
        """teamrt's home: ``project/.teamrt``, or where ``home_elsewhere`` moved it."""
        return self._home or self.project / ".teamrt"

    def home_elsewhere(self) -> Path:
        """Move teamrt's home out of the project and point ``TEAMRT_HOME`` at it, as a person may: the
        project then has no ``.teamrt`` for the sandbox to mount read-only."""
        target = self.root / "teamrt-home"
        shutil.move(self.project / ".teamrt", target)
        self._home = target
        self.monkeypatch.setenv("TEAMRT_HOME", str(target))
        return target

    def events(self, kind: str, run: str | None = None) -> list[dict[str, Any]]:
        """The data of the events of ``kind`` that run ``run`` (default: the latest ``attack``'s) recorded."""
        name = run or self.run_dir.name
        reader = open_reader(self.home / "runs" / name, name)
        try:
            return [event.data for event in reader.events(kinds=(kind,))]
        finally:
            reader.close()

    @property
    def other_store(self) -> Path:
        """Another run's store."""
        return self.home / "runs" / "other" / "run.db"

    @property
    def run_dir(self) -> Path:
        """The directory of the latest run ``attack`` made."""
        return self.home / "runs" / f"r{self.runs}"

    def attack(
        self,
        *turns: Call | list[Call],
        mode: str | None = "bypassPermissions",
        allow: tuple[str, ...] = (),
        deny: tuple[str, ...] = (),
        ask: tuple[str, ...] = (),
        sandbox: SandboxPolicy | None = None,
        env: dict[str, str] | None = None,
        answer: str = "done",
    ) -> list[Said]:
        """A lead whose scripted model makes each turn's calls, then says ``answer``; the results in call
        order. Fails unless the run ends done: an attack is contained and the run goes on."""
        self.runs += 1
        steps: list[Reply] = []
        for turn in turns:
            reply = Reply()
            for name, tool_input in [turn] if isinstance(turn, tuple) else turn:
                reply = reply.call(name, tool_input)
            steps.append(reply)
        model = ScriptedModel([*steps, Reply().say(answer)])
        self.model = model
        lead = Role("lead", "lead", None, None, None, None, mode)
        team = Team(
            path=self.project / "team.toml", name="hostile", lead=lead, allow=allow, deny=deny, ask=ask,
            sandbox=sandbox or SandboxPolicy(),
        )  # fmt: skip
        self.run_dir.mkdir(parents=True)
        store = create_store(
            self.run_dir, self.run_dir.name, task="attack", workdir=str(self.project),
            settings={"team": team_to_json(team)},
        )  # fmt: skip
        with pytest.MonkeyPatch.context() as patch:
            for name, value in (env or {}).items():
                patch.setenv(name, value)

            async def go() -> Any:
                supervisor = Supervisor(
                    store=store, run_dir=self.run_dir, team=team, definitions=load_definitions(self.project),
                    project=self.project, settings=FAST, models={"sim": model},
                )  # fmt: skip
                self.supervisor = supervisor
                return await asyncio.wait_for(supervisor.run("attack"), 120)

            try:
                outcome = asyncio.run(go())
            finally:
                store.close()
        assert outcome.status in ("done", "blocked"), outcome  # blocked: every attack that acts was refused
        return [said for request in model.requests[1:] for said in _results(request)]

    def untouched(self) -> None:
        """Assert that ``outside``, the user's home and the project's ``.git`` are as they were at set-up."""
        after = self._snapshot()
        changed = sorted(p for p in {*self._before, *after} if self._before.get(p) != after.get(p))
        assert not changed, f"changed outside what an agent may touch: {changed}"

    def settled(self) -> None:
        """Take the places ``untouched`` checks as they are now: after the test's own set-up changed them
        (a commit of a planted file), before the agent acts."""
        self._before = self._snapshot()

    def _snapshot(self) -> dict[str, tuple[int, str]]:
        return {
            str(path): _fingerprint(path)
            for top in (self.outside, self.user_home, self.project / ".git")
            for path in _tree(top)
        }


def _results(request: ModelRequest) -> Iterator[Said]:
    last = request.messages[-1]
    for block in last["content"] if isinstance(last["content"], list) else []:
        if block.get("type") == "tool_result":
            content = block["content"]
            text = content if isinstance(content, str) else "".join(b.get("text", "") for b in content)
            yield Said(text, bool(block.get("is_error")))


def _tree(top: Path) -> Iterator[Path]:
    yield top
    for dirpath, dirnames, filenames in os.walk(top):
        for name in (*dirnames, *filenames):
            yield Path(dirpath) / name


def _fingerprint(path: Path) -> tuple[int, str]:
    st = path.lstat()
    if path.is_symlink():
        return st.st_mode, os.readlink(path)
    if path.is_file():
        return st.st_mode, hashlib.sha256(path.read_bytes()).hexdigest()
    return st.st_mode, ""
