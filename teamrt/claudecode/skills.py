"""Claude Code's skills: ``<root>/<name>/SKILL.md`` folders, found once per run, their bodies read when used.

Where (Claude Code's skills documentation): the user's ``~/.claude/skills``
(``$CLAUDE_CONFIG_DIR/skills``), the project's ``.claude/skills``, and the
``skills`` folders of enabled plugins (``extra`` roots, from
``teamrt.claudecode.plugins``), whose skills are named ``<plugin>:<name>``.
Discovery is exactly one level deep, as Claude Code's is: a ``SKILL.md``
further down is not a skill (teamrt says so once per root, where Claude Code
is silent). A skill's name is its folder's name, as Claude Code invokes it;
the front matter's ``name`` is only a display name there and unused here. On
a clash the user's skill wins over the project's, as Claude Code's
precedence has it (personal over project). Claude Code also finds
``packages/x/.claude/skills`` as the agent works in ``packages/x``; teamrt
does not, because the list of skills is part of every request's cached
prefix and stays fixed for the run.

The front matter: ``description`` (else the body's first paragraph, as Claude
Code takes it) and ``when_to_use`` are what the model is shown, at most
``MAX_DESCRIPTION`` characters together; ``disable-model-invocation: true``
keeps a skill from the model entirely (teamrt has no slash commands through
which a person would invoke it). ``allowed-tools``, ``context``, ``agent``,
``hooks``, ``model``, ``effort``, ``paths`` and ``shell`` are named in one
warning per skill as not used: in particular ``allowed-tools`` grants nothing,
the agent's permissions decide each call (Claude Code pre-approves those
tools while the skill is active; a repository's skill must not widen what an
agent may do).

A repository's skills are someone else's instructions and scripts: they load
only while the person has trusted them as they are (``skills_digest``, kept by
``teamrt trust`` beside the hooks' hash in ``teamrt.claudecode.trust``);
otherwise they are left out with one warning. The user's own skills need no
trust. Every problem with a file (too large, not a regular file, not UTF-8, a
link out of its folder, front matter that cannot be read) is one warning, and
the other skills load.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from teamrt.claudecode import trust
from teamrt.claudecode.paths import claude_home
from teamrt.claudecode.reading import read_head
from teamrt.claudecode.skillfile import (
    CONTROL,
    description_of,
    flag,
    front_matter_fields,
    split_front_matter,
)
from teamrt.claudecode.skillfile import SkillError as SkillError  # raised here too: part of this interface
from teamrt.terminal import clean_line

SKILL_FILE = "SKILL.md"
MAX_SKILL_BYTES = 256 * 1024
"""A larger SKILL.md is left out unread (Claude Code advises under 500 lines; this is far above that)."""
MAX_NAME = 64
MAX_SKILLS = 500
"""Skill folders looked at in one root; past it the rest are left out with a warning."""
MAX_HASHED_FILES = 5000
"""Files ``skills_digest`` hashes in a repository's skills; a repository with more cannot be trusted."""
UNUSED_FIELDS = ("allowed-tools", "context", "agent", "hooks", "model", "effort", "paths", "shell")
"""Claude Code's skill fields that change what a skill does and that teamrt does not honour."""


@dataclass(frozen=True)
class SkillRoot:
    """A folder holding ``<name>/SKILL.md`` folders."""

    folder: Path
    scope: str
    """``user``, ``project`` or ``plugin:<plugin name>``."""
    trusted: bool
    """False: a repository's skills the person has not trusted (left out, one warning)."""


@dataclass(frozen=True)
class Skill:
    """One skill as found; its body is read when it is used (``body``)."""

    name: str
    """How the model invokes it: the folder's name (``<plugin>:<folder>`` for a plugin's)."""
    description: str
    """What the model is shown of it: one line, at most ``MAX_DESCRIPTION`` characters."""
    folder: Path
    """The skill's folder, canonical: its base directory, readable by the agents' file tools."""
    scope: str
    model_invocable: bool = True
    """False for ``disable-model-invocation: true``: not listed to the model, not invocable by it."""
    sha256: str = ""
    """The hash of SKILL.md as it was found: a body read later must be the same file (a trusted skill
    changed during the run is not used)."""

    def body(self) -> str:
        """SKILL.md's body, its front matter taken off, read now; raises ``SkillError`` when it can no
        longer be read or differs from what the run found."""
        data = _read_skill_file(self.folder / SKILL_FILE, self.folder)
        if hashlib.sha256(data).hexdigest() != self.sha256:
            raise SkillError(f"skill {self.name}: {SKILL_FILE} changed since the run started; not used")
        return split_front_matter(data.decode("utf-8"))[1].strip()


