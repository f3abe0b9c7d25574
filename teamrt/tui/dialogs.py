"""Modal screens: type a message, confirm a stop, the help page. What they name (an agent) is drawn as
Text, never read as markup."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from teamrt.tui.look import plain

HELP = """\
[b]teamrt tui[/b]: watch a team of agents live, step in by mail.  [dim]esc closes[/dim]
[b]Runs list[/b]
  j/k ↑/↓  move                    enter  open the run
  /        filter                  r      resume a crashed run
[b]Run view[/b]
  j/k ↑/↓  move between agents     enter  the selected agent full size
  m        message the agent       x      stop the agent (asks first)
  a / d    approve / deny the waiting ask (the agent's, else the oldest)
  A / D    approve always (adds its rule to .claude/settings.local.json)
           / deny with a note the agent reads
  r        resume a crashed run    c      continue a run that ended
  f        unfold tool calls       /      filter agents
  t / T    next / previous tab: transcript, mail, worktree, diff
  pgup/dn  scroll the tab          ] / \\[  the diff: next / previous file
  tab      the next pane (arrows, home, end scroll it)   esc  back
  The footer offers what applies now: a finished run takes no message,
  stop or answer, but a follow-up (c); a crashed one can be resumed.
[b]Everywhere[/b]
  ?        this help               q      quit (a run goes on)
  s        save a picture of the screen (SVG) in the run's directory
Nothing here writes the run's store: a message, a stop and an answer are
mail; r and c start [b]teamrt resume[/b] / [b]continue RUN --detach[/b].
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark", "dismiss", "close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog", classes="help"):  # focused: arrows and pgup/pgdn scroll it
            yield Static(HELP.rstrip("\n"))  # 22 lines: all of it in an 80x24 terminal

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)


class TextDialog(ModalScreen[str | None]):
    """Asks for one line of text under a question (Text: never read as markup); dismissed with it, or None
    when it is blank or esc cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]

    def __init__(self, question: Text, placeholder: str, input_id: str, *, blink: bool = True) -> None:
        super().__init__()
        self.question = question
        self.placeholder = placeholder
        self.input_id = input_id
        self.blink = blink

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(self.question)
            text = Input(placeholder=self.placeholder, id=self.input_id)
            text.cursor_blink = self.blink
            yield text

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value if event.value.strip() else None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class MessageDialog(TextDialog):
    """Asks for a message's text to ``agent``."""

    def __init__(self, agent: str, *, blink: bool = True) -> None:
        question = Text.assemble("Message to ", plain(agent, "bold"), " (enter sends, esc cancels)")
        super().__init__(question, "what the agent should know or do", "message", blink=blink)


class NoteDialog(TextDialog):
    """Asks for the note a denial gives the agent (``D``)."""

    def __init__(self, agent: str, call: str, *, blink: bool = True) -> None:
        question = Text.assemble("Deny ", plain(agent, "bold"), "'s ", plain(call),
                                 " with a note (enter denies, esc cancels)")  # fmt: skip
        super().__init__(question, "what the agent should do instead", "note", blink=blink)


class FormDialog(TextDialog):
    """Asks for the values of an MCP server's form (an ``McpElicitation`` ask allowed with ``a``)."""

    def __init__(self, agent: str, fields: str, *, blink: bool = True) -> None:
        question = Text.assemble("Answer ", plain(agent, "bold"), "'s MCP server: ", plain(fields),
                                 " (name=value; name=value, or JSON; enter sends, esc cancels)")  # fmt: skip
        super().__init__(question, "name=value; name=value", "form", blink=blink)


class FollowUpDialog(TextDialog):
    """Asks for the follow-up prompt of a run that ended (``c``)."""

    def __init__(self, run_id: str, *, blink: bool = True) -> None:
        question = Text.assemble("Follow-up for run ", plain(run_id, "bold"), ": its lead's next round"
                                 " (enter starts it, esc cancels)")  # fmt: skip
        super().__init__(question, "what the lead should do next", "follow-up", blink=blink)


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
