"""The built-in tools, by the names the model calls them (Claude Code's)."""

from __future__ import annotations

from teamrt.tools.base import Tool
from teamrt.tools.files.edit import Edit, Glob, Grep, MultiEdit, Read, Write
from teamrt.tools.files.listing import LS
from teamrt.tools.shell.bash import Bash
from teamrt.tools.web.fetch import WebFetch
from teamrt.tools.web.search import WebSearch


def builtin_tools() -> dict[str, Tool]:
    """Fresh instances of Read, Write, Edit, Glob, Grep, LS, Bash, WebFetch and WebSearch, in the order the
    model sees them (WebFetch's page cache is the instance's: a run's; WebSearch gets the team's domains
    from the supervisor). ``TodoWrite`` and ``Task`` need the team: ``teamrt.tools.team.team_tools``
    makes them."""
    tools: list[Tool] = [Read(), Write(), Edit(), Glob(), Grep(), LS(), Bash(), WebFetch(), WebSearch()]
    return {tool.name: tool for tool in tools}


def legacy_tools() -> dict[str, Tool]:
    """Tools teamrt offered before Claude Code folded them into another (``names.FOLDED``): ``MultiEdit``,
    now Edit's older name. A new agent is never offered one; an agent of an older run whose history calls
    one is offered it again on resume, right after the tool it folded into, where it stood, so that its
    history replays as it was written and the calls it goes on making run, under the rules and hooks of
    that tool (``teamrt.runtime.assembly``)."""
    return {"MultiEdit": MultiEdit()}
