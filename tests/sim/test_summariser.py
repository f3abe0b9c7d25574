"""The simulator's summariser: what a compaction keeps, bounded, through chains of compactions."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from teamrt.models.catalog import lookup
from teamrt.sim.context_management import COMPACT_BETA, manage
from teamrt.sim.plays.longrun import Workbench, checklist, play
from teamrt.sim.policy import SimRequest
from teamrt.sim.summariser import HEADER, MAX_BYTES, summarise

WORK: list[dict[str, Any]] = [
    {"role": "user", "content": "Fix the flaky upload test in the atlas service."},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Remember: the CI runs on Python 3.12.", "signature": "s"},
            {"type": "text", "text": "I will read the uploader first. Noted: the retry limit is 5."},
            {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "src/upload.py"}},
        ],
    },
    {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "t1",
                "content": (
                    "timeout = 30\n    def upload(self):\n        chunk = self.next_chunk(4) + 1\n"
                    "# NOTE: the staging host is db-7.staging.internal.\nsrc/upload.py:12: def upload(\n"
                    "owner: Priya Raman"
                ),
            }
        ],
    },
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "The test sleeps before the retry."},
            {
                "type": "tool_use",
                "id": "t2",
                "name": "edit_file",
                "input": {"path": "src/upload.py", "old": "a", "new": "b"},
            },
        ],
    },
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "edited\nNEXT: run the tests"}],
    },
]


def test_a_summary_keeps_the_task_facts_files_and_where_the_work_stands() -> None:
    summary = summarise(WORK, "You are a careful engineer.")
    assert summary.startswith(HEADER)
    task, key, details, files, state = (
        summary.split(f"## {name}\n")[1].split("\n## ")[0]
        for name in ("Task", "Key facts", "Details", "Files", "Last state")
    )
    assert task == "Fix the flaky upload test in the atlas service."
    assert key.splitlines() == [
        "- the CI runs on Python 3.12.",
        "- the retry limit is 5.",
        "- the staging host is db-7.staging.internal.",
    ]
    assert "- timeout = 30" in details and "- owner: Priya Raman" in details
    assert "- The test sleeps before the retry." in details and "I will read the uploader first." in details
    assert "chunk" not in details and "def upload" not in details, "code and grep hits are not facts"
    assert files == "- src/upload.py (read_file, edit_file)"
    assert state.splitlines()[-1] == "NEXT: run the tests", "the last result's end is kept as written"
    assert "Last calls: edit_file" in state and "Last said: The test sleeps before the retry." in state
    assert summarise(WORK, "You are a careful engineer.") == summary, "deterministic"
    assert (
        summarise(WORK[1:], "Keep the service up.\n\nMore.")
        .split("## Task\n")[1]
        .startswith("Keep the service up.")
    )


def test_a_summary_is_bounded_and_keeps_the_newest_facts() -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "T" * 50_000}]
    for n in range(2000):
        messages.append({"role": "assistant", "content": f"Noted: fact {n} is {n * 7}. Step {n} is done."})
        messages.append({"role": "user", "content": "go on " + "y" * 3000})
    summary = summarise(messages)
    assert len(summary.encode()) <= MAX_BYTES
    assert "fact 1999 is 13993." in summary and "fact 0 is 0." not in summary
    facts = summary.split("## Files")[0]
    assert "Step 1999 is done." not in facts and "- fact 1998 is 13986." in facts, "key facts before details"


def test_a_summary_of_a_summary_keeps_its_facts() -> None:
    first = summarise(WORK)
    later = [
        {"role": "user", "content": first},
        {"role": "assistant", "content": "The tests pass now."},
        {"role": "user", "content": "Thanks."},
    ]
    second = summarise(later)
    for line in (
        "- the retry limit is 5.",
        "- the staging host is db-7.staging.internal.",
        "- owner: Priya Raman",
    ):
        assert line in second
    assert second.split("## Key facts\n")[1].startswith("- the CI runs on Python 3.12.")
    assert "Fix the flaky upload test" in second.split("## Details")[0], "the task stays the task"
    assert "- src/upload.py (read_file, edit_file)" in second
    assert (
        second.rstrip().endswith("Thanks.") and "NEXT: run the tests" not in second.split("## Last state")[1]
    )
    as_block = [
        {"role": "assistant", "content": [{"type": "compaction", "content": first, "signature": "s"}]}
    ]
    assert summarise(as_block).split("## Last state")[0] == first.split("## Last state")[0]


def test_a_long_run_answers_from_its_summaries_after_many_compactions() -> None:
    """The longrun play through threshold compaction: it keeps its place from each summary's last state
    and answers every question about facts planted before the first compaction."""
    steps = checklist(160)
    bench = Workbench(steps)
    known = lookup("claude-sonnet-5-5")
    assert known is not None
    info = replace(known, server_compaction=True)
    tools = [{"name": n, "input_schema": {"type": "object"}} for n in bench.tools()]
    messages: list[dict[str, Any]] = [{"role": "user", "content": bench.task()}]
    edit = {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50_000}}
    compactions = 0
    for turn in range(len(steps) + 1):
        params = {
            "model": "sim",
            "max_tokens": 4000,
            "tools": tools,
            "messages": messages,
            "context_management": {"edits": [edit]},
        }
        managed = manage(params, "sim", info, frozenset({COMPACT_BETA}))
        reply = play(SimRequest(managed.params))
        content = [b if b["type"] != "tool_use" else {**b, "id": f"t{turn}"} for b in reply.content]
        if managed.compaction is not None:
            compactions += 1
            content.insert(0, managed.compaction)
        messages.append({"role": "assistant", "content": content})
        calls = [b for b in content if b["type"] == "tool_use"]
        if not calls:
            break
        result = bench.call(calls[0]["name"], calls[0]["input"])
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": calls[0]["id"], "content": result.content}
                ],
            }
        )
    assert compactions >= 8 and bench.off_script == 0 and bench.at == len(steps)
    assert bench.answers and bench.recall == 1.0, bench.answers
