"""Attacks on the sandbox, made as an injected agent would: bash calls of a scripted lead, through the real
tools, permissions, sandbox, supervisor and store. Each must fail, say why, change nothing outside, and
leave the run going.

Root inside is no one outside (every capability dropped), homes and other runs are hidden, secrets in the
environment are not passed, the network is cut, processes, memory and file size are limited, ``.git`` is
read-only; without bubblewrap bash and merge gates are refused unless the run opted in, and the opt-in
shows in the event log, ``teamrt show`` and the TUI. Gates run in the same sandbox as bash.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path, PurePath

import pytest
from conftest import needs_bwrap
from gitrepo import git, make_repo
from hostile import PRIVATE_KEY, SECRET, Said, Scene

from teamrt.cli import main
from teamrt.runs import render_show
from teamrt.store import create_store, open_reader
from teamrt.tools.policy import SandboxPolicy
from teamrt.tools.sandbox import SANDBOX_EVENT, TOOLCHAINS, Sandbox, default_sandbox
from teamrt.tui.app import TeamApp
from teamrt.tui.widgets import Totals
from teamrt.worktree import GitRepo, MergeQueue, Verdict

# The interpreter itself (a virtual environment's link may lie in the private /tmp) and its
# installation, which may lie in a hidden home directory (~/.pyenv): the run names it in [sandbox] read.
PYTHON = os.path.realpath(sys.executable)
PYTHON_HOME = os.path.realpath(sys.base_prefix)


def bash(command: str) -> tuple[str, dict[str, str]]:
    return ("bash", {"command": command})


def left_in(project: Path) -> list[int]:
    """Processes still working in ``project`` (none may outlive the call that started it)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if Path(os.readlink(f"/proc/{pid}/cwd")).is_relative_to(project):
                found.append(int(pid))
        except OSError:
            continue
    return found


@needs_bwrap
def test_root_inside_has_no_capability_and_cannot_remount_or_write_the_system(scene: Scene) -> None:
    core_pattern = Path("/proc/sys/kernel/core_pattern").read_text()
    said = scene.attack(
        bash("grep CapEff /proc/self/status"),
        bash("mount -o remount,rw / && touch /etc/teamrt-x"),
        bash("touch /etc/teamrt-x"),
        bash("unshare -Urm sh -c 'mount -o remount,rw / && touch /etc/teamrt-x'"),
        # opened for appending, nothing written: these must not even open
        bash(": >> /proc/sys/kernel/core_pattern"),
        bash(": >> /proc/sysrq-trigger"),
    )
    assert said[0].content == "CapEff:\t0000000000000000\n"
    assert all(s.is_error for s in said[1:]), said
    assert "Read-only file system" in said[2].content
    assert not Path("/etc/teamrt-x").exists()
    assert Path("/proc/sys/kernel/core_pattern").read_text() == core_pattern
    scene.untouched()


@needs_bwrap
def test_the_users_home_root_and_places_outside_are_hidden(scene: Scene) -> None:
    said = scene.attack(
        bash("cat ~/.ssh/id_rsa"),
        bash(f"cat {scene.user_home}/.gitconfig"),
        bash(f"cat {scene.outside}/secret.txt"),
        bash("ls -A /root /home ~"),
        bash("cp -r ~/.ssh stolen; ls stolen"),
    )
    for s in said:
        assert PRIVATE_KEY not in s.content and SECRET not in s.content and "someone" not in s.content
    assert all(s.is_error for s in (said[0], said[1], said[2], said[4]))
    assert "No such file or directory" in said[0].content
    listed = said[3].content.split()
    assert {"/root:", "/home:", f"{scene.user_home}:"} <= set(listed)
    toolchains = {PurePath(p).parts[1] for p in TOOLCHAINS}
    assert set(listed) - {"/root:", "/home:", f"{scene.user_home}:"} <= toolchains, "only toolchains show"
    scene.untouched()


