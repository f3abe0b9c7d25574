"""What the sandbox makes of a confinement, without running it: bwrap's mounts and their order, the
environment, the limits, the refusal without bubblewrap, and how a run's sandbox is described."""

from __future__ import annotations

import glob
from dataclasses import replace
from pathlib import Path

import pytest

from teamrt.sandbox.bwrap import REFUSAL, SECRET_FILES, Sandbox, bwrap_options, command_env, describe
from teamrt.sandbox.confinement import Confinement
from teamrt.sandbox.policy import SandboxPolicy
from teamrt.sandbox.protect import protected_paths

ONE_ARGUMENT = {"--tmpfs", "--remount-ro", "--dev", "--proc", "--chdir", "--cap-drop", "--size", "--seccomp"}
TWO_ARGUMENTS = {"--bind", "--ro-bind", "--ro-bind-try"}
HOST_KEYS = tuple(glob.glob("/etc/ssh/ssh_host_*_key"))


def mounts(ctx: Confinement) -> list[tuple[str, str]]:
    """bwrap's options for ``ctx`` as (option, path) in order; flags as (flag, "")."""
    options = bwrap_options(ctx)
    found = []
    i = 0
    while i < len(options):
        option = options[i]
        if option in TWO_ARGUMENTS:
            blanked = options[i + 1] == "/dev/null" and options[i + 2] in (*SECRET_FILES, *HOST_KEYS)
            assert blanked or options[i + 1] == options[i + 2], "every bind is at the path it shows"
            found.append((option, options[i + 1]))
            i += 3
        elif option in ONE_ARGUMENT:
            found.append((option, options[i + 1]))
            i += 2
        else:
            found.append((option, ""))
            i += 1
    return found


def before(found: list[tuple[str, str]], first: tuple[str, str], then: tuple[str, str]) -> bool:
    return found.index(first) < found.index(then)


