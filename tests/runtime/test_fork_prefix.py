"""A fork's requests, compared byte for byte with its parent's requests as the simulator received them.

A fork shares its parent's prompt-cache entry only if everything before its directive is the bytes the
parent sent: the top-level fields (model, system, tools, ...), and the messages up to and including the
spawning assistant turn. The comparisons here are of raw spans of the request bodies (``raw_members``,
``raw_items``), never of re-parsed JSON, which would hide a changed key order or spacing.

Cache breakpoints move with the last assistant turn, so the parent request with the fork's breakpoints is
the parent's NEXT one (the spawning turn, then its results): the fork's messages through the spawning turn
are that request's exactly. The spawning request itself places its breakpoints one turn earlier: its
messages are the fork's block for block apart from ``cache_control`` markers, and its last message, where
its cache entry ends, is the fork's exactly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from teamrt.models import Reply
from teamrt.runtime.spawning import FORK_PLACEHOLDER
from teamrt.sim import SimRequest, SimServer
from teamrt.sim.cache import render
from tests.helpers.teams import Kept
from tests.runtime.test_team import TEAM, fork_child, fork_lead, run_team

_DECODER = json.JSONDecoder()
_SPACE = " \t\n\r"


# -- raw JSON spans -------------------------------------------------------------------


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in _SPACE:
        at += 1
    return at


def _members(text: str, open_: str, close: str, keyed: bool) -> list[tuple[str, str]]:
    at = _skip(text, 0)
    assert text[at] == open_, f"not a JSON {open_}...{close}: {text[:40]!r}"
    at = _skip(text, at + 1)
    found: list[tuple[str, str]] = []
    if text[at] == close:
        assert _skip(text, at + 1) == len(text)
        return found
    while True:
        key = ""
        if keyed:
            key, at = _DECODER.raw_decode(text, at)
            at = _skip(text, at)
            assert text[at] == ":"
            at = _skip(text, at + 1)
        _, end = _DECODER.raw_decode(text, at)
        found.append((key, text[at:end]))
        at = _skip(text, end)
        if text[at] == close:
            assert _skip(text, at + 1) == len(text), "trailing text after the JSON value"
            return found
        assert text[at] == ",", f"expected , at {at}: {text[at : at + 20]!r}"
        at = _skip(text, at + 1)


def raw_members(text: str) -> list[tuple[str, str]]:
    """The members of the JSON object ``text``: (key, the raw text of its value), in the order sent."""
    return _members(text, "{", "}", keyed=True)


def raw_items(text: str) -> list[str]:
    """The raw text of each item of the JSON array ``text``."""
    return [raw for _, raw in _members(text, "[", "]", keyed=False)]


def test_the_raw_span_helpers_keep_the_bytes_as_sent() -> None:
    """The helpers split without re-encoding: spacing, key order and escapes survive."""
    text = '{ "b" : [1, {"x":"\\u00e9"} ,"]"], "a":{"k": null}}'
    assert raw_members(text) == [("b", '[1, {"x":"\\u00e9"} ,"]"]'), ("a", '{"k": null}')]
    assert raw_items(raw_members(text)[0][1]) == ["1", '{"x":"\\u00e9"}', '"]"']
    assert raw_items("[ ]") == [] and raw_members("{}") == []


# -- requests as sent -----------------------------------------------------------------


@dataclass(frozen=True)
class Sent:
    """One request body as received, split into raw spans."""

    agent: str
    body: str

    @property
    def fields(self) -> list[tuple[str, str]]:
        return raw_members(self.body)

    @property
    def messages(self) -> list[str]:
        return raw_items(dict(self.fields)["messages"])

    def message(self, index: int) -> dict[str, str]:
        return dict(raw_members(self.messages[index]))


def unmarked(raw_message: str) -> list[tuple[str, object]]:
    """A message's raw members, its content blocks' raw members less ``cache_control``: what stays put
    when breakpoints move."""
    members: list[tuple[str, object]] = []
    for key, raw in raw_members(raw_message):
        if key == "content" and raw.startswith("["):
            blocks = [[m for m in raw_members(b) if m[0] != "cache_control"] for b in raw_items(raw)]
            members.append((key, blocks))
        else:
            members.append((key, raw))
    return members


@dataclass(frozen=True)
class Spawn:
    """A fork's first request with the parent requests around the spawn that made it."""

    fork: Sent
    spawning: Sent
    """The parent's request whose answer was the spawning turn."""
    following: Sent
    """The parent's next request: the spawning turn, then its results."""


