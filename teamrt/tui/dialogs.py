"""Modal screens: type a message, confirm a stop, the help page. What they name (an agent) is drawn as
Text, never read as markup."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from teamrt.tui.look import plain

HELP = """\
[b]teamrt tui[/b]: watch a team of agents live, and step in by mail.   [dim]esc closes[/dim]

[b]Runs list[/b]
  j/k ↑/↓  move                    enter  open the run
  /        filter                  r      resume a crashed run
[b]Run view[/b]
  j/k ↑/↓  move between agents     enter  the selected agent full size
  m        message the agent       x      stop the agent (asks first)
  a / d    approve / deny the waiting ask (the agent's, else the oldest)
  r        resume a crashed run    f      unfold tool calls and results
  /        filter agents           esc    back to the runs list
  tab      next pane
  The footer offers what applies now: a finished run takes no message,
  stop or answer; a crashed one can be resumed.
[b]Everywhere[/b]
  ?        this help               q      quit (a run goes on)
  s        save a picture of the screen (SVG) in the run's directory

Nothing here writes the run's store: a message, a stop and an answer
are mail the run's supervisor reads; a resume starts
[b]teamrt resume RUN --detach[/b].
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark", "dismiss", "close")]

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="help"):
            yield Static(HELP)

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)


class MessageDialog(ModalScreen[str | None]):
    """Asks for a message's text; dismissed with it, or None."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]

    def __init__(self, agent: str, *, blink: bool = True) -> None:
        super().__init__()
        self.agent = agent
        self.blink = blink

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            to = plain(self.agent, "bold")
            yield Label(Text.assemble("Message to ", to, " (enter sends, esc cancels)"))
            text = Input(placeholder="what the agent should know or do", id="message")
            text.cursor_blink = self.blink
            yield text

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value if event.value.strip() else None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ConfirmDialog(ModalScreen[bool]):
    """A yes/no question (Text: never read as markup); y or enter says yes, n or esc no."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y,enter", "answer(True)", "yes"),
        Binding("n,escape", "answer(False)", "no"),
    ]

    def __init__(self, question: Text) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(self.question)
            yield Label("[b]y[/b] yes    [b]n[/b] no")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
