"""A run's store filled as a coding team leaves it, for the TUI's tests; times fixed for snapshots.

Written through the real store's writer, as the runtime writes it; only the
clock columns are then set to fixed values (``freeze``), so screens show the
same ages on every run of the tests.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from teamrt.mailbox import Mailbox
from teamrt.store import FinishedCall, IngestedMail, NewEvent, Store, ToolUse, Usage, create_store

T0 = 1_790_000_000.0  # the run's start in every frozen store
NOW = T0 + 200  # the clock the app is given


def usage(tokens: int, cached: int, cost: float) -> Usage:
    return Usage(input_tokens=tokens, output_tokens=tokens // 10, cache_read_tokens=cached, cost_usd=cost)


def text(t: str) -> list[object]:
    return [{"type": "text", "text": t}]


async def asks_for(store: Store, agent: str, said: str, call: str, command: str, spent: Usage) -> None:
    """An assistant turn of ``agent`` saying ``said`` and asking for ``bash`` with ``command``."""
    block = {"type": "tool_use", "id": call, "name": "bash", "input": {"command": command}}
    use = ToolUse(call, "bash", {"command": command}, False)
    await store.append_turn(
        agent, epoch=1, role="assistant", content=[*text(said), block], usage=spent, tool_uses=[use]
    )


async def exchange(store: Store, agent: str, asked: str, said: str, spent: Usage) -> None:
    """``agent`` is asked ``asked`` and answers ``said``, spending ``spent``."""
    await store.append_turn(agent, epoch=1, role="user", content=text(asked))
    await store.append_turn(agent, epoch=1, role="assistant", content=text(said), usage=spent)


async def coding_run(runs_dir: Path, run_id: str = "run-demo") -> Store:
    """A lead, a reviewer teammate, three worktree coders and a fork, mid-run; the store stays open."""
    run_dir = runs_dir / run_id
    run_dir.mkdir(parents=True)
    store = create_store(
        run_dir,
        run_id,
        task="Fix the failing tests in kit and merge the fixes",
        workdir="/work/kit",
        budget_usd=2.0,
        # as a run keeps its team (only what the TUI reads of it): every model sim, so costs say (sim)
        settings={
            "integration_branch": f"teamrt/{run_id}",
            "team": {"model": "sim", "lead": {}, "roles": {}},
        },
    )
    with Mailbox(run_dir / "mailbox", run_id) as mailbox:
        for name in ("lead", "reviewer", "coder-1", "coder-2", "coder-3", "lead-fork-1", "supervisor"):
            mailbox.register(name)
    await store.add_agent("lead", kind="lead", model="sim")
    await store.add_agent("reviewer", kind="team", model="sim", parent="lead", role="reviewer")
    for i in (1, 2, 3):
        await store.add_agent(
            f"coder-{i}",
            kind="worktree",
            model="sim",
            parent="lead",
            role="coder",
            branch=f"teamrt/{run_id}/coder-{i}",
        )
    await store.add_agent("lead-fork-1", kind="fork", model="sim", parent="lead", role="researcher")
    for name in ("lead", "reviewer", "coder-1", "coder-2", "coder-3", "lead-fork-1"):
        await store.begin_epoch(name)

    await store.append_turn("lead", epoch=1, role="user", content=text("Fix the failing tests in kit"))
    await asks_for(store, "lead", "I will run the suite first, then split the work by module.", "toolu_l1",
                   "python3 -m unittest", usage(4000, 0, 0.0210))  # fmt: skip
    result = "FAILED (failures=5)\ntest_dates ... FAIL\ntest_numbers ... FAIL\ntest_stats ... FAIL"
    await store.move_tool_call("toolu_l1", "running")
    await store.append_turn(
        "lead",
        epoch=1,
        role="user",
        content=[{"type": "tool_result", "tool_use_id": "toolu_l1", "content": result}],
        finished=[FinishedCall("toolu_l1", "done", [{"type": "text", "text": result}])],
        ingested=[
            IngestedMail(
                "m-1", "reviewer", "message", {"from": "reviewer", "summary": "ready to review diffs"}
            )
        ],
    )
    await asks_for(store, "lead", "Three modules fail. One coder each; the reviewer checks every diff.",
                   "toolu_l2", "git log --oneline -5", usage(6000, 4000, 0.0120))  # fmt: skip
    await store.move_tool_call("toolu_l2", "running")

    for i, subject in enumerate(("fix kit.dates", "fix kit.numbers", "fix kit.stats"), start=1):
        await store.create_task(
            subject, f"make tests/test_{subject[8:]}.py pass", created_by="lead", blocked_by=[]
        )
        await store.claim_task(i, f"coder-{i}")
    await store.update_task(2, "done", by="coder-2")

    await exchange(
        store, "reviewer", "Review each coder's diff", "Waiting for diffs.", usage(3000, 2500, 0.0041)
    )
    await store.set_agent_status("reviewer", "idle")

    await exchange(
        store, "coder-1", "task 1: fix kit.dates", "Fixed the leap-year test.", usage(5000, 4200, 0.0090)
    )
    await store.set_agent_status("coder-1", "merging")
    await store.queue_merge("coder-1", f"teamrt/{run_id}/coder-1", "1" * 40)

    await exchange(
        store, "coder-2", "task 2: fix kit.numbers", "Done: off by one in clamp.", usage(5200, 4300, 0.0093)
    )
    await store.queue_merge("coder-2", f"teamrt/{run_id}/coder-2", "2" * 40)
    await store.set_merge_status("coder-2", "merged", merged_commit="3" * 40)
    await store.set_agent_status("coder-2", "done", "merged onto teamrt/run-demo at 333333333333")

    await store.append_turn("coder-3", epoch=1, role="user", content=text("task 3: fix kit.stats"))
    await store.append_turn(
        "coder-3",
        epoch=1,
        role="assistant",
        content=[
            {"type": "tool_use", "id": "toolu_c3", "name": "bash", "input": {"command": "rm -rf build"}}
        ],
        usage=usage(4800, 4000, 0.0080),
        tool_uses=[ToolUse("toolu_c3", "bash", {"command": "rm -rf build"}, False)],
        events=[
            NewEvent(
                "ask",
                {
                    "id": "ask-0001",
                    "tool": "bash",
                    "input": {"command": "rm -rf build"},
                    "reason": "Bash(rm:*) asks",
                    "wait_s": 300,
                },
            )
        ],
    )

    await store.append_turn("lead-fork-1", epoch=1, role="user", content=text("survey kit/stats.py"))
    await store.append_turn(
        "lead-fork-1", epoch=1, role="assistant", content=text("Reading."), usage=usage(9000, 8500, 0.0300)
    )
    await store.set_agent_status("lead-fork-1", "failed", "out of budget ($0.03 of $0.03)")
    return store


async def finished_run(runs_dir: Path, run_id: str, status: str = "done") -> None:
    """The coding run, then ended ``status`` by its owner, with the coder's ask still on record."""
    store = await coding_run(runs_dir, run_id)
    await store.set_run_status(status, "answered" if status == "done" else f"{status} by the test")
    store.close()
    freeze(runs_dir / run_id, owner_gone=True)


