"""TUI benchmark: 200 agents on ``sim``, each changing its row about once a second, watched by ``teamrt tui``.

A writer process owns a run of 200 agents (a lead and 199 children: teammates, a few
forks and worktree agents) and makes each of them change what its row shows about once
a second, spread evenly over the second and jittered, about 200 commits a second in
all: an assistant turn asking for a tool (then, for ``bash``, the call marked
``running``: its own commit), the user turn carrying the tool's result, now and then a
pause (``idle``) and a new epoch. Every write goes through the store's writer, whose
group commit is part of what is measured.

- TUI: ``teamrt tui RUN`` on a pseudo-terminal of 140x45, drawing as for a user; its
  output is read and thrown away. With ``TEAMRT_TUI_TRACE`` set, the app records, for
  each agent row whose cells it changed, the commit the row now shows (``changed_at``)
  and the moment the table was updated (the screen is drawn after that). Latency: the
  one minus the other, for the changes committed inside the measuring window, each
  counted once, at the first read that showed it. CPU: the app process's user and system
  time over the window (``/proc/<pid>/stat``), as a share of one core.
- baseline: the same writer going on, watched by a bare reader without Textual, in a
  process of its own: what the app's worker does (``RunFollower``: ``changed()`` every
  50 ms, then ``read``), recording for every row that differs from the last read its
  latency the same way. What any watcher of the run must pay; the ratios say what the
  UI costs on top.

Prints a table, then one JSON object as the last line with ``--json``; keys ``p50_ms``,
``p95_ms`` (target <= 250) and ``cpu_share`` (target <= 0.15).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import fcntl
import json
import multiprocessing
import os
import pty
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

from teamrt.store import FinishedCall, Store, ToolUse, Usage, create_store
from teamrt.store.engine import DB_ENV

RUN = "20261122-000000-tuib"
AGENTS = 200
PERIOD_S = 1.0  # each agent's row changes about this often
JITTER = 0.25  # each gap is PERIOD_S times a uniform factor in [1 - JITTER, 1 + JITTER]
IDLE_EVERY = 25  # about one step in this many, between calls, the agent goes idle; the next starts it again
WARMUP_S = 2.0
SETTLE_S = 1.0  # after a window: the changes committed in its last moments get applied too
START_TIMEOUT_S = 30.0
ROWS, COLS = 45, 140
TARGET_P95_MS = 250.0
TARGET_CPU_SHARE = 0.15
TRACE_ENV = "TEAMRT_TUI_TRACE"
POLL_S = 0.05  # the app's (teamrt.tui.run_screen.POLL_S, REREAD_S), without importing Textual here
REREAD_S = 1.0

COMMANDS = (
    ".venv/bin/pytest -q tests/test_store.py",
    "git diff --stat HEAD~1",
    "python3 -m unittest discover -s tests -p 'test_parser*.py'",
    "ruff check teamrt/runtime/loop.py",
    "grep -rn 'def append_turn' teamrt",
    "make typecheck",
)
FILES = ("teamrt/store/ops.py", "teamrt/runtime/loop.py", "teamrt/tui/state.py", "README.md")
SAY = (
    "I read the module and the tests that cover it before changing anything. "
    "The failing case is the resume path, where a call journaled as running has no process. "
    "Next I will run the focused tests, then the whole suite, and compare the timings."
)


# -- the writer: a run of 200 agents, each changing about once a second ---------------------------


def kind_of(i: int) -> str:
    return "lead" if i == 0 else "fork" if i % 10 == 3 else "worktree" if i % 10 == 7 else "team"


def agent_names(agents: int) -> list[str]:
    return ["lead"] + [f"{('coder', 'reviewer', 'tester')[i % 3]}-{i:03d}" for i in range(1, agents)]


def write(home: str, agents: int, pipe: Connection, go: Event, stop: Event) -> None:
    """The writer process: builds the run, says so, then writes from ``go`` until ``stop``.

    Sends ``("ready", setup_s)``, then at the end ``("done", stamps, commits)``: the wall
    time right after each row-changing update was committed, and the group commits."""
    os.environ["TEAMRT_HOME"] = home
    run_dir = Path(home) / "runs" / RUN
    run_dir.mkdir(mode=0o700, parents=True)
    started = time.monotonic()
    store = create_store(run_dir, RUN, task=f"benchmark: {agents} agents on sim", workdir=home)
    try:
        asyncio.run(drive(store, agent_names(agents), pipe, go, stop, started))
    finally:
        store.close()


async def drive(store: Store, names: list[str], pipe: Connection, go: Event, stop: Event, t0: float) -> None:
    epochs: dict[str, int] = {}

    async def setup(i: int, name: str) -> None:
        if i:
            branch = f"teamrt/{name}" if kind_of(i) == "worktree" else None
            role = name.split("-")[0]
            await store.add_agent(name, kind=kind_of(i), model="sim", parent="lead", role=role, branch=branch)
        epochs[name] = await store.begin_epoch(name)
        await store.append_turn(
            name, epoch=epochs[name], role="user", content=[{"type": "text", "text": f"Task for {name}."}]
        )

    await store.add_agent("lead", kind="lead", model="sim", role="lead")  # the parent first
    await asyncio.gather(*(setup(i, n) for i, n in enumerate(names)))
    pipe.send(("ready", time.monotonic() - t0))
    await asyncio.to_thread(go.wait)

    stopped = asyncio.Event()
    stamps: list[float] = []
    start = time.monotonic()

    async def agent(i: int, name: str) -> None:
        rng = random.Random(i)
        due = start + PERIOD_S * i / len(names)
        step = 0
        open_call: ToolUse | None = None
        idle = False
        while True:
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            if stopped.is_set():
                return
            step += 1
            if idle:  # started again: thinking
                epochs[name] = await store.begin_epoch(name)
                idle = False
            elif open_call is not None:  # the call's result: thinking
                result = [{"type": "tool_result", "tool_use_id": open_call.id, "content": f"ok, step {step}"}]
                await store.append_turn(
                    name,
                    epoch=epochs[name],
                    role="user",
                    content=result,
                    finished=[FinishedCall(open_call.id, "done", result)],
                )
                open_call = None
            elif rng.randrange(IDLE_EVERY) == 0:  # waiting for mail
                await store.set_agent_status(name, "idle")
                idle = True
            else:  # a call of the model's: "bash: <command>" or "read: <file>", turns + 1, tokens and cost up
                open_call = await call(store, name, epochs[name], rng, f"toolu_{i:03d}_{step:06d}")
            stamps.append(time.time())
            due += PERIOD_S * rng.uniform(1 - JITTER, 1 + JITTER)

    async def stopper() -> None:
        await asyncio.to_thread(stop.wait)
        stopped.set()

    await asyncio.gather(stopper(), *(agent(i, n) for i, n in enumerate(names)))
    pipe.send(("done", stamps, store.commits))


async def call(store: Store, name: str, epoch: int, rng: random.Random, call_id: str) -> ToolUse:
    """An assistant turn asking for one call, as the runtime keeps it; a bash call is then marked running."""
    if rng.random() < 0.7:
        use = ToolUse(call_id, "bash", {"command": rng.choice(COMMANDS), "timeout": 120}, False)
    else:
        use = ToolUse(call_id, "read", {"file_path": rng.choice(FILES)}, True)
    prompt = rng.randint(20_000, 60_000)
    usage = Usage(
        input_tokens=rng.randint(200, 2_000),
        output_tokens=rng.randint(50, 800),
        cache_creation_tokens=rng.randint(0, 2_000),
        cache_read_tokens=prompt,
        cost_usd=round(prompt * 3e-7 + rng.random() * 0.01, 6),
    )
    content = [
        {"type": "text", "text": SAY[: rng.randint(60, len(SAY))]},
        {"type": "tool_use", "id": use.id, "name": use.name, "input": use.input},
    ]
    await store.append_turn(
        name,
        epoch=epoch,
        role="assistant",
        content=content,
        stop_reason="tool_use",
        model="sim",
        usage=usage,
        tool_uses=[use],
    )
    if not use.read_only:
        await store.move_tool_call(use.id, "running")
    return use


# -- the baseline: what the app's worker reads, without Textual -------------------------------------


def watch(home: str, trace: str, stop: Event) -> None:
    """The bare watcher process: ``RunFollower`` as the app's worker drives it, rows diffed, traced."""
    os.environ["TEAMRT_HOME"] = home
    from teamrt.tui.state import AgentRow, RunFollower

    follower = RunFollower(Path(home) / "runs" / RUN, RUN)
    shown: dict[str, AgentRow] = {}
    last = 0.0
    try:
        with open(trace, "a", encoding="utf-8") as out:
            while not stop.is_set():
                if follower.changed(None) or time.monotonic() - last >= REREAD_S:
                    last = time.monotonic()
                    state = follower.read(None)
                    changed = [r for r in state.agents if shown.get(r.name) != r]
                    now = time.time()
                    shown.update((r.name, r) for r in changed)
                    out.writelines(f"{r.name}\t{r.changed_at:.6f}\t{now:.6f}\n" for r in changed)
                    out.flush()
                stop.wait(POLL_S)
    finally:
        follower.close()


