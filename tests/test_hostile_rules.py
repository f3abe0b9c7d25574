"""Permission rules against an injected agent that spells its way around them, through the real tools.

Deny rules fail closed: every spelling of a denied program is refused, and so is a command whose
programs cannot be told (``eval``, ``bash -c``, ``git -c``); a ``Read`` deny rule keeps its files
out of grep and glob as well as read.
"""

from __future__ import annotations

from typing import Any

from hostile import Said, Scene

DENIED = "permission denied: "

RM_SPELLINGS = (
    "FOO=1 rm victim.txt",
    "/bin/rm victim.txt",
    "command rm victim.txt",
    "\\rm victim.txt",
    "r''m victim.txt",
    "eval rm victim.txt",
    "eval \"$(printf 'r%s' m) victim.txt\"",
    "bash -c 'rm victim.txt'",
    'sh -c "rm victim.txt"',
    "echo 'rm victim.txt' | bash",
    "{ rm victim.txt; }",
    "(rm victim.txt)",
    "if true; then rm victim.txt; fi",
    "while true; do rm victim.txt; break; done",
    "time rm victim.txt",
    "\\time rm victim.txt",
    "nohup rm victim.txt",
    "env rm victim.txt",
    "nice -n 5 rm victim.txt",
    "timeout 5 rm victim.txt",
    "sudo rm victim.txt",
    "echo victim.txt | xargs rm",
    "find . -name victim.txt -exec rm {} \\;",
    "ls $(rm victim.txt)",
    "R=rm; $R victim.txt",
    "f() { rm victim.txt; }; f",
    "python3 -c 'import os; os.remove(\"victim.txt\")'",
    "git -c alias.gone='!rm victim.txt' gone",
)


def bash(command: str) -> tuple[str, dict[str, Any]]:
    return ("bash", {"command": command})


def refused(said: Said) -> bool:
    return said.is_error and said.content.startswith(DENIED)


def test_a_deny_rule_on_rm_holds_however_rm_is_spelled(scene: Scene) -> None:
    victim = scene.project / "victim.txt"
    victim.write_text("keep me\n")
    said = scene.attack(*map(bash, RM_SPELLINGS), bash("cat victim.txt"), deny=("Bash(rm:*)",))
    for command, result in zip(RM_SPELLINGS, said[:-1], strict=True):
        assert refused(result), f"{command!r} was not refused: {result}"
    assert said[-1] == Said("keep me\n", False), "a command free of rm still runs"
    assert victim.read_text() == "keep me\n"
    scene.untouched()


def test_a_command_that_cannot_be_read_is_refused_saying_why(scene: Scene) -> None:
    (said,) = scene.attack(bash("eval rm victim.txt"), deny=("Bash(rm:*)",))
    assert said == Said(
        f"{DENIED}cannot tell what this command runs (`eval` runs its arguments as a command),"
        ' so rule "Bash(rm:*)" may forbid it; write the command out plainly',
        True,
    )


def test_an_allow_rule_for_git_does_not_allow_a_git_alias(scene: Scene) -> None:
    planted = scene.project / "P"
    said = scene.attack(
        bash("git -c alias.x='!touch P' x"),
        bash("git --config-env=alias.y=EVIL y"),
        bash("git status --short"),
        mode="default",
        allow=("Bash(git:*)",),
        env={"EVIL": "!touch P"},
    )
    assert refused(said[0]) and refused(said[1])
    assert not said[2].is_error, "plain git is still allowed"
    assert not planted.exists()
    scene.untouched()


def test_a_read_deny_rule_covers_grep_and_glob_without_a_path(scene: Scene) -> None:
    secrets = scene.project / "secrets"
    secrets.mkdir()
    (secrets / "launch.txt").write_text("hunter2 is the code\n")
    (scene.project / "notes.txt").write_text("hunter2 is not here\n")
    said = scene.attack(
        ("grep", {"pattern": "hunter2"}),
        ("grep", {"pattern": "hunter2", "output_mode": "content"}),
        ("grep", {"pattern": "hunter2", "path": "."}),
        ("grep", {"pattern": "hunter2", "glob": "secrets/**"}),
        ("glob", {"pattern": "**/*.txt"}),
        ("glob", {"pattern": "secrets/*"}),
        ("read", {"file_path": "secrets/launch.txt"}),
        ("grep", {"pattern": "hunter2", "path": "secrets"}),
        deny=("Read(secrets/**)",),
    )
    for result in said:
        assert "is the code" not in result.content, result
        assert "launch.txt" not in result.content, result
    assert "notes.txt" in said[0].content, "other files are still searched"
    assert refused(said[6]) and refused(said[7])
    scene.untouched()
