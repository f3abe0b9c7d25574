"""The run view's diff tab: the real diff of the selected agent's work (of the run's integration branch
when the lead is selected) against where it started, a file at a time under a header, its code
highlighted by the file's language, scrollable both ways; ``]`` and ``[`` jump between files.

git runs in a worker thread (``runs.diffs.review``): a large diff never holds up the screen, and past
``REVIEW_LIMIT`` it is cut, saying so. While the tab shows a live agent's work it is read again every
``REREAD_S``; it repaints only when the diff changed. The diff's text is cleaned before it is drawn and
only ever drawn as Text: Rich markup in a file is shown as written.
"""

from __future__ import annotations

import time
from pathlib import Path

from rich.syntax import Syntax
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import ScrollableContainer, Vertical
from textual.widgets import Static
from textual.worker import Worker, WorkerState

from teamrt.runs.diffs import REVIEW_LIMIT, FileDiff, Review, line_kinds, review
from teamrt.tui.look import plain

REREAD_S = 2.0
THEME = "ansi_dark"  # the terminal's own colours, and no background of its own
BACKGROUND = {"add": "on #16351f", "del": "on #3d1a1d"}
SIGN_STYLE = {"add": "bold green", "del": "bold red", "context": "dim"}
HIDDEN = ("index ", "--- ", "+++ ")  # hashes and names the file's header says already