def sent(sim: SimServer) -> list[Sent]:
    return [Sent(agent, body.decode("utf-8")) for agent, body in sim.bodies]


def spawn_of(fork: str, parent: str, bodies: list[Sent]) -> Spawn:
    """Find, by the spawning turn's tool_use ids, the parent's requests around the spawn of ``fork``."""
    first = next((s for s in bodies if s.agent == fork), None)
    assert first is not None, f"{fork} sent no request the API accepted"
    turn = json.loads(first.messages[-2])
    assert turn["role"] == "assistant"
    ids = {b["id"] for b in turn["content"] if b["type"] == "tool_use"}
    mine = [s for s in bodies if s.agent == parent]
    k = len(first.messages) - 2
    for i, request in enumerate(mine):
        messages = request.messages
        content = json.loads(messages[k])["content"] if len(messages) > k else ""
        if isinstance(content, list) and ids <= {b.get("id") for b in content}:
            assert i > 0 and len(mine[i - 1].messages) == k, "the request before answered the spawn"
            return Spawn(first, mine[i - 1], request)
    raise AssertionError(f"no request of {parent} carries the turn that spawned {fork}")


def assert_fork_prefix(spawn: Spawn) -> None:
    """Everything before the fork's directive is bytes its parent sent."""
    fork, spawning, following = spawn.fork, spawn.spawning, spawn.following
    prefix_fields = [(k, v) for k, v in fork.fields if k != "messages"]
    assert prefix_fields == [(k, v) for k, v in spawning.fields if k != "messages"], (
        f"{fork.agent}'s top-level fields (model, system, tools, ...) are not its parent's bytes"
    )
    assert prefix_fields == [(k, v) for k, v in following.fields if k != "messages"]
    k = len(spawning.messages)
    assert len(fork.messages) == k + 2, "the parent's messages, the spawning turn, then the directive"
    assert fork.messages[: k + 1] == following.messages[: k + 1], (
        f"{fork.agent}'s messages through the spawning turn are not its parent's bytes"
    )
    assert fork.messages[k - 1] == spawning.messages[k - 1], "where the parent's cache entry ends"
    for i in range(k - 1):
        assert unmarked(fork.messages[i]) == unmarked(spawning.messages[i]), f"message {i} differs"


def assert_forks_of_one_spawn(spawns: list[Spawn], directives: set[str]) -> None:
    """Forks of one spawn differ only in their directive: the same placeholder for every call."""
    calls = [b for b in json.loads(spawns[0].fork.messages[-2])["content"] if b["type"] == "tool_use"]
    lasts = [raw_items(s.fork.message(-1)["content"]) for s in spawns]
    assert len({tuple(items[:-1]) for items in lasts}) == 1, "every fork gets the same placeholders"
    placeholders = [json.loads(raw) for raw in lasts[0][:-1]]
    assert placeholders == [
        {"type": "tool_result", "tool_use_id": c["id"], "content": FORK_PLACEHOLDER} for c in calls
    ]
    assert {json.loads(items[-1])["text"] for items in lasts} == directives


def assert_forks_read_the_parents_prefix(sim: SimServer, spawns: list[Spawn]) -> None:
    """Each fork's first request reads from the cache all the parent's spawning request wrote."""
    for spawn in spawns:
        written = render(json.loads(spawn.spawning.body))[-1].tokens_through
        first = next(c for c in sim.calls if c.agent == spawn.fork.agent)
        assert first.cache_read == written, (
            f"{spawn.fork.agent}'s first request read {first.cache_read} of its parent's {written} tokens"
        )


def forks(store: Kept, parent: str = "lead") -> list[str]:
    return [a.name for a in store.reader.agents() if a.kind == "fork" and a.parent == parent]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    (path / "team.toml").write_text(TEAM)
    return path


def check_one_spawn(sim: SimServer, store: Kept, directives: set[str]) -> list[Spawn]:
    names = forks(store)
    assert len(names) == len(directives), names
    bodies = sent(sim)
    spawns = [spawn_of(name, "lead", bodies) for name in names]
    for spawn in spawns:
        assert_fork_prefix(spawn)
    assert_forks_of_one_spawn(spawns, directives)
    assert_forks_read_the_parents_prefix(sim, spawns)
    return spawns


# -- the tests --------------------------------------------------------------------------