@dataclass(frozen=True)
class SkillSet:
    """The skills a run found, by name, and what was wrong in them (a line each)."""

    skills: Mapping[str, Skill] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def listed(self) -> list[tuple[str, str]]:
        """(name, description) of every skill the model may invoke, by name: the ``Skill`` tool's list."""
        return [(s.name, s.description) for _, s in sorted(self.skills.items()) if s.model_invocable]

    def launch(self, name: str) -> tuple[Path, str]:
        """The base directory and body of skill ``name`` for the model's ``Skill`` call; KeyError for a
        skill it may not invoke, ``SkillError`` (a ValueError) for one that cannot be read now."""
        skill = self.skills.get(name)
        if skill is None or not skill.model_invocable:
            raise KeyError(name)
        return skill.folder, skill.body()

    def folders(self) -> tuple[Path, ...]:
        """Every skill's folder, canonical: what the agents' file tools may read besides the workspace."""
        return tuple(dict.fromkeys(skill.folder for _, skill in sorted(self.skills.items())))

    def preloaded(self, names: Sequence[str]) -> tuple[str, list[str]]:
        """The bodies of the skills ``names`` (an agent file's ``skills``), as text for the agent's
        context, and the names that are not loaded or cannot be read (a line each)."""
        parts: list[str] = []
        missing: list[str] = []
        for name in dict.fromkeys(names):
            skill = self.skills.get(name)
            if skill is None:
                missing.append(f"skill {shown(name)} is not loaded (no such skill, or not trusted)")
                continue
            try:
                parts.append(
                    f'<skill name="{name}" base_directory="{skill.folder}">\n{skill.body()}\n</skill>'
                )
            except (OSError, UnicodeDecodeError, SkillError) as e:
                missing.append(shown(str(e)))
        return "\n\n".join(parts), missing


def user_root() -> SkillRoot:
    """The user's own skills: ``~/.claude/skills`` (``$CLAUDE_CONFIG_DIR/skills``); trusted."""
    return SkillRoot(claude_home() / "skills", "user", True)


def project_folder(project: Path) -> Path:
    return project / ".claude" / "skills"


def load_skills(project: Path, extra: Sequence[SkillRoot] = ()) -> SkillSet:
    """The skills of the user, of ``project`` (when trusted as they are) and of ``extra`` roots (plugins);
    what cannot be used becomes a warning, never an error."""
    warnings: list[str] = []
    found: dict[str, Skill] = {}
    user = user_root()
    roots: list[tuple[SkillRoot, Path | None]] = [(user, None)]
    folder = project_folder(project)
    if os.path.realpath(folder) != os.path.realpath(user.folder):  # run in the home folder: user's
        roots.append((SkillRoot(folder, "project", _project_trusted(project, warnings)), project))
    roots.extend((root, None) for root in extra)
    for root, within in roots:
        skills = scan_root(root, warnings, within=within)
        if skills and not root.trusted:
            where = (
                "this project's skills are not trusted as they are now"
                if root.scope == "project"
                else (f"the skills of {root.scope} are not trusted")
            )
            warnings.append(
                f"{len(skills)} skill{'s' if len(skills) != 1 else ''} in {shown(str(root.folder))} left"
                f" out: {where}; read them, then run `teamrt trust` in {shown(str(project))} to use them"
            )
            continue
        for skill in skills:
            if skill.name in found:  # the earlier root wins: the user's over the project's, as in Claude Code
                warnings.append(
                    f"{shown(str(skill.folder))}: skill {shown(skill.name)} of the {skill.scope} skills is"
                    f" overridden by the {found[skill.name].scope} skill of that name"
                )
                continue
            found[skill.name] = skill
    return SkillSet(found, tuple(warnings))


def _project_trusted(project: Path, warnings: list[str]) -> bool:
    """Whether the person trusted ``project``'s skills as they are now (True when it has none)."""
    try:
        digest = skills_digest(project)
        return digest is None or trust.is_skills_trusted(project, digest)
    except (SkillError, trust.TrustError) as e:
        warnings.append(f"{shown(str(e))}; this project's skills are left out")
        return False