# -- measuring ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Window:
    start: float  # time.time()
    end: float
    cpu_s: float  # the watcher's user + system time over it, every thread
    main_cpu_s: float  # of that, its main thread's (the app's: applying and drawing)
    writer_cpu_s: float  # the writer's, for the load on the machine

    @property
    def seconds(self) -> float:
        return self.end - self.start

    def share(self, cpu_s: float) -> float:
        return cpu_s / self.seconds


@dataclass(frozen=True, slots=True)
class Latencies:
    ms: list[float]  # sorted
    applies: int  # distinct moments in the window at which the watcher changed rows
    again: int  # rows changed in the window that show a commit they had shown already

    def pct(self, q: float) -> float:
        if not self.ms:
            return float("nan")
        k = (len(self.ms) - 1) * q
        lo = int(k)
        hi = min(lo + 1, len(self.ms) - 1)
        return self.ms[lo] + (self.ms[hi] - self.ms[lo]) * (k - lo)


def cpu_seconds(pid: int, thread: int | None = None) -> float:
    """User + system time of process ``pid`` (every thread of it) or of one of its threads, from ``/proc``."""
    path = f"/proc/{pid}/stat" if thread is None else f"/proc/{pid}/task/{thread}/stat"
    with open(path, encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure_window(pid: int, writer: int, seconds: float) -> Window:
    """The CPU used by ``pid``, its main thread and ``writer`` over the next ``seconds``."""

    def now() -> tuple[float, float, float, float]:
        return time.time(), cpu_seconds(pid), cpu_seconds(pid, pid), cpu_seconds(writer)

    start, cpu0, main0, writer0 = now()
    time.sleep(seconds)
    end, cpu1, main1, writer1 = now()
    return Window(start, end, cpu1 - cpu0, main1 - main0, writer1 - writer0)


def latencies(trace: Path, window: Window) -> Latencies:
    """The latency of every change committed inside ``window``: to the first time its row showed it.

    The first read's rows show commits from before the window and are left out. A row
    changed again while showing the same commit (``again``: it had been read half before
    and half after a later commit) is not a new change and is not counted twice."""
    ms: list[float] = []
    applies: set[str] = set()
    again = 0
    shown: set[tuple[str, str]] = set()
    for line in trace.read_text(encoding="utf-8").splitlines():
        parts = line.split("\t")
        if len(parts) != 3:  # a line cut short by the app's exit
            continue
        name, changed, applied = parts
        changed_at, applied_at = float(changed), float(applied)
        inside = window.start <= applied_at < window.end
        if inside:
            applies.add(applied)
        if (name, changed) in shown:
            again += inside
            continue
        shown.add((name, changed))
        if window.start <= changed_at < window.end:
            ms.append((applied_at - changed_at) * 1000)
    return Latencies(sorted(ms), len(applies), again)


def wait_for_lines(trace: Path, alive: Any, what: str) -> None:
    """Until ``trace`` has its first line (the watcher has read the run); ``alive()`` false: it died."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while not (trace.exists() and trace.stat().st_size > 0):
        if not alive():
            raise RuntimeError(f"{what} exited before it showed the run")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} showed nothing in {START_TIMEOUT_S:.0f} s")
        time.sleep(0.05)


class Terminal:
    """``teamrt tui RUN`` on a pseudo-terminal, its output drained (the tail kept, for errors)."""

    def __init__(self, home: str, trace: Path) -> None:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        env = dict(os.environ, TEAMRT_HOME=home, TERM="xterm-256color", COLUMNS=str(COLS), LINES=str(ROWS))
        env[TRACE_ENV] = str(trace)
        env.pop(DB_ENV, None)
        env.pop("NO_COLOR", None)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "teamrt", "tui", RUN],
                stdin=slave,
                stdout=slave,
                stderr=slave,
                env=env,
                start_new_session=True,
                close_fds=True,
            )
        finally:
            os.close(slave)
        self.output = 0
        self._tail: collections.deque[bytes] = collections.deque(maxlen=64)
        self._drain = threading.Thread(target=self._read, name="pty-drain", daemon=True)
        self._drain.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # EIO: the app is gone and the terminal closed
                return
            if not chunk:
                return
            self.output += len(chunk)
            self._tail.append(chunk)

    def tail(self) -> str:
        return b"".join(self._tail)[-2000:].decode("utf-8", "replace")

    def quit(self) -> int | None:
        """``q``, as a user quits; then SIGTERM, then SIGKILL to its session."""
        if self.proc.poll() is None:
            try:
                os.write(self.master, b"q")
                return self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if self.proc.poll() is not None:
                break
            try:
                os.killpg(self.proc.pid, sig)
                self.proc.wait(timeout=3)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        return None

    def close(self) -> None:
        self.quit()
        self._drain.join(timeout=2)
        os.close(self.master)


def measure(home: str, args: argparse.Namespace) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    here, there = ctx.Pipe()
    go, stop, stop_watch = ctx.Event(), ctx.Event(), ctx.Event()
    writer = ctx.Process(target=write, args=(home, args.agents, there, go, stop), daemon=True)
    watcher = ctx.Process(
        target=watch, args=(home, str(Path(home) / "baseline.trace"), stop_watch), daemon=True
    )
    terminal: Terminal | None = None
    started = time.monotonic()
    try:
        writer.start()
        if not here.poll(START_TIMEOUT_S):
            raise RuntimeError("the writer did not build the run")
        _, setup_s = here.recv()
        assert writer.pid is not None
        writer_pid = writer.pid

        # the TUI, then the writer's updates
        tui_trace = Path(home) / "tui.trace"
        terminal = Terminal(home, tui_trace)
        proc = terminal.proc
        try:
            wait_for_lines(tui_trace, lambda: proc.poll() is None, "teamrt tui")
        except RuntimeError as e:
            raise RuntimeError(f"{e}; its last output:\n{terminal.tail()}") from None
        shown_s = time.monotonic() - started
        go.set()
        time.sleep(WARMUP_S)
        tui = measure_window(proc.pid, writer_pid, args.seconds)
        time.sleep(SETTLE_S)
        if proc.poll() is not None:
            raise RuntimeError(f"teamrt tui exited during the window; its last output:\n{terminal.tail()}")
        code = terminal.quit()
        drawn = terminal.output
        terminal.close()
        terminal = None

        # the bare watcher, the same writer going on
        base_trace = Path(home) / "baseline.trace"
        watcher.start()
        wait_for_lines(base_trace, watcher.is_alive, "the baseline watcher")
        assert watcher.pid is not None
        time.sleep(WARMUP_S)
        base = measure_window(watcher.pid, writer_pid, args.baseline_seconds)
        time.sleep(SETTLE_S)
        stop_watch.set()
        watcher.join(timeout=5)

        stop.set()
        if not here.poll(10):
            raise RuntimeError("the writer did not stop")
        _, stamps, commits = here.recv()
        writer.join(timeout=10)
        if args.keep is not None:  # for a closer look: the traces and the two windows
            args.keep.mkdir(parents=True, exist_ok=True)
            for trace in (tui_trace, base_trace):
                shutil.copy(trace, args.keep / trace.name)
            windows = {"tui": [tui.start, tui.end], "baseline": [base.start, base.end], "written": stamps}
            (args.keep / "windows.json").write_text(json.dumps(windows))
    finally:
        if terminal is not None:
            terminal.close()
        stop.set()
        stop_watch.set()
        go.set()
        for p in (watcher, writer):
            if p.pid is not None:
                p.join(timeout=5)
                if p.is_alive():
                    p.kill()
                    p.join()

    ours, theirs = latencies(tui_trace, tui), latencies(base_trace, base)
    written = sum(tui.start <= s < tui.end for s in stamps)
    base_written = sum(base.start <= s < base.end for s in stamps)
    result: dict[str, Any] = {
        "p50_ms": round(ours.pct(0.5), 1),
        "p95_ms": round(ours.pct(0.95), 1),
        "max_ms": round(ours.ms[-1], 1) if ours.ms else None,
        "cpu_share": round(tui.share(tui.cpu_s), 3),
        "main_thread_cpu_share": round(tui.share(tui.main_cpu_s), 3),
        "agents": args.agents,
        "seconds": round(tui.seconds, 1),
        "updates": written,
        "updates_per_s": round(written / tui.seconds, 1),
        "samples": len(ours.ms),
        "applies_per_s": round(ours.applies / tui.seconds, 1),
        "shown_again": ours.again,
        "baseline_p50_ms": round(theirs.pct(0.5), 1),
        "baseline_p95_ms": round(theirs.pct(0.95), 1),
        "baseline_max_ms": round(theirs.ms[-1], 1) if theirs.ms else None,
        "baseline_cpu_share": round(base.share(base.cpu_s), 3),
        "baseline_seconds": round(base.seconds, 1),
        "baseline_updates": base_written,
        "baseline_samples": len(theirs.ms),
        "baseline_applies_per_s": round(theirs.applies / base.seconds, 1),
        "baseline_shown_again": theirs.again,
        "writer_cpu_share": round(tui.share(tui.writer_cpu_s), 3),
        "commits": commits,
        "updates_total": len(stamps),
        "setup_s": round(setup_s, 1),
        "tui_shown_s": round(shown_s, 1),
        "tui_exit": code,
        "tui_output_bytes": drawn,
        "wall_s": round(time.monotonic() - started, 1),
    }
    result["p95_ratio"] = round(result["p95_ms"] / result["baseline_p95_ms"], 2)
    result["cpu_ratio"] = round(result["cpu_share"] / result["baseline_cpu_share"], 2)
    result["target_p95_ms"] = TARGET_P95_MS
    result["target_cpu_share"] = TARGET_CPU_SHARE
    result["ok"] = result["p95_ms"] <= TARGET_P95_MS and result["cpu_share"] <= TARGET_CPU_SHARE
    return result


def report(r: dict[str, Any]) -> None:
    def met(ok: bool) -> str:
        return "met" if ok else "NOT met"

    print(
        f"{r['agents']} agents: {r['updates']} row changes committed in the TUI's {r['seconds']} s window "
        f"({r['updates_per_s']}/s), {r['baseline_updates']} in the baseline's {r['baseline_seconds']} s; "
        f"{r['commits']} group commits in all"
    )
    print(
        f"{'':30}{'p50 ms':>8}{'p95 ms':>8}{'max ms':>8}{'cpu share':>10}{'samples':>9}"
        f"{'applies/s':>10}{'again':>7}"
    )
    for label, key in (("teamrt tui (140x45 pty)", ""), ("baseline: RunFollower alone", "baseline_")):
        print(
            f"{label:30}{r[key + 'p50_ms']:>8}{r[key + 'p95_ms']:>8}{r[key + 'max_ms']!s:>8}"
            f"{r[key + 'cpu_share']:>10}{r[key + 'samples']:>9}{r[key + 'applies_per_s']:>10}"
            f"{r[key + 'shown_again']:>7}"
        )
    print(
        "(applies/s: moments a watcher changed rows; again: rows changed while showing a commit already"
        f" shown, not counted.)\nOf the TUI's cpu, its main thread's (applying, drawing):"
        f" {r['main_thread_cpu_share']}; the writer's cpu meanwhile: {r['writer_cpu_share']}"
    )
    print(
        f"p95 {r['p95_ms']} ms (target <= {TARGET_P95_MS:.0f}): {met(r['p95_ms'] <= TARGET_P95_MS)}, "
        f"x{r['p95_ratio']} the baseline; cpu {r['cpu_share']} of a core "
        f"(target <= {TARGET_CPU_SHARE}): {met(r['cpu_share'] <= TARGET_CPU_SHARE)}, "
        f"x{r['cpu_ratio']} the baseline; whole run {r['wall_s']} s"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="end with one JSON object on a line of its own")
    parser.add_argument("--agents", type=int, default=AGENTS, help=f"agents in the run (default {AGENTS})")
    parser.add_argument("--seconds", type=float, default=20.0, help="the TUI's measuring window (default 20)")
    parser.add_argument("--keep", type=Path, default=None, help="copy the two traces into this directory")
    parser.add_argument(
        "--baseline-seconds", type=float, default=None, help="the baseline's window (default: half --seconds)"
    )
    args = parser.parse_args()
    if args.agents < 2 or args.seconds <= 0:
        parser.error("--agents must be at least 2 and --seconds positive")
    if args.baseline_seconds is None:
        args.baseline_seconds = max(5.0, args.seconds / 2)

    os.environ.pop(DB_ENV, None)  # one SQLite file per run, in the temporary directory
    with tempfile.TemporaryDirectory(prefix="teamrt-tui-bench-") as home:
        os.environ["TEAMRT_HOME"] = home
        result = measure(home, args)
    report(result)
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
