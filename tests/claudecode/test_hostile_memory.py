"""Memory that agents left behind (issue 32, escapes 10 and 11): a CLAUDE.md, an import or a symlink an
agent planted must never put teamrt's home, another run, ``.git`` or anything outside the project into the
system prompt of the next run, and loading must never raise, even while a shell swaps links under it.

Each attack plants what an agent could leave in the project, then runs a lead through the real supervisor
(``tests/helpers/hostile.py``) and reads the system prompt its scripted model received.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from teamrt.claudecode.memory import MAX_DEPTH, MAX_FILE_BYTES, MAX_IMPORTS, MAX_WARNINGS, load_memory
from teamrt.models import ScriptedModel
from tests.helpers import hostile
from tests.helpers.hostile import PRIVATE_KEY, SECRET, Scene
from tests.helpers.machine import needs_bwrap
from tests.helpers.waiting import within

pytestmark = pytest.mark.hostile

OTHER_RUN = "another run's output: the customer database password is hunter2"
IN_GIT = "Unnamed repository; edit this file"
"""The start of what git init writes in ``.git/description``."""
BENIGN = "Benign rule: keep the tests green."
"""The person's own AGENTS.md: it must still reach the prompt whatever else is refused."""


@pytest.fixture
def models(monkeypatch: pytest.MonkeyPatch) -> list[ScriptedModel]:
    """Every scripted model the scene makes, to read the requests it received."""
    made: list[ScriptedModel] = []

    class Recording(ScriptedModel):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            made.append(self)

    monkeypatch.setattr(hostile, "ScriptedModel", Recording)
    return made


@pytest.fixture
def planted(scene: Scene) -> Scene:
    """The scene with another run's output and the person's benign AGENTS.md."""
    (scene.home / "runs" / "other" / "output.md").write_text(OTHER_RUN + "\n")
    assert (scene.project / ".git" / "description").read_text().startswith(IN_GIT)
    (scene.project / "AGENTS.md").write_text(BENIGN + "\n")
    return scene


def system_prompt(scene: Scene, models: list[ScriptedModel], *calls: hostile.Call) -> str:
    """Run a lead (its calls, then done) and return the system prompt of its first request; a hang fails."""
    before = len(models)
    within(120, lambda: scene.attack(*calls))
    system = models[before].requests[0].system
    assert isinstance(system, str)
    return system


def claude_md(scene: Scene, text: str) -> None:
    (scene.project / "CLAUDE.md").write_text(text)


def link(scene: Scene, name: str, target: str | Path) -> None:
    (scene.project / name).symlink_to(target)


# -- what an agent could leave behind -------------------------------------------------------------------

_ENVIRON = Path("/proc/self/environ")
ENVIRON = max(_ENVIRON.read_bytes().split(b"\0"), key=len).decode() if _ENVIRON.exists() else "PATH=/"
"""The longest entry of this process's environment as /proc shows it."""


@dataclass(frozen=True)
class Attack:
    """What an agent leaves in the project, the text that must not reach the prompt, and what the warning
    says. In ``claude_md`` and link targets, ``{home}``, ``{outside}`` and ``{user_home}`` are the scene's."""

    warning: str
    claude_md: str = ""
    links: tuple[tuple[str, str], ...] = ()
    """Name in the project, target."""
    files: tuple[tuple[str, str], ...] = ()
    """Name in the project, text."""
    setup: Callable[[Scene], None] | None = None
    secret: str = OTHER_RUN

    def plant(self, scene: Scene) -> None:
        places = {"home": scene.home, "outside": scene.outside, "user_home": scene.user_home}
        for name, text in self.files:
            write(scene.project / name, text)
        for name, target in self.links:
            path = scene.project / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.symlink_to(target.format(**places))
        if self.setup is not None:
            self.setup(scene)
        if self.claude_md:
            write(scene.project / "CLAUDE.md", self.claude_md.format(**places))


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def deep_chain(scene: Scene) -> None:
    write(scene.project / "CLAUDE.md", "level 0 @l1.md")
    for level in range(1, 10):
        write(scene.project / f"l{level}.md", f"level {level} @l{level + 1}.md")
    write(scene.project / f"l{MAX_DEPTH + 1}.md", f"{SECRET} @l{MAX_DEPTH + 2}.md")


def sparse_gigabyte(scene: Scene) -> None:
    with open(scene.project / "big.md", "wb") as out:
        out.truncate(1 << 30)
        out.seek((1 << 30) - 4096)
        out.write(SECRET.encode())


def fifo(scene: Scene) -> None:
    os.mkfifo(scene.project / "pipe.md")