def scan_root(root: SkillRoot, warnings: list[str], *, within: Path | None = None) -> list[Skill]:
    """The skills of ``root``, by folder name; ``within``: where the root itself must lead (a
    repository's skills may not be a link to elsewhere)."""
    try:
        real_root = Path(os.path.realpath(root.folder))
        if not real_root.is_dir():
            return []
        if within is not None and not real_root.is_relative_to(os.path.realpath(within)):
            warnings.append(
                f"{shown(str(root.folder))} leads out of {shown(str(within))}; its skills are left out"
            )
            return []
        entries = sorted(e.name for e in os.scandir(real_root))
    except OSError as e:
        warnings.append(f"{shown(str(root.folder))}: {shown(e.strerror or str(e))}; its skills are left out")
        return []
    prefix = root.scope.removeprefix("plugin:") + ":" if root.scope.startswith("plugin:") else ""
    skills: list[Skill] = []
    deeper = 0
    looked = 0
    for name in entries:
        if name.startswith("."):
            continue
        looked += 1
        if looked > MAX_SKILLS:
            warnings.append(
                f"{shown(str(root.folder))}: more than {MAX_SKILLS} folders; the rest are left out"
            )
            break
        path = real_root / name
        try:
            if not path.is_dir():
                continue
            if not os.path.lexists(path / SKILL_FILE):
                deeper += sum(1 for sub in path.iterdir() if (sub / SKILL_FILE).is_file())
                continue
            skill, warning = _skill(path, real_root, prefix, root.scope, user=root.scope == "user")
            skills.append(skill)
            if warning is not None:
                warnings.append(warning)
        except SkillError as e:
            warnings.append(str(e))
        except OSError as e:
            warnings.append(f"{shown(str(path / SKILL_FILE))}: {shown(e.strerror or str(e))}; left out")
    if deeper:
        warnings.append(
            f"{shown(str(root.folder))}: {deeper} {SKILL_FILE} file{'s' if deeper != 1 else ''} two folders"
            f" down {'are' if deeper != 1 else 'is'} not loaded: a skill is <name>/{SKILL_FILE}, one level"
            " deep, as Claude Code finds them"
        )
    return skills


def _skill(path: Path, real_root: Path, prefix: str, scope: str, *, user: bool) -> tuple[Skill, str | None]:
    """The skill in folder ``path`` of the root ``real_root`` (named ``prefix`` and the folder's name)
    and a warning about it, or a ``SkillError`` naming the file."""
    file = path / SKILL_FILE
    where = shown(str(file))
    if CONTROL.search(path.name) or len(path.name) > MAX_NAME:
        raise SkillError(f"{shown(str(path))}: a skill name must be at most {MAX_NAME} printable characters")
    folder = Path(os.path.realpath(path))
    if not user and not folder.is_relative_to(real_root):  # a user's own links to skills elsewhere are theirs
        raise SkillError(f"{shown(str(path))}: links out of {shown(str(real_root))}; left out")
    data = _read_skill_file(file, folder)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SkillError(f"{where}: not UTF-8 text; left out") from None
    try:
        header, body = split_front_matter(text)
    except SkillError as e:
        raise SkillError(f"{where}: {e}; left out") from None
    fields = front_matter_fields(header, where) if header is not None else {}
    description = description_of(fields, body)
    unused = [key for key in UNUSED_FIELDS if key in fields]
    skill = Skill(
        name=prefix + path.name,
        description=description,
        folder=folder,
        scope=scope,
        model_invocable=not flag(fields.get("disable-model-invocation")),
        sha256=hashlib.sha256(data).hexdigest(),
    )
    if not unused:
        return skill, None
    grants = " (allowed-tools grants nothing: the agent's permissions decide every call)"
    plural = len(unused) > 1
    return skill, (
        f"{where}: Claude Code's skill field{'s' if plural else ''} {', '.join(unused)}"
        f" {'are' if plural else 'is'} not used by teamrt{grants if 'allowed-tools' in unused else ''}"
    )