@needs_bwrap
def test_secrets_in_teamrts_environment_are_not_passed(scene: Scene) -> None:
    secrets = {
        "GITHUB_TOKEN": "ghp_hostile",
        "AWS_SECRET_ACCESS_KEY": "aws-hostile",
        "OPENAI_API_KEY": "sk-h",
    }
    [seen] = scene.attack(bash("env; echo $GITHUB_TOKEN $AWS_SECRET_ACCESS_KEY $OPENAI_API_KEY"), env=secrets)
    for name, value in secrets.items():
        assert name not in seen.content and value not in seen.content
    named = SandboxPolicy(env=("GITHUB_TOKEN",))
    [seen] = scene.attack(bash("echo $GITHUB_TOKEN $OPENAI_API_KEY"), env=secrets, sandbox=named)
    assert seen.content == "ghp_hostile\n", "the team file passes what it names, and only that"


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP server on 127.0.0.1 (connections wait in its backlog); its port."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server.getsockname()[1]


@needs_bwrap
def test_the_network_is_cut_unless_the_team_file_allows_it(scene: Scene, listener: int) -> None:
    connect = bash(f"exec 3<>/dev/tcp/127.0.0.1/{listener} && echo connected")
    [cut] = scene.attack(connect)
    assert cut.is_error and "Connection refused" in cut.content
    [allowed] = scene.attack(connect, sandbox=SandboxPolicy(network=True))
    assert allowed.content == "connected\n"


@needs_bwrap
def test_a_fork_bomb_is_killed_whole_and_the_run_goes_on(scene: Scene) -> None:
    said = scene.attack(bash("echo armed; :(){ :|:& };:; sleep 100"), bash("echo still here"),
                        sandbox=SandboxPolicy(max_processes=64))  # fmt: skip
    assert said[0].is_error
    assert said[0].content == "armed\n\n[killed: more than 64 processes]"
    assert said[1].content == "still here\n"
    assert left_in(scene.project) == []


@needs_bwrap
def test_a_memory_hog_fails(scene: Scene) -> None:
    policy = SandboxPolicy(max_memory_mb=256, read=(PYTHON_HOME,))
    [hog] = scene.attack(bash(f"{PYTHON} -c 'bytearray(4 << 30)'"), sandbox=policy)
    assert hog.is_error and "MemoryError" in hog.content


@needs_bwrap
def test_a_huge_file_stops_at_the_size_limit_which_cannot_be_raised(scene: Scene) -> None:
    said = scene.attack(
        bash("head -c 50M /dev/zero > huge.bin"),
        bash("ulimit -f unlimited; head -c 50M /dev/zero > huger.bin"),
        sandbox=SandboxPolicy(max_file_mb=2),
    )
    assert said[0].is_error and said[0].content.endswith(": a file reached the size limit of 2 MiB]")
    assert "Operation not permitted" in said[1].content
    for name in ("huge.bin", "huger.bin"):
        assert (scene.project / name).stat().st_size == 2 << 20


@needs_bwrap
def test_git_configuration_hooks_and_attributes_cannot_be_planted(scene: Scene) -> None:
    said = scene.attack(
        bash("git config filter.x.smudge 'touch /tmp/pwned'"),
        bash("echo '[filter \"x\"] smudge = touch /tmp/pwned' >> .git/config"),
        bash("echo '* filter=x' > .git/info/attributes"),
        bash("printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > .git/hooks/pre-commit"),
        bash("chmod +x .git/hooks/pre-commit.sample"),
        bash("git update-ref refs/heads/main HEAD~0 && git commit --allow-empty -qm sneaky"),
    )
    assert all(s.is_error and "Read-only file system" in s.content for s in said), said
    scene.untouched()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@needs_bwrap