@pytest.fixture
def lead(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Confinement:
    """The lead of a run in ``project``, whose teamrt home is ``project/.teamrt``."""
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    (tmp_path / "user").mkdir()
    project = tmp_path / "project"
    run_dir = project / ".teamrt" / "runs" / "r1"
    (run_dir / "spill").mkdir(parents=True)
    (project / ".git").mkdir()
    protected = protected_paths((project,), home=project / ".teamrt", git_dir=project / ".git")
    return Confinement(project, run_dir, protected=protected, extra_roots=(run_dir / "spill",))


def test_root_loses_every_capability_and_the_system_is_read_only_proc_included(lead: Confinement) -> None:
    found = mounts(lead)
    assert found[:4] == [
        ("--ro-bind", "/"),
        ("--dev", "/dev"),
        ("--proc", "/proc"),
        ("--remount-ro", "/proc"),
    ]
    assert ("--cap-drop", "ALL") in found
    for flag in ("--unshare-pid", "--unshare-ipc", "--unshare-net", "--die-with-parent"):
        assert (flag, "") in found
    assert found[-1] == ("--chdir", str(lead.workspace))


def test_the_lead_sees_its_project_but_not_the_runs_and_not_the_homes(lead: Confinement) -> None:
    found = mounts(lead)
    project, home = str(lead.workspace), str(lead.workspace / ".teamrt")
    runs, spill = f"{home}/runs", f"{home}/runs/r1/spill"
    for hidden in ("/tmp", str(Path.home()), "/run"):
        assert ("--tmpfs", hidden) in found
        assert before(found, ("--tmpfs", hidden), ("--bind", project))
    assert before(found, ("--bind", project), ("--ro-bind-try", home)), "the home inside it is read-only"
    assert before(found, ("--ro-bind-try", f"{project}/.git"), ("--tmpfs", runs))
    assert before(found, ("--ro-bind-try", home), ("--tmpfs", runs)), "then its runs are hidden"
    assert before(found, ("--tmpfs", runs), ("--ro-bind-try", spill)), "and the run's spill shown again"
    assert found.index(("--remount-ro", runs)) > found.index(("--ro-bind-try", spill))


@pytest.fixture
def worktree_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Confinement:
    """A worktree agent: its checkout in teamrt's home, its metadata in the repository's .git."""
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    (tmp_path / "user").mkdir()
    project, home = tmp_path / "project", tmp_path / "home"
    run_dir = home / "runs" / "r1"
    checkout = run_dir / "worktrees" / "coder"
    admin, objects = project / ".git" / "worktrees" / "coder", run_dir / "objects" / "coder"
    for path in (checkout, admin, objects, project / ".claude"):
        path.mkdir(parents=True)
    (checkout / ".git").write_text(f"gitdir: {admin}\n")
    protected = protected_paths((checkout, project), home=home, git_dir=project / ".git")
    return Confinement(
        checkout, run_dir, readable=(project / ".git",), writable=(admin, objects), protected=protected
    )


def test_a_worktree_agent_sees_its_checkout_and_writes_only_its_metadata(worktree_agent: Confinement) -> None:
    found = mounts(worktree_agent)
    checkout, run_dir = str(worktree_agent.workspace), worktree_agent.run_dir
    git_dir = str(worktree_agent.readable[0])
    admin, objects = map(str, worktree_agent.writable)
    runs = str(run_dir.parent)
    assert before(found, ("--tmpfs", runs), ("--bind", checkout)), "its checkout is shown in the hidden runs"
    assert before(found, ("--bind", checkout), ("--ro-bind-try", f"{checkout}/.git")), (
        "its .git file read-only"
    )
    assert before(found, ("--ro-bind", git_dir), ("--bind", admin)), (
        "the repository read-only, its metadata not"
    )
    assert before(found, ("--tmpfs", runs), ("--bind", objects))
    assert ("--ro-bind-try", str(run_dir.parent.parent)) not in found, "the home holding its checkout is not"
    assert not any(path.endswith("/project/.claude") for _, path in found), "nothing hidden is shown again"


def test_the_network_and_what_the_run_may_read(lead: Confinement) -> None:
    policy = SandboxPolicy(network=True, read=("~/.pyenv", "/opt/tools"))
    found = mounts(replace(lead, policy=policy))
    assert ("--unshare-net", "") not in found
    assert ("--ro-bind-try", str(Path("/etc/resolv.conf").resolve())) in found
    pyenv = str(Path.home() / ".pyenv")
    assert before(found, ("--tmpfs", str(Path.home())), ("--ro-bind-try", pyenv))
    assert ("--ro-bind-try", "/opt/tools") in found


def test_the_environment_is_the_allowlist_the_policy_and_the_context(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "PATH": "/usr/bin", "LC_ALL": "C", "GITHUB_TOKEN": "ghp", "OPENAI_API_KEY": "sk",
        "ANTHROPIC_API_KEY": "sk-ant", "TEAMRT_DB": "postgresql://", "NPM_TOKEN": "npm",
    }.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    env = command_env(SandboxPolicy(env=("NPM_TOKEN", "ANTHROPIC_API_KEY")), {"GIT_DIR": "/x"})
    expected = {"PATH": "/usr/bin", "LC_ALL": "C", "NPM_TOKEN": "npm", "GIT_DIR": "/x"}
    assert {**expected, "PYTHONDONTWRITEBYTECODE": "1"}.items() <= env.items()
    assert not {"GITHUB_TOKEN", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TEAMRT_DB"} & env.keys()


def test_without_bwrap_commands_are_refused_unless_opted_in_and_keep_env_and_limits(
    lead: Confinement,
) -> None:
    plain = Sandbox(None)
    assert plain.refusal(SandboxPolicy()) == REFUSAL
    assert plain.refusal(SandboxPolicy(unconfined=True)) is None
    assert Sandbox("/usr/bin/bwrap").refusal(SandboxPolicy()) is None
    command = plain.command("echo hi", replace(lead, policy=SandboxPolicy(max_memory_mb=2, max_file_mb=3)))
    assert command.argv[:2] == ["/bin/bash", "-c"] and command.argv[-2:] == ["/bin/bash", "echo hi"]
    assert "ulimit -H -S -d 2048 -f 3072" in command.argv[2]
    assert not command.contained and command.max_processes == 256
    confined = Sandbox("/usr/bin/bwrap").command("echo hi", lead)
    loader = confined.argv.index("/usr/bin/bwrap")  # a shell opens the seccomp filter for bwrap first
    assert confined.argv[:2] == ["/bin/sh", "-c"] and loader == 4 and confined.contained
    assert confined.argv[confined.argv.index("--seccomp") + 1] == "3"
    assert confined.argv[confined.argv.index("--") + 1 :] == plain.command("echo hi", lead).argv


def test_a_runs_sandbox_is_described_in_one_line() -> None:
    assert describe(confined=True, unconfined=False, network=False) == (
        "confined by bubblewrap, without the network"
    )
    assert (
        describe(confined=True, unconfined=True, network=True) == "confined by bubblewrap, with the network"
    )
    assert describe(confined=False, unconfined=True, network=False).startswith("UNCONFINED")
    assert "refused" in describe(confined=False, unconfined=False, network=False)