def test_a_lead_s_forks_send_its_bytes_before_their_directives(project: Path, sim: SimServer) -> None:
    sim.policies.update({"lead": fork_lead, "fork": fork_child})
    outcome, store = run_team(project, sim, "Survey the code.")
    assert outcome.status == "done", outcome
    for part in ("A.", "B.", "C."):
        assert f"found something in {part}" in outcome.answer
    check_one_spawn(sim, store, {"Survey part A.", "Survey part B.", "Survey part C."})


def history_lead(request: SimRequest) -> Reply:
    """Reads a file, makes two calls at once, spawns three forks (beside a second call), then two more."""
    if not request.calls("Read"):
        return Reply().say("Reading.").call("Read", {"file_path": "notes.txt"})
    if not request.calls("task_create"):
        return Reply().call("task_create", {"subject": "survey"}).call("task_list", {})
    spawned = request.calls("spawn_agent")
    if spawned == 0:
        directives = ["Look at A.", "Look at B.", "Look at C."]
        return (
            Reply()
            .say("Splitting.")
            .call("spawn_agent", {"kind": "fork", "directives": directives})
            .call("task_list", {})
        )
    if spawned == 1:
        return Reply().say("Now deeper.").call("spawn_agent", {"kind": "fork", "directives": ["D.", "E."]})
    return Reply().say("All surveyed.")


def test_forks_spawned_after_turns_of_history_send_all_of_it_as_sent(project: Path, sim: SimServer) -> None:
    """Tool calls and results already in the prefix, a spawning turn with a second call, and a second
    spawn whose prefix holds the first spawn's results."""
    (project / "notes.txt").write_text("the notes\n")
    sim.policies.update({"lead": history_lead, "fork": fork_child})
    outcome, store = run_team(project, sim, "Survey the code.")
    assert outcome.answer == "All surveyed.", outcome
    names = forks(store)
    assert len(names) == 5, names
    bodies = sent(sim)
    spawns = [spawn_of(name, "lead", bodies) for name in names]
    first, second = spawns[:3], spawns[3:]
    assert {len(s.spawning.messages) for s in first} == {5}, "after a Read and two parallel calls"
    assert {len(s.spawning.messages) for s in second} == {7}, "after the first spawn's results"
    for spawn in spawns:
        assert_fork_prefix(spawn)
    assert_forks_of_one_spawn(first, {"Look at A.", "Look at B.", "Look at C."})
    assert_forks_of_one_spawn(second, {"D.", "E."})
    assert len(raw_items(first[0].fork.message(-1)["content"])) == 3, "a placeholder for each call, too"
    assert_forks_read_the_parents_prefix(sim, spawns)
    assert "the notes" in first[0].fork.messages[2], "the Read result is in the prefix"


def test_a_project_s_memory_is_in_the_forks_prefix_once(project: Path, sim: SimServer) -> None:
    (project / "CLAUDE.md").write_text("Always cite path:line.\n")
    sim.policies.update({"lead": fork_lead, "fork": fork_child})
    outcome, store = run_team(project, sim, "Survey the code.")
    assert outcome.status == "done", outcome
    spawns = check_one_spawn(sim, store, {"Survey part A.", "Survey part B.", "Survey part C."})
    for request in (spawns[0].spawning, *(s.fork for s in spawns)):
        system = json.loads(dict(request.fields)["system"])
        assert "".join(b["text"] for b in system).count("Always cite path:line.") == 1, request.agent


PLANNER = """---
name: planner
description: Plans and splits the work.
tools: Read, Glob
---
You are the planner. Split every survey into parts and fork one agent per part.
"""


def test_a_lead_with_its_own_agent_file_passes_its_prompt_and_tools_to_forks(
    project: Path, sim: SimServer
) -> None:
    (project / "team.toml").write_text(TEAM + '[lead]\nagent = "planner"\n')
    (project / ".claude" / "agents").mkdir(parents=True)
    (project / ".claude" / "agents" / "planner.md").write_text(PLANNER)
    sim.policies.update({"lead": fork_lead, "fork": fork_child})
    outcome, store = run_team(project, sim, "Survey the code.")
    assert outcome.status == "done", outcome
    spawns = check_one_spawn(sim, store, {"Survey part A.", "Survey part B.", "Survey part C."})
    fork = dict(spawns[0].fork.fields)
    system = "".join(b["text"] for b in json.loads(fork["system"]))
    assert system.startswith("You are the planner.") and "The roles of your team" in system
    tools = [t["name"] for t in json.loads(fork["tools"])]
    assert tools[:2] == ["Read", "Glob"] and "Bash" not in tools and "spawn_agent" in tools