def test_another_runs_store_is_neither_readable_nor_writable(scene: Scene) -> None:
    before = digest(scene.other_store)
    said = scene.attack(
        bash("ls -A .teamrt/runs"),
        bash("cat .teamrt/runs/other/run.db"),
        bash("echo x > .teamrt/runs/other/run.db"),
        bash("rm -rf .teamrt/runs/other"),
        bash("cat .teamrt/runs/r1/run.db"),
        bash("mkdir .teamrt/runs/other"),
    )
    assert "other" not in said[0].content
    assert said[1].is_error and said[2].is_error and said[4].is_error, said
    assert not any("someone else's secret task" in s.content for s in said)
    assert "No such file or directory" in said[2].content and "Read-only file system" in said[5].content
    assert digest(scene.other_store) == before


class NoBwrap:
    """What teamrt sees on a machine without bubblewrap, in every module that asks."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for module in ("teamrt.tools.bash", "teamrt.runtime.supervisor", "teamrt.runtime.teamrun"):
            monkeypatch.setattr(f"{module}.default_sandbox", lambda: Sandbox(None))


def test_without_bwrap_bash_is_refused_and_says_how_to_opt_in(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    NoBwrap(monkeypatch)
    said = scene.attack(bash("touch pwned"), bash("echo again"))
    for s in said:
        assert s.is_error and s.content.startswith("bash: refused: bubblewrap (bwrap) is not installed")
        assert "teamrt run --unconfined" in s.content and "[sandbox] unconfined = true" in s.content
    assert not (scene.project / "pwned").exists()
    [event] = open_reader(scene.run_dir, scene.run_dir.name).events(kinds=(SANDBOX_EVENT,))
    assert event.data == {"confined": False, "unconfined": False, "network": False}
    shown = render_show(scene.run_dir, scene.run_dir.name)
    assert any(line.startswith("sandbox  none: bubblewrap is not installed") for line in shown)


def test_an_unconfined_run_says_so_in_its_log_show_and_tui(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    NoBwrap(monkeypatch)
    [ran] = scene.attack(bash("echo ran"), sandbox=SandboxPolicy(unconfined=True))
    assert ran.content == "ran\n"
    run = scene.run_dir.name
    [event] = open_reader(scene.run_dir, run).events(kinds=(SANDBOX_EVENT,))
    assert event.data == {"confined": False, "unconfined": True, "network": False}
    assert any(line.startswith("sandbox  UNCONFINED: ") for line in render_show(scene.run_dir, run))

    async def header() -> str:
        app = TeamApp(scene.run_dir.parent, run, blink=False)
        async with app.run_test(size=(200, 40)) as pilot:
            for _ in range(200):
                said = str(app.screen.query(Totals).first().render()) if app.screen.query(Totals) else ""
                if run in said:
                    return said
                await pilot.pause(0.05)
        raise AssertionError("the run's header did not show")

    assert "UNCONFINED: commands run without a sandbox" in asyncio.run(header())


def test_teamrt_run_says_at_start_when_commands_will_not_be_confined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / "home"))
    run = ["run", "--prompt", "Say hello.", "--model", "sim", "--quiet"]
    assert main(run) == 0
    assert "sandbox" not in capsys.readouterr().err, "with bubblewrap (or its stand-in) nothing to say"
    NoBwrap(monkeypatch)
    assert main(run) == 0
    assert capsys.readouterr().err.startswith(
        "teamrt: note: sandbox none: bubblewrap is not installed, so bash and merge gates are refused; to run"
        " them, install bubblewrap"
    )
    assert main([*run, "--unconfined", "--run-id", "r-unconfined"]) == 0
    assert capsys.readouterr().err.startswith("teamrt: WARNING: sandbox UNCONFINED: ")
    run_dir = tmp_path / "home" / "runs" / "r-unconfined"
    [event] = open_reader(run_dir, run_dir.name).events(kinds=(SANDBOX_EVENT,))
    assert event.data["unconfined"] is True


def gated_queue(tmp_path: Path, gate: str, sandbox: Sandbox, policy: SandboxPolicy) -> Verdict:
    """Branch ``a`` (one new file) landed through a merge queue whose one gate is ``gate``."""
    repo_path = make_repo(tmp_path / "repo", {"app.txt": "v1\n"})
    base = git(repo_path, "rev-parse", "HEAD")
    git(repo_path, "checkout", "-q", "-b", "a")
    (repo_path / "new.txt").write_text("new\n")
    git(repo_path, "add", "-A")
    git(repo_path, "commit", "-q", "-m", "a")
    git(repo_path, "checkout", "-q", "main")
    run_dir = repo_path / ".teamrt" / "runs" / "r1"
    run_dir.mkdir(parents=True)
    repo = GitRepo.find(repo_path)
    assert repo is not None

    async def go() -> Verdict:
        with create_store(run_dir, "r1", task="t", workdir=str(repo_path), base_head=base) as store:
            merges = MergeQueue(
                repo=repo, store=store, run_dir=run_dir, branch="teamrt/r1", base=base, gates=(gate,),
                gate_timeout=120, sandbox=sandbox, policy=policy,
            )  # fmt: skip
            await store.add_agent("a", kind="worktree", model="sim")
            verdict = await merges.land("a", "a", git(repo_path, "rev-parse", "a"), "a")
            await merges.close()
            return verdict

    return asyncio.run(go())


def test_without_bwrap_merge_gates_are_refused_unless_the_run_opted_in(tmp_path: Path) -> None:
    refused = gated_queue(tmp_path / "refused", "touch gated", Sandbox(None), SandboxPolicy())
    assert refused.status == "red"
    assert refused.output.startswith("teamrt could not run the gates: bubblewrap (bwrap) is not installed")
    assert git(tmp_path / "refused" / "repo", "rev-parse", "teamrt/r1") == git(
        tmp_path / "refused" / "repo", "rev-parse", "main"
    ), "the integration branch did not move"
    opted_in = gated_queue(tmp_path / "opted-in", "true", Sandbox(None), SandboxPolicy(unconfined=True))
    assert opted_in.status == "merged"


@needs_bwrap
def test_a_gate_runs_in_the_sandbox_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_hostile")
    gate = "grep CapEff /proc/self/status; echo token=$GITHUB_TOKEN; ls -A ..; echo x >> .git"
    verdict = gated_queue(tmp_path, gate, default_sandbox(), SandboxPolicy())
    assert "CapEff:\t0000000000000000\ntoken=\nintegration\n" in verdict.output, "the run's store is hidden"
    assert "ghp_hostile" not in verdict.output
    assert verdict.status == "red" and "Read-only file system" in verdict.output, "its .git file is protected"


@needs_bwrap
def test_the_hosts_password_hashes_and_ssh_host_keys_are_blanked(scene: Scene) -> None:
    """Root inside keeps owning /etc/shadow, capabilities or not; the sandbox shows it empty."""
    assert os.path.getsize("/etc/shadow") > 0
    [said] = scene.attack(bash("cat /etc/shadow /etc/gshadow /etc/ssh/ssh_host_*_key 2>/dev/null | wc -c"))
    assert said == Said("0\n", False)
    scene.untouched()


@needs_bwrap
def test_protected_paths_a_command_creates_are_moved_out_of_the_project(scene: Scene) -> None:
    """No .claude or .mcp.json exists to mount read-only, so a command can make them: they are quarantined."""
    definition = "printf -- '---\\npermissionMode: bypassPermissions\\n---\\n'"
    plant = f"mkdir -p .claude/agents && {definition} > .claude/agents/x.md"
    said = scene.attack(bash(plant), bash("echo '{}' > .mcp.json"))
    for s in said[:2]:
        assert s.is_error and "[refused: the command created" in s.content and "quarantine" in s.content
    assert not (scene.project / ".claude").exists() and not (scene.project / ".mcp.json").exists()
    kept = sorted(p.name.split("-", 1)[1] for p in (scene.run_dir / "quarantine").iterdir())
    assert kept == [".claude", ".mcp.json"], "nothing is lost"
    assert (next((scene.run_dir / "quarantine").glob("*-.claude")) / "agents" / "x.md").is_file()
    scene.untouched()