class DiffView(Vertical):
    """Shows ``Review``s; ``want`` says whose diff, ``jump`` moves between its files."""

    limit = REVIEW_LIMIT
    """The most of a diff it reads (bytes)."""

    def __init__(self, run_dir: Path, run_id: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.run_dir = run_dir
        self.run_id = run_id
        self.review: Review | None = None
        self.offsets: list[int] = []
        """The line each file's header is drawn on."""
        self.current = 0
        self.head = Text()
        self.body = Text()
        """What the header and the diff show now."""
        self._key: tuple[str | None, bool] | None = None  # (agent, is it the whole run) shown or asked
        self._asked_at = 0.0

    def compose(self) -> ComposeResult:
        yield Static(id="diff-head")
        with ScrollableContainer(id="diff-scroll"):
            yield Static(Text("select an agent", style="dim"), id="diff-body")

    def want(self, agent: str | None, kind: str | None, *, active: bool, live: bool) -> None:
        """Show ``agent``'s diff (of kind ``kind``; the lead's is the run's). ``active``: the tab is in
        view (only then is git asked); ``live``: the run goes on, so its diff may change."""
        key = (agent if kind != "lead" else None, kind == "lead")
        changed = key != self._key
        due = live and time.monotonic() - self._asked_at >= REREAD_S
        if agent is None or not active or not (changed or due):
            return
        if changed:
            self._key = key
            self.review = None
            self._head(plain(f"reading the diff of {agent} ...", "dim"))
        self._asked_at = time.monotonic()
        name, limit = key[0], self.limit
        self.run_worker(
            lambda: review(self.run_dir, self.run_id, name, limit),
            thread=True, exclusive=True, group="diff", name=str(name),
        )  # fmt: skip

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if worker.group != "diff" or event.state != WorkerState.SUCCESS or self._key is None:
            return
        if worker.name != str(self._key[0]):  # read for an agent no longer selected
            return
        found = worker.result
        if isinstance(found, Review) and found != self.review:
            self.show(found)

    def show(self, found: Review) -> None:
        """Draw ``found``, keeping the scroll position when it is the same agent's diff again."""
        fresh = self.review is None
        self.review = found
        if found.problem is not None:
            self.offsets = []
            self._head(plain(found.problem, "yellow"))
            self._body(Text())
            return
        text, self.offsets = render(found.files)
        if found.cut:
            text.append(f"\n… the diff is cut here: {found.cut:,} more bytes (teamrt diff shows it whole)",
                        style="bold yellow")  # fmt: skip
        if not found.files:
            text = Text(f"no changes: the {found.label} is as {found.against}", style="dim")
        self._body(text)
        if fresh:
            self.current = 0
            self.query_one("#diff-scroll", ScrollableContainer).scroll_home(animate=False)
        self._summary()

    def jump(self, by: int) -> None:
        """To the next (``by`` 1) or previous (-1) file's header: from the file the last jump went to
        while the view stays there, else from where the view was scrolled to."""
        if not self.offsets:
            return
        scroll = self.query_one("#diff-scroll", ScrollableContainer)
        last = len(self.offsets) - 1
        y = scroll.scroll_y
        if y == min(self.offsets[self.current], scroll.max_scroll_y):
            self.current = min(max(self.current + by, 0), last)
        elif by > 0:
            self.current = next((i for i, top in enumerate(self.offsets) if top > y), last)
        else:
            self.current = max((i for i, top in enumerate(self.offsets) if top < y), default=0)
        scroll.scroll_to(y=self.offsets[self.current], animate=False)
        self._summary()

    def _summary(self) -> None:
        found = self.review
        if found is None or found.problem is not None:
            return
        added = sum(f.added for f in found.files)
        removed = sum(f.removed for f in found.files)
        count = len(found.files)
        head = Text(f"{count} file{'s' if count != 1 else ''} ", style="bold")
        head.append(f"+{added}", style="green")
        head.append(" ")
        head.append(f"-{removed}", style="red")
        if count:
            head.append_text(plain(f"   file {self.current + 1}/{count}: {found.files[self.current].path}"))
            head.append("   ] next  [ previous", style="dim")
        head.append("\n")
        head.append_text(plain(found.label, "bold"))
        head.append_text(plain(f" against {found.against}", "dim"))
        if found.live:
            head.append(" (work in progress)", style="yellow")
        self._head(head)

    def _head(self, text: Text) -> None:
        text.no_wrap, text.overflow = True, "ellipsis"  # a line each, whatever the width
        self.head = text
        self.query_one("#diff-head", Static).update(text)

    def _body(self, text: Text) -> None:
        self.body = text
        self.query_one("#diff-body", Static).update(text)


def render(files: tuple[FileDiff, ...]) -> tuple[Text, list[int]]:
    """The files' diff as one Text: each under a header, its code highlighted by its language on the
    background of an addition or a removal; and the line each header is on."""
    out = Text(no_wrap=True)
    offsets: list[int] = []
    line = 0
    for n, diff in enumerate(files):
        if n:
            out.append("\n\n")
            line += 2
        offsets.append(line)
        lines = _file_lines(diff)
        out.append_text(Text("\n").join(lines))
        line += len(lines)
    return out, offsets


def _file_lines(diff: FileDiff) -> list[Text]:
    header = Text(f" {diff.path} ", style="bold reverse")
    header.append(f" +{diff.added}", style="green")
    header.append(f" -{diff.removed}", style="red")
    kinds = list(line_kinds(list(diff.lines)))
    code = [line[1:] for kind, line in kinds if kind in ("add", "del", "context")]
    highlighted = iter(_highlight(diff.path, code))
    out = [header]
    for kind, line in kinds:
        if kind in ("add", "del", "context"):
            shown = Text(line[:1] or " ", style=SIGN_STYLE[kind])
            shown.append_text(next(highlighted))
            if kind in BACKGROUND:
                shown.stylize(BACKGROUND[kind])
            out.append(shown)
        elif kind == "hunk":
            out.append(Text(line, style="cyan"))
        elif kind == "note":
            out.append(Text(line, style="dim"))
        elif kind != "file" and not line.startswith(HIDDEN):
            out.append(Text(line, style="dim bold"))
    return out


def _highlight(path: str, code: list[str]) -> list[Text]:
    """``code``'s lines highlighted together as the language ``path`` names (plain when none is known)."""
    lexer = Syntax.guess_lexer(path.strip('"'))
    if lexer == "default" or not code:
        return [Text(line) for line in code]
    text = Syntax("", lexer, theme=THEME).highlight("\n".join(code))
    lines = text.split("\n", allow_blank=True)
    return [*lines[: len(code)], *(Text() for _ in range(len(code) - len(lines)))]
