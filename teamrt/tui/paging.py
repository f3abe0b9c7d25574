"""Moving about the run view's tabs from the keyboard, wherever the focus is: ``t``/``T`` the next or
previous tab (transcript, mail, worktree, diff), ``pgup``/``pgdn`` a page up or down in the tab shown.

The agent list keeps the focus (``j``/``k`` move between agents), so without these a person had to
``tab`` the focus onto a tab's text before the arrows would scroll it. The help (``dialogs.HELP``) and
docs/architecture.md ("The TUI") name these keys.
"""

from __future__ import annotations

from textual.containers import ScrollableContainer
from textual.widgets import TabbedContent


def next_tab(tabs: TabbedContent, by: int) -> None:
    """Show the tab ``by`` places after the one shown (before, when negative), round the end."""
    panes = [pane.id for pane in tabs.query("TabPane") if pane.id is not None]
    if not panes:
        return
    at = panes.index(tabs.active) if tabs.active in panes else 0
    tabs.active = panes[(at + by) % len(panes)]


def page(tabs: TabbedContent, by: int) -> None:
    """Scroll the tab shown a page down (``by`` 1) or up (-1)."""
    pane = tabs.active_pane
    scroll = next(iter(pane.query(ScrollableContainer)), None) if pane is not None else None
    if scroll is None:
        return
    if by > 0:
        scroll.scroll_page_down(animate=False)
    else:
        scroll.scroll_page_up(animate=False)
