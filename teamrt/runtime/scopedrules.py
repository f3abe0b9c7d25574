"""Path-scoped memory rules at work: a rule reaches an agent with the first file it reads or changes that
one of the rule's globs matches (``teamrt.claudecode.rules``).

Claude Code keeps a ``.claude/rules`` file with ``paths`` out of the start-up memory and attaches it to
the conversation when it reads a matching file. teamrt does the same for ``Read``, ``Edit``, ``Write`` (and
``MultiEdit``, ``NotebookEdit`` by their paths) calls that succeeded: the rule's text goes into the user
turn that carries that call's result, as a text block after the results (where hooks' added context goes,
``teamrt.runtime.hooks.context``), once per agent. Each delivery is journaled (``RULE_EVENT``, the rule's
path and the file that brought it), and an agent rebuilt by a resume, or a fork that inherits its
parent's history, counts as delivered every rule its history already shows, so no rule comes twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from teamrt.claudecode.rules import ScopedRule, relative
from teamrt.models.types import Block
from teamrt.store import Store
from teamrt.tools.base import ToolContext, ToolResult
from teamrt.tools.names import canonical

RULE_EVENT: Final = "memory.rule"
"""A path-scoped rule given to an agent: ``{"rule": <its path>, "file": <the file that brought it>}``."""
TOUCHING: Final = {"Read": "file_path", "Edit": "file_path", "Write": "file_path", "MultiEdit": "file_path",
                   "NotebookEdit": "notebook_path"}  # fmt: skip
"""The tools whose calls touch a file, and the input naming it."""


def heading(rule: ScopedRule) -> str:
    """The line before a rule's text: names it, and marks it in a history (``_shown``)."""
    whose = "user's private rule" if rule.scope == "user" else "project rule, checked into the codebase"
    return f"Contents of {rule.path} ({whose}, for files matching {', '.join(rule.globs)}):"


@dataclass
class AgentRules:
    """One agent's path-scoped rules, and what it has been given."""

    rules: tuple[ScopedRule, ...]
    store: Store
    name: str
    delivered: set[str] | None = None
    """The rules given (by path); None until first needed (read from the journal and the history)."""
    pending: list[str] = field(default_factory=list)
    """Texts for its next user turn."""


class RulesEnv(Protocol):
    @property
    def rules(self) -> AgentRules | None: ...
    @property
    def tools(self) -> ToolContext: ...


class RulesAgent(Protocol):
    """What this module reads of an agent loop (``teamrt.runtime.loop.AgentLoop`` is one)."""

    @property
    def env(self) -> RulesEnv: ...
    @property
    def messages(self) -> list[Any]: ...


def for_agent(rules: tuple[ScopedRule, ...], store: Store, name: str) -> AgentRules | None:
    """An agent's rules (None when the run has no path-scoped rule)."""
    return AgentRules(rules, store, name) if rules else None


async def touched(loop: RulesAgent, name: str, args: dict[str, Any], result: ToolResult) -> None:
    """After a call to the tool ``name`` with ``args``: queue the rules its file brings that the agent
    has not had, and journal each."""
    rules = loop.env.rules
    key = TOUCHING.get(canonical(name) or name) or TOUCHING.get(name)
    if rules is None or key is None or result.is_error:
        return
    path = args.get(key)
    if not isinstance(path, str) or not path or "\0" in path:
        return
    file = relative(path, loop.env.tools.workspace)
    if file is None:
        return
    delivered = _delivered(rules, loop.messages)
    fresh = [rule for rule in rules.rules if rule.key not in delivered and rule.matches(file)]
    for rule in fresh:  # marked before any await: calls running together never give a rule twice
        delivered.add(rule.key)
        rules.pending.append(f"{heading(rule)}\n\n{rule.text.strip()}")
    for rule in fresh:
        await rules.store.append_event(RULE_EVENT, {"rule": rule.key, "file": file}, agent=rules.name)


def context(loop: RulesAgent) -> list[Block]:
    """The rules queued for the agent's next user turn, taken. Kept for a later turn while the history
    ends with a user turn, so that user and assistant turns alternate."""
    rules = loop.env.rules
    if rules is None or not rules.pending or (loop.messages and loop.messages[-1]["role"] == "user"):
        return []
    blocks: list[Block] = [{"type": "text", "text": text} for text in rules.pending]
    rules.pending.clear()
    return blocks


def _delivered(rules: AgentRules, messages: list[Any]) -> set[str]:
    """The rules the agent has had: journaled for it, or shown in its history (a fork's, inherited)."""
    if rules.delivered is None:
        journaled = rules.store.reader.events(kinds=[RULE_EVENT])
        found = {str(e.data.get("rule")) for e in journaled if e.agent == rules.name}
        found |= {rule.key for rule in rules.rules if _shown(heading(rule), messages)}
        rules.delivered = found
    return rules.delivered


def _shown(line: str, messages: list[Any]) -> bool:
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if message.get("role") != "user" or not isinstance(content, list):
            continue
        if any(isinstance(b, dict) and str(b.get("text", "")).startswith(line) for b in content):
            return True
    return False