def _read_skill_file(file: Path, folder: Path) -> bytes:
    """SKILL.md's bytes, if it is a regular file inside ``folder`` (canonical) no larger than the limit."""
    where = shown(str(file))
    real = Path(os.path.realpath(file))
    if not real.is_relative_to(folder):
        raise SkillError(f"{where}: links out of its skill folder; left out")
    try:
        head = read_head(real, MAX_SKILL_BYTES + 1)
    except OSError as e:
        raise SkillError(f"{where}: {shown(e.strerror or str(e))}; left out") from None
    if head is None:
        raise SkillError(f"{where}: not a regular file; left out")
    data, size = head
    if size > MAX_SKILL_BYTES or len(data) > MAX_SKILL_BYTES:
        raise SkillError(f"{where}: {size} bytes, more than {MAX_SKILL_BYTES} a skill may have; left out")
    return data


def skills_digest(project: Path) -> str | None:
    """The hash of ``project``'s skills as they are: every entry of its ``.claude/skills`` folder (where
    the folder itself leads), skill folders or not, by path and content, a link by where it points (a
    skill may be a link to a folder beside it); None when the project has no skill. Raises
    ``SkillError`` past ``MAX_HASHED_FILES`` entries, which cannot be trusted whole."""
    if not repository_skills(project):
        return None
    root = Path(os.path.realpath(project_folder(project)))
    files = {str(path.relative_to(root)): _file_hash(path) for path in _walk(root)}
    text = json.dumps(files, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def repository_skills(project: Path) -> dict[str, list[Path]]:
    """``project``'s skill folders (those holding a SKILL.md), by name, each with every entry in it, links
    not followed: what ``teamrt trust`` shows. Raises ``SkillError`` past ``MAX_HASHED_FILES`` entries
    in the skills folder, or when it cannot be read."""
    folder = project_folder(project)
    root = Path(os.path.realpath(folder))
    try:
        names = sorted(e.name for e in os.scandir(root) if os.path.lexists(Path(e.path) / SKILL_FILE))
    except (FileNotFoundError, NotADirectoryError):
        return {}
    except OSError as e:
        raise SkillError(f"{shown(str(folder))}: {shown(e.strerror or str(e))}") from None
    if names and len(_walk(root)) > MAX_HASHED_FILES:
        raise SkillError(
            f"{shown(str(folder))} holds more than {MAX_HASHED_FILES} files, more than teamrt hashes to trust"
        )
    return {name: _walk(root / name) for name in names}


def _walk(top: Path) -> list[Path]:
    """Every entry under ``top`` (itself when it is a link), links not followed; stops a little past
    ``MAX_HASHED_FILES`` (the caller refuses so many)."""
    if top.is_symlink():
        return [top]
    found: list[Path] = []
    for here, dirs, files in os.walk(top, followlinks=False):
        dirs.sort()
        base = Path(here)
        found.extend(base / name for name in sorted(files))
        found.extend(base / name for name in dirs if (base / name).is_symlink())
        if len(found) > MAX_HASHED_FILES:
            break
    return found


def _file_hash(path: Path) -> str:
    """``link:<target>`` for a link, ``<kind>`` for what is no regular file, else the content's hash."""
    try:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            return "link:" + os.readlink(path)
        if not stat.S_ISREG(info.st_mode):
            return f"special:{stat.S_IFMT(info.st_mode)}"
        digest = hashlib.sha256()
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            while chunk := os.read(fd, 1 << 20):
                digest.update(chunk)
        finally:
            os.close(fd)
        return digest.hexdigest()
    except OSError as e:
        return f"unreadable:{e.errno}"


def shown(text: str) -> str:
    """``text`` fit for a warning line: one line, no control characters (``teamrt.terminal.clean_line``)."""
    return clean_line(text)


def trust_report(project: Path, folders: Mapping[str, Sequence[Path]]) -> list[str]:
    """What ``teamrt trust`` shows of ``project``'s skills (``repository_skills``) before it records their
    hash: each skill with its description and every file in its folder, control characters escaped
    (``trust.visible``). The person reads the files themselves: they are instructions and scripts."""
    if not folders:
        return []
    root = Path(os.path.realpath(project_folder(project)))
    lines = [f"The skills of {trust.visible(str(root))}, which the model could load and follow in its runs:"]
    for name, paths in folders.items():
        try:
            skill, _ = _skill(root / name, root, "", "project", user=False)
            about = skill.description
        except (SkillError, OSError) as e:
            about = f"(does not load: {e})"
        lines.append(f"  {trust.visible(name)}: {trust.visible(about)}")
        files = ", ".join(trust.visible(str(p.relative_to(root / name))) for p in paths)
        lines.append(f"    files: {files}")
    return lines