def freeze(run_dir: Path, *, owner_gone: bool = False) -> None:
    """Set every time the screens show to fixed values after ``T0``, in the order they were written.

    ``owner_gone``: the run's owner has closed it, so its last heartbeat (which a crashed run's
    header shows) is fixed too; a live owner's must stay its own, or the run would look crashed.
    """
    db = sqlite3.connect(run_dir / "run.db")
    with db:
        db.execute("UPDATE runs SET created_at = ?", (T0,))
        if owner_gone:
            db.execute("UPDATE runs SET heartbeat_at = ?", (T0 + 150,))
            db.execute("UPDATE runs SET finished_at = ? WHERE finished_at IS NOT NULL", (T0 + 160,))
        for table, columns in (
            ("agents", ("created_at", "updated_at")),
            ("turns", ("created_at",)),
            ("events", ("at",)),
            ("tasks", ("created_at", "updated_at")),
            ("merge_queue", ("created_at", "updated_at")),
            ("mail", ("ingested_at",)),
        ):
            sets = ", ".join(f"{c} = ? + rowid" for c in columns)
            db.execute(f"UPDATE {table} SET {sets}", (T0,) * len(columns))
    db.close()


def mail_text(message_id: str, sender: str, summary: str, body: str) -> list[object]:
    """A user turn's text block carrying mail, as the agent loop writes it for the model
    (``runtime.loop``, ``_mail_block``): the markup a person must not be shown."""
    head = f'<mail id="{message_id}" from="{sender}" kind="message" summary="{summary}">'
    return text(f"{head}\n{body}\n</mail>")


async def mail_run(runs_dir: Path, run_id: str = "run-mail") -> None:
    """A finished run whose lead read mail from its reviewer and from the person (``teamrt send``)."""
    run_dir = runs_dir / run_id
    run_dir.mkdir(parents=True)
    settings = {"team": {"model": "sim", "lead": {}, "roles": {}}}
    store = create_store(run_dir, run_id, task="Tidy the README", workdir="/work/kit", settings=settings)
    await store.add_agent("lead", kind="lead", model="sim", role="lead")
    await store.add_agent("reviewer", kind="team", model="sim", parent="lead", role="reviewer")
    for name in ("lead", "reviewer"):
        await store.begin_epoch(name)
    await store.append_turn("lead", epoch=1, role="user", content=text("Tidy the README"))
    await store.append_turn("lead", epoch=1, role="assistant", content=text("Asking the reviewer."),
                            usage=usage(2000, 0, 0.0100))  # fmt: skip
    reviewed = "The install section repeats itself.\nThe example in Usage no longer runs."
    await store.append_turn(
        "lead", epoch=1, role="user",
        content=[*mail_text("m-1", "reviewer", "two problems in the README", reviewed),
                 *mail_text("m-2", "user", "keep the badges", "Keep the badges at the top, please.")],
    )  # fmt: skip
    await store.append_turn("lead", epoch=1, role="assistant", content=text("Fixed both; badges kept."),
                            usage=usage(2500, 2000, 0.0050))  # fmt: skip
    for name in ("reviewer", "lead"):
        await store.set_agent_status(name, "done")
    await store.set_run_status("done", "answered")
    store.close()
    freeze(run_dir, owner_gone=True)
