"""A long run of one agent on ``sim``: hundreds of turns of reading, grepping, testing and editing.

``benchmarks/longrun.py`` measures what context management costs, and what it loses, on it.

The work is a checklist the environment (``Workbench``, the agent's tools) walks through: every tool
result ends with a ``NEXT:`` line naming the next call, as a test runner names the next failure. The
results are 0.5 to 8K tokens: files of varying size, grep hits, pytest output, edits. Early results
hold facts (``NOTE: the deploy port is 8431.``); later, at intervals, a result asks about one
(``QUESTION q3: what is the deploy port?``) and the next call is ``answer``, which the workbench scores
against the fact it planted. So recall is measured where the answer is given, never assumed.

The play (``play``) reads only the request it is sent: the last tool result for what to do next, and
the whole visible context (text, tool results, thinking, summaries, the content of compaction blocks)
for an answer. It keeps no state of its own, so what a compaction lost is lost to its answers too. As a
real model does, it notes in its text what it found, facts included, and thinks first when the request
enables thinking. A request asking for a summary of the work so far is answered with the simulator's
summariser.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

from teamrt.models.reply import Reply
from teamrt.models.tokens import message_blocks
from teamrt.models.types import Block
from teamrt.sim.policy import SimRequest, result_text
from teamrt.tools.base import ToolContext, ToolResult

FACTS: tuple[tuple[str, str], ...] = (
    ("the deploy port", "8431"),
    ("the staging database host", "db-7.staging.internal"),
    ("the retry limit of the uploader", "5"),
    ("the feature flag for the new parser", "FF_ORION_PARSE"),
    ("the owner of the billing module", "Priya Raman"),
    ("the minimum supported Python", "3.10.4"),
    ("the cache directory", "/var/cache/atlas"),
    ("the release branch", "release/2026.11"),
    ("the metrics endpoint", "/internal/metrics/v2"),
    ("the flaky test", "test_upload_resume_after_kill"),
    ("the license of the vendored parser", "MPL-2.0"),
    ("the on-call rotation channel", "#atlas-oncall"),
)
"""What the early results plant, and the questions later ask about."""
SYSTEM = (
    "You maintain the atlas service. Work through the checklist you are given, one item a turn, and note in"
    " your reply what each result showed: facts about the project especially."
)
NEXT = "NEXT: "
QUESTION = re.compile(r"^QUESTION (q\d+): what is (.+)\?$", re.M)
NOTE = re.compile(r"^\W*NOTE: (.+?\.)\s*$", re.M)
DONE = "DONE"
MODULES = ("ingest", "parser", "upload", "billing", "auth", "cache", "metrics", "deploy", "search", "store")
WORDS = ("record", "batch", "offset", "token", "frame", "chunk", "index", "cursor", "window", "ledger")


@dataclass(frozen=True)
class Step:
    """One call of the checklist: the tool, its input, and what its result holds."""

    tool: str
    input: dict[str, Any]
    tokens: int
    fact: int | None = None
    """The index in ``FACTS`` of the fact this result plants."""
    question: int | None = None
    """The index in ``FACTS`` of the fact this result asks about (the next call answers it)."""


def checklist(turns: int, seed: int = 36) -> list[Step]:
    """The calls of a run of ``turns`` assistant turns (the last one ends the work, calling nothing).

    Facts are planted in the first tenth of the run, and asked about from two fifths on, every
    ``turns // 20`` calls, round-robin; each question's ``answer`` call takes a turn of its own."""
    rng = random.Random(seed)
    calls = max(turns - 1, 1)
    plant_until = max(len(FACTS), calls // 10)
    plant_at = {round(i * plant_until / len(FACTS)) + 1: i for i in range(len(FACTS))}
    every = max(calls // 20, 3)
    ask_from = max(plant_until + 2, calls * 2 // 5)
    steps: list[Step] = []
    asked = 0
    while len(steps) < calls:
        n = len(steps)
        if n >= ask_from and (n - ask_from) % every == 0 and len(steps) + 2 <= calls:
            steps.append(_work(rng, n, question=asked % len(FACTS)))
            steps.append(Step("answer", {"question": f"q{asked}"}, 0, question=asked % len(FACTS)))
            asked += 1
            continue
        steps.append(_work(rng, n, fact=plant_at.get(n)))
    return steps


def _work(rng: random.Random, n: int, *, fact: int | None = None, question: int | None = None) -> Step:
    module = MODULES[rng.randrange(len(MODULES))]
    roll = rng.random()
    if roll < 0.45:
        path = f"src/atlas/{module}/{WORDS[rng.randrange(len(WORDS))]}_{n % 37}.py"
        return Step("read_file", {"path": path}, rng.randint(800, 7600), fact, question)
    if roll < 0.65:
        pattern = f"def {WORDS[rng.randrange(len(WORDS))]}_"
        return Step("grep", {"pattern": pattern, "path": f"src/atlas/{module}"}, rng.randint(500, 2000), fact,
                    question)  # fmt: skip
    if roll < 0.85:
        return Step("run_tests", {"target": f"tests/{module}"}, rng.randint(2900, 7600), fact, question)
    path = f"src/atlas/{module}/{WORDS[rng.randrange(len(WORDS))]}_{n % 37}.py"
    edit = {"path": path, "old": f"limit = {n}", "new": f"limit = {n + 1}"}
    return Step("edit_file", edit, rng.randint(500, 900), fact, question)


def body(step: Step, n: int, seed: int = 36) -> str:
    """The realistic part of the result of call ``n``: about ``step.tokens`` tokens of what the tool shows."""
    rng = random.Random(seed * 100_003 + n)
    target = step.tokens * 4  # the sim's tokens: 4 bytes each
    lines: list[str] = []
    size = 0
    module = step.input.get("path", step.input.get("target", "src/atlas/core")).split("/")[-1]
    while size < target:
        word, other = WORDS[rng.randrange(len(WORDS))], WORDS[rng.randrange(len(WORDS))]
        k = len(lines) + 1
        if step.tool == "read_file":
            call = f"self.{other}_{rng.randrange(999)}({other}) + {rng.randrange(99)}"
            line = (
                f"    def {word}_{k}(self, {other}: int) -> int:"
                if k % 6 == 1
                else f"        {word} = {call}"
            )
        elif step.tool == "grep":
            line = (
                f"src/atlas/{module}/{other}_{rng.randrange(40)}.py:{rng.randrange(900)}:    def {word}_{k}("
            )
        elif step.tool == "run_tests":
            line = (f"tests/{module}/test_{word}.py::test_{other}_{k} FAILED" if k % 9 == 0
                    else f"E       assert {word}_{rng.randrange(999)} == {rng.randrange(99999)}" if k % 9 == 1
                    else f"tests/{module}/test_{word}.py::test_{other}_{k} PASSED")  # fmt: skip
        else:
            line = f"@@ -{k},3 +{k},3 @@ {word}_{rng.randrange(999)} = {other}({rng.randrange(99)})"
        lines.append(line)
        size += len(line) + 1
    if step.fact is not None:
        subject, value = FACTS[step.fact]
        lines.insert(len(lines) // 2, f"# NOTE: {subject} is {value}.")
    return "\n".join(lines)


@dataclass
class Workbench:
    """The agent's tools over one checklist: each call gets the next step's result; ``answer`` calls are
    scored against the planted facts. ``answers`` records (question, given, expected) in order."""

    steps: list[Step]
    seed: int = 36
    at: int = 0
    answers: list[tuple[str, str, str]] = field(default_factory=list)
    off_script: int = 0
    """Calls that were not the one the checklist named (a play that lost its place)."""

    def task(self) -> str:
        return (
            "Work through the maintenance checklist of the atlas service. Each tool result ends with the"
            " next item (NEXT:). Note what you find, facts about the project especially: you will be"
            f" asked about them later.\n{self._next(0)}"
        )

    def tools(self) -> dict[str, Any]:
        """The tools, as an ``AgentSpec`` takes them."""
        return {
            name: _BenchTool(self, name) for name in ("read_file", "grep", "run_tests", "edit_file", "answer")
        }

    @property
    def recall(self) -> float | None:
        """Correct answers over questions answered (None: no question was asked)."""
        if not self.answers:
            return None
        return sum(1 for _, given, want in self.answers if given == want) / len(self.answers)

    def call(self, tool: str, input: dict[str, Any]) -> ToolResult:
        if self.at >= len(self.steps):
            return ToolResult(f"The checklist is done.\n{NEXT}{DONE}", is_error=True)
        step = self.steps[self.at]
        if tool != step.tool or any(input.get(k) != v for k, v in step.input.items()):
            self.off_script += 1
            return ToolResult(f"That is not the next item.\n{self._next(self.at)}", is_error=True)
        n = self.at
        self.at += 1
        if step.tool == "answer":
            assert step.question is not None
            self.answers.append(
                (step.input["question"], str(input.get("answer", "")), FACTS[step.question][1])
            )
            text = "Answer recorded."
        else:
            text = body(step, n, self.seed)
            if step.question is not None:
                subject = FACTS[step.question][0]
                text += f"\nQUESTION {self.steps[n + 1].input['question']}: what is {subject}?"
        return ToolResult(f"{text}\n{self._next(self.at)}")

    def _next(self, n: int) -> str:
        if n >= len(self.steps):
            return NEXT + DONE
        step = self.steps[n]
        return NEXT + json.dumps({"tool": step.tool, "input": step.input}, sort_keys=True)


class _BenchTool:
    """One tool of a ``Workbench``."""

    description = "a tool of the maintenance checklist"
    input_schema: dict[str, Any] = {"type": "object"}  # noqa: RUF012
    read_only = False

    def __init__(self, bench: Workbench, name: str) -> None:
        self.bench = bench
        self.name = name

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return self.bench.call(self.name, input)


def play(request: SimRequest) -> Reply:
    """The next turn, from what the request shows: a summary when asked for one, else the call the last
    result names, with a note of what that result held (and an answer when it asked a question)."""
    if is_summary_request(request):
        from teamrt.sim.summariser import summarise

        return Reply().say(summarise(request.messages, request.system))
    last = last_results(request)
    step = _next_call(last)
    reply = Reply()
    if request.thinking_enabled:
        reply.think(
            f"The last result is {len(last)} characters long. I follow the checklist: {step or DONE}."
        )
    notes = NOTE.findall(last)
    said = f"Checked: {len(last.splitlines())} lines." + "".join(f" Noted: {n}" for n in notes)
    if step is None:
        return reply.say(said + " The checklist is done.")
    tool, input = step
    if tool == "answer":
        asked = QUESTION.search(last)
        subject = asked.group(2) if asked else ""
        found = recall(visible_text(request), subject) if subject else None
        input = {**input, "answer": found or "unknown"}
        said += f" {subject.capitalize()} is {found}." if found else f" I no longer know {subject}."
    return reply.say(said).call(tool, input)


def is_summary_request(request: SimRequest) -> bool:
    """Whether the last user turn asks for a summary of the work so far."""
    return asks_summary(request.last_user_text)


def asks_summary(text: str) -> bool:
    """Whether a user turn's text (tool results left out) asks for a summary: this workload's user turns
    hold only tool results, besides the task (``Workbench.task``) and the loop's own instructions."""
    return "summar" in text.lower() and NEXT not in text


def last_results(request: SimRequest) -> str:
    """The text of the last user turn's tool results and text (the task, on the first turn)."""
    blocks = message_blocks(request.messages[-1]) if request.messages else []
    parts = [result_text(b) if b.get("type") == "tool_result" else b.get("text", "") for b in blocks]
    return "\n".join(p for p in parts if p)


def _next_call(text: str) -> tuple[str, dict[str, Any]] | None:
    line = next((ln for ln in reversed(text.splitlines()) if ln.startswith(NEXT)), None)
    if line is None or line[len(NEXT) :] == DONE:
        return None
    named = json.loads(line[len(NEXT) :])
    return str(named["tool"]), dict(named["input"])


def visible_text(request: SimRequest) -> str:
    """Everything the model can read in the request: text, thinking, tool results, compaction blocks."""
    parts: list[str] = []
    for message in request.messages:
        for block in message_blocks(message):
            parts.append(_block_text(block))
    return "\n".join(p for p in parts if p)


def _block_text(block: Block) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "thinking":
        return str(block.get("thinking", ""))
    if kind == "tool_result":
        return result_text(block)
    if kind == "compaction":
        return str(block.get("content") or "")
    return ""


def recall(text: str, subject: str) -> str | None:
    """The value ``text`` last gives for ``subject`` (``... the deploy port is 8431.``), or None."""
    found = re.findall(re.escape(subject) + r" is (\S+?(?: \S+?)?)\.(?:\s|$)", text, re.I)
    return found[-1] if found else None