def device(scene: Scene) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root (CAP_MKNOD)")
    os.mknod(scene.project / "zero.md", stat.S_IFCHR | 0o644, os.makedev(1, 5))  # /dev/zero's numbers


def many_imports(scene: Scene) -> None:
    write(scene.project / "CLAUDE.md", "@../outside/secret.txt " * (MAX_IMPORTS + 50))


def lone_surrogate(scene: Scene) -> None:
    text = b"@../outside/secret.txt \xed\xa0\x80 @.teamrt/runs/other/output.md"  # U+D800 as UTF-8 would be
    (scene.project / "CLAUDE.md").write_bytes(text)


def home_named_otherwise(scene: Scene) -> None:
    write(scene.project / "state" / "runs" / "other" / "output.md", OTHER_RUN)
    scene.monkeypatch.setenv("TEAMRT_HOME", str(scene.project / "state"))


HOME = "is in teamrt's home"
OUT = "is outside the project"
ATTACKS: dict[str, Attack] = {
    # teamrt's home, another run, .git: inside the project, yet never memory
    "import-home-relative": Attack(HOME, "@.teamrt/runs/other/output.md"),
    "import-home-absolute": Attack(HOME, "@{home}/runs/other/output.md"),
    "import-home-dotted": Attack(HOME, "@src/../.teamrt/./runs/other/output.md"),
    "import-home-through-alias": Attack(HOME, "@state/runs/other/output.md", links=(("state", ".teamrt"),)),
    "import-other-store": Attack(HOME, "@.teamrt/runs/other/run.db", secret="someone else's secret task"),
    "import-home-named-otherwise": Attack(HOME, "@state/runs/other/output.md", setup=home_named_otherwise),
    "nested-import-into-home": Attack(
        HOME, "@docs/notes.md", files=(("docs/notes.md", "@../.teamrt/runs/other/output.md"),)
    ),
    "import-git-internals": Attack("is inside .git", "@.git/description", secret=IN_GIT),
    "link-file-to-home": Attack(HOME, "@notes.md", links=(("notes.md", ".teamrt/runs/other/output.md"),)),
    "link-file-to-home-absolute": Attack(
        HOME, "@notes.md", links=(("notes.md", "{home}/runs/other/output.md"),)
    ),
    "link-dir-to-other-run": Attack(HOME, "@docs/output.md", links=(("docs", ".teamrt/runs/other"),)),
    "link-dir-to-runs": Attack(HOME, "@docs/other/output.md", links=(("docs", "../project/.teamrt/runs"),)),
    "link-file-to-git": Attack(
        "is inside .git", "@notes.md", links=(("notes.md", ".git/description"),), secret=IN_GIT
    ),
    "memory-file-is-a-link-to-home": Attack(
        HOME, links=(("CLAUDE.local.md", ".teamrt/runs/other/output.md"),)
    ),
    # outside the project
    "import-climbing-out": Attack(OUT, "@../outside/secret.txt", secret=SECRET),
    "import-climbing-out-dotted": Attack(OUT, "@src/../../outside/secret.txt", secret=SECRET),
    "import-absolute-outside": Attack(OUT, "@{outside}/secret.txt", secret=SECRET),
    "import-users-key": Attack(OUT, "@~/.ssh/id_rsa", secret=PRIVATE_KEY),
    "import-proc-environ": Attack(OUT, "@/proc/self/environ", secret=ENVIRON),
    "link-file-outside": Attack(
        OUT, "@notes.md", links=(("notes.md", "{outside}/secret.txt"),), secret=SECRET
    ),
    "link-chain-outside": Attack(
        OUT, "@one.md", links=(("one.md", "two.md"), ("two.md", "../outside/secret.txt")), secret=SECRET
    ),
    "link-dir-outside": Attack(OUT, "@docs/secret.txt", links=(("docs", "{outside}"),), secret=SECRET),
    "link-to-users-key": Attack(
        OUT, "@key.md", links=(("key.md", "{user_home}/.ssh/id_rsa"),), secret=PRIVATE_KEY
    ),
    "link-to-proc-environ": Attack(OUT, "@env.md", links=(("env.md", "/proc/self/environ"),), secret=ENVIRON),
    "memory-file-is-a-link-outside": Attack(
        "left out: a link to", links=(("CLAUDE.md", "{outside}/secret.txt"),), secret=SECRET
    ),
    "claude-dir-is-a-link-outside": Attack(
        "left out: a link to",
        links=((".claude", "{outside}"),),
        setup=lambda s: write(s.outside / "CLAUDE.md", SECRET),
        secret=SECRET,
    ),
    # what is no memory, or too much of it
    "long-link-chain": Attack(
        "has a symlink loop",
        "@l0.md",
        links=(*((f"l{n}.md", f"l{n + 1}.md") for n in range(45)), ("l45.md", "{outside}/secret.txt")),
        secret=SECRET,
    ),
    "symlink-loop": Attack("has a symlink loop", "@a.md", links=(("a.md", "b.md"), ("b.md", "a.md"))),
    "fifo": Attack("left out: not a regular file", "@pipe.md", setup=fifo),
    "device": Attack("left out: not a regular file", "@zero.md", setup=device, secret="\0" * 64),
    "sparse-gigabyte": Attack(
        f"cut to its first {MAX_FILE_BYTES // 1024} KiB", "@big.md", setup=sparse_gigabyte, secret=SECRET
    ),
    "deep-chain": Attack(f"imports nest {MAX_DEPTH} levels at most", setup=deep_chain, secret=SECRET),
    "many-imports": Attack(f"{MAX_IMPORTS} at most", setup=many_imports, secret=SECRET),
    "nul-in-import": Attack(
        "holds a NUL byte", "@../outside/secret.txt\0 @.teamrt/runs/other/output.md\0x", secret=SECRET
    ),
    "lone-surrogate": Attack("not UTF-8 text", setup=lone_surrogate, secret=SECRET),
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_nothing_planted_reaches_the_next_runs_system_prompt(
    name: str, planted: Scene, models: list[ScriptedModel]
) -> None:
    attack = ATTACKS[name]
    attack.plant(planted)
    system = system_prompt(planted, models)
    assert attack.secret not in system
    assert OTHER_RUN not in system and SECRET not in system and IN_GIT not in system
    assert BENIGN in system, "the person's own memory still reaches the prompt"
    warnings = within(60, lambda: load_memory(planted.project)).warnings
    assert any(attack.warning in warning for warning in warnings), warnings
    assert len(warnings) <= MAX_WARNINGS + 2


def test_a_flood_of_refused_imports_is_said_in_bounded_lines(planted: Scene) -> None:
    write(planted.project / "CLAUDE.md", "@../outside/secret.txt @.teamrt/runs/other/output.md " * 1000)
    memory = within(60, lambda: load_memory(planted.project))
    assert len(memory.warnings) == MAX_WARNINGS + 2
    assert memory.warnings[-2] == f"memory: {MAX_IMPORTS - MAX_WARNINGS} more warnings left unsaid"
    assert memory.warnings[-1].endswith(f"and those after it left out: {MAX_IMPORTS} at most")
    assert SECRET not in memory.text and OTHER_RUN not in memory.text and BENIGN in memory.text


@needs_bwrap
def test_links_an_agents_shell_plants_lead_nowhere_in_the_next_run(
    planted: Scene, models: list[ScriptedModel]
) -> None:
    claude_md(planted, "@notes.md @docs/output.md @key.md")
    command = (
        "ln -s .teamrt/runs/other/output.md notes.md && ln -s .teamrt/runs/other docs"
        f" && ln -s {planted.user_home}/.ssh/id_rsa key.md && ls -l notes.md docs key.md"
    )
    system_prompt(planted, models, ("Bash", {"command": command}))
    second = system_prompt(planted, models)
    assert OTHER_RUN not in second and PRIVATE_KEY not in second and BENIGN in second
    planted.untouched()


def test_the_users_own_file_imports_only_beneath_their_claude_folder(
    planted: Scene, models: list[ScriptedModel]
) -> None:
    claude = planted.user_home / ".claude"
    (claude / "rules").mkdir(parents=True)
    (claude / "rules" / "style.md").write_text("User style: short functions.")
    (claude / "CLAUDE.md").write_text(
        f"@rules/style.md @~/.ssh/id_rsa @{planted.home}/runs/other/output.md @../.ssh/id_rsa"
    )
    planted.monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude))
    system = system_prompt(planted, models)
    assert "User style: short functions." in system and BENIGN in system
    assert PRIVATE_KEY not in system and OTHER_RUN not in system
    warnings = load_memory(planted.project).warnings
    assert len(warnings) == 3 and all(f"is outside {claude}" in w for w in warnings), warnings


def test_cycles_and_diamonds_read_each_file_once(planted: Scene, models: list[ScriptedModel]) -> None:
    claude_md(planted, "root @a.md @b.md @CLAUDE.md")
    (planted.project / "a.md").write_text("file a @b.md @c.md @a.md")
    (planted.project / "b.md").write_text("file b @a.md @c.md")
    (planted.project / "c.md").write_text("file c @CLAUDE.md @a.md @b.md")
    link(planted, "alias.md", "c.md")
    (planted.project / "AGENTS.md").write_text(f"{BENIGN} @alias.md @c.md")
    system = system_prompt(planted, models)
    for text in ("root @a.md", "file a", "file b", "file c", BENIGN):
        assert system.count(text) == 1, text
    assert load_memory(planted.project).warnings == ()


def test_loading_never_raises_when_the_current_directory_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TEAMRT_HOME", raising=False)  # so teamrt's home is found from the current directory
    project = race_project(tmp_path)
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    memory = load_memory(project)
    assert [f.text for f in memory.files][1:] == ["inner notes", "plain note", "local notes"]
    [warning] = load_memory(Path("relative")).warnings
    assert warning.startswith("relative: memory left out: ")


def test_a_warning_quoting_the_repository_carries_no_escape_sequence(planted: Scene) -> None:
    names = ("\x1b]52;c;ZWNobyBoaQ==\x07.md", "\x1b[2J\x1b[31mred.md", "\x9b2Jc1.md")
    targets: tuple[str | Path, ...] = (
        planted.outside / "secret.txt",
        ".teamrt/runs/other/output.md",
        ".git/description",
    )
    for name, target in zip(names, targets, strict=True):
        link(planted, name, target)
    claude_md(planted, " ".join(f"@{name}" for name in names))
    memory = load_memory(planted.project)
    assert len(memory.warnings) == 3, memory.warnings
    assert not any(set(w) & {"\x1b", "\x07", "\x9b"} for w in memory.warnings)
    assert all(" refused: " in w and "\n" not in w for w in memory.warnings)
    assert SECRET not in memory.text and OTHER_RUN not in memory.text and IN_GIT not in memory.text


# -- the race: a shell swapping links while memory loads --------------------------------------------------

LOADS = 5_000
"""Loads at least; more only until the swapped state has been seen (bounded by ``MAX_LOADS``)."""
MAX_LOADS = 50_000

SWAPPER = textwrap.dedent(
    """
    import os, sys
    os.chdir(sys.argv[1])
    stop = sys.argv[2]
    swaps = 0
    print("ready", flush=True)
    while not os.path.exists(stop):
        for name in ("docs", "note.md", "CLAUDE.local.md"):
            os.rename(name, name + ".real")
            os.rename(name + ".link", name)      # now a symlink to outside
            os.rename(name, name + ".link")
            os.rename(name + ".real", name)
            swaps += 1
    print(swaps, flush=True)
    """
)
"""As fast as it can, each of a directory, an imported file and a memory file swapped for a symlink to the
same name outside, and back (renames: the name never goes missing for long)."""


def race_project(tmp_path: Path) -> Path:
    """A project with a memory file, an imported file in ``docs`` and a local memory file, each with a
    symlink ``<name>.link`` beside it to the same name outside, which holds the secret; the project."""
    project, away = tmp_path / "project", tmp_path / "outside"
    for top in (project, away):
        (top / "docs").mkdir(parents=True)
    (project / "CLAUDE.md").write_text("root @docs/notes.md @note.md")
    (project / "docs" / "notes.md").write_text("inner notes")
    (project / "note.md").write_text("plain note")
    (project / "CLAUDE.local.md").write_text("local notes")
    for name in ("docs/notes.md", "note.md", "CLAUDE.local.md"):
        (away / name).write_text(SECRET)
    for name in ("docs", "note.md", "CLAUDE.local.md"):
        (project / f"{name}.link").symlink_to(away / name)
    return project


@pytest.fixture
def swapped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The race project, which a separate process keeps swapping for links to outside."""
    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / "home"))
    project = race_project(tmp_path)
    stop = tmp_path / "stop"
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(project), str(stop)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert swapper.stdout is not None and swapper.stdout.readline() == "ready\n"
        yield project
    finally:
        stop.touch()
        out, _ = swapper.communicate(timeout=60)
    assert swapper.returncode == 0 and int(out) > 0, (swapper.returncode, out)


def test_memory_loads_while_a_shell_swaps_links_never_leak_and_never_raise(swapped: Path) -> None:
    leaks = raised = swapped_seen = loads = 0
    while loads < LOADS or (not swapped_seen and loads < MAX_LOADS):
        loads += 1
        try:
            memory = load_memory(swapped)
        except Exception:
            raised += 1
            continue
        leaks += SECRET in memory.text
        swapped_seen += bool(memory.warnings)
    assert (leaks, raised) == (0, 0), f"{leaks} leaks and {raised} exceptions in {loads} loads"
    assert swapped_seen, f"the swapped state never met in {loads} loads"


def test_the_race_project_reads_whole_when_nothing_swaps(tmp_path: Path) -> None:
    memory = load_memory(race_project(tmp_path))
    assert [f.text for f in memory.files] == [
        "root @docs/notes.md @note.md",
        "inner notes",
        "plain note",
        "local notes",
    ]
    assert memory.warnings == ()
