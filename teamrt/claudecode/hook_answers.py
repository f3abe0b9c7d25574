"""What a run of a Claude Code hook means at its event, by Claude Code's rules: ``interpret`` turns a run
(``teamrt.claudecode.hooks.Ran``) into a ``Said``, ``combine`` joins the hooks of one event into an
``Answer``. Apart from running them (``teamrt.claudecode.hooks``) so that each module keeps one job.

An answer that is not valid (not JSON, a field of the wrong type, a decision its event cannot give) is an
error that blocks nothing, and the whole answer is ignored: a forged or broken answer never half-applies.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from teamrt.claudecode.hooks import Ran

CONTEXT_EVENTS = frozenset({"UserPromptSubmit", "SessionStart"})
"""Events whose hooks' plain stdout (exit 0, not JSON) goes into the agent's context, as in Claude Code."""
DECISIONS = ("allow", "deny", "ask")
TEXT_CHARS = 10_000
"""The most of one hook's text (its stderr, a reason, a context) that the model reads."""


@dataclass(frozen=True)
class Said:
    """What one hook's run says."""

    outcome: str
    """``ok``, ``blocked``, ``error`` (a non-blocking one), ``timeout`` or ``not run``."""
    block: str | None = None
    """Why the action is blocked, for the model (exit 2's stderr, a ``block`` or ``deny`` reason)."""
    decision: str | None = None
    """``PreToolUse``'s ``permissionDecision`` when it is ``allow`` or ``ask`` (``deny`` is a block)."""
    reason: str = ""
    updated_input: dict[str, Any] | None = None
    context: str = ""
    """Text for the model's context (``additionalContext``; the plain stdout of some events)."""
    stop: str | None = None
    """``continue: false``: why the agent must stop."""
    note: str = ""
    """For the journal: the error, or what the hook told the person (``systemMessage``)."""
    grant: Grant | None = None
    """A ``PermissionRequest`` hook's ``decision`` object."""


@dataclass(frozen=True)
class Grant:
    """What a ``PermissionRequest`` hook decided on an ask (Claude Code's ``hookSpecificOutput.decision``)."""

    behavior: str
    """``allow`` or ``deny``."""
    updated_input: dict[str, Any] | None = None
    """For ``allow``: the whole input the tool runs with instead."""
    message: str = ""
    """For ``deny``: why, for the model."""
    interrupt: bool = False
    """For ``deny``: the agent stops too."""


def interpret(ran: Ran, event: str) -> Said:
    """What ``ran`` means at ``event``, by Claude Code's rules."""
    if ran.failure:
        return Said("timeout" if ran.timed_out else "not run", note=ran.failure)
    if ran.code == 2:
        said = cap(ran.stderr.strip()) or f"a {event} hook blocked this without saying why"
        return Said("blocked", block=said, note=_first_line(ran.stderr))
    if ran.code != 0:
        ended = f"exit code {ran.code}" if (ran.code or 0) > 0 else f"killed by signal {-(ran.code or 0)}"
        line = _first_line(ran.stderr) or _first_line(ran.stdout)
        return Said("error", note=f"{ended}: {line}" if line else ended)
    text = ran.stdout.strip()
    if not text.startswith("{"):
        return Said("ok", context=cap(text) if event in CONTEXT_EVENTS else "")
    try:
        output = json.loads(text)
    except ValueError as e:
        return Said("error", note=f"its output starts with {{ but is not JSON ({e}); it is ignored")
    try:
        return _from_json(output, event)
    except _Invalid as e:
        return Said("error", note=f"its JSON output is ignored: {e}")


class _Invalid(ValueError):
    pass


def _from_json(output: dict[str, Any], event: str) -> Said:
    """A hook's JSON answer (Claude Code's fields); raises ``_Invalid`` for one of the wrong type."""
    go_on = _typed(output, "continue", bool, True)
    stop_reason = _typed(output, "stopReason", str, "")
    decision = _typed(output, "decision", str, "")
    reason = _typed(output, "reason", str, "")
    message = _typed(output, "systemMessage", str, "")
    _typed(output, "suppressOutput", bool, False)
    specific = _typed(output, "hookSpecificOutput", dict, {})
    named = _typed(specific, "hookEventName", str, event)
    if named != event:
        raise _Invalid(f"hookSpecificOutput.hookEventName is {named!r} in a {event} hook")
    permission = _typed(specific, "permissionDecision", str, "")
    permission_reason = _typed(specific, "permissionDecisionReason", str, "")
    updated = _typed(specific, "updatedInput", dict, None)
    context = _typed(specific, "additionalContext", str, "")
    if decision not in ("", "block", "approve"):
        raise _Invalid(f"decision must be 'block' (or the older 'approve'), not {decision!r}")
    if permission and (event != "PreToolUse" or permission not in DECISIONS):
        raise _Invalid(f"permissionDecision {permission!r} means nothing in a {event} hook")
    grant = _grant(specific) if event == "PermissionRequest" else None
    if decision == "approve" and event == "PreToolUse" and not permission:
        permission, permission_reason = "allow", reason
    block = None
    if permission == "deny":
        block = cap(permission_reason or reason) or "denied by a PreToolUse hook"
    elif decision == "block" and event != "SessionStart":
        block = cap(reason) or f"blocked by a {event} hook"
    return Said(
        "blocked" if block else "ok",
        block=block,
        decision=permission if permission in ("allow", "ask") else None,
        reason=permission_reason,
        updated_input=updated if event == "PreToolUse" and permission != "deny" else None,
        context=cap(context),
        stop=(stop_reason or f"a {event} hook said to stop") if go_on is False else None,
        note=message,
        grant=grant,
    )


def _grant(specific: dict[str, Any]) -> Grant | None:
    """A ``PermissionRequest`` answer's ``decision`` object; raises ``_Invalid`` for one that is not one."""
    decision = _typed(specific, "decision", dict, None)
    if decision is None:
        return None
    behavior = _typed(decision, "behavior", str, "")
    if behavior not in ("allow", "deny"):
        raise _Invalid(f"decision.behavior must be 'allow' or 'deny', not {behavior!r}")
    updated = _typed(decision, "updatedInput", dict, None)
    message = _typed(decision, "message", str, "")
    interrupt = _typed(decision, "interrupt", bool, False)
    if behavior == "allow":
        return Grant("allow", updated_input=updated)
    return Grant("deny", message=cap(message), interrupt=interrupt)


def _typed(source: dict[str, Any], key: str, kind: type, default: Any) -> Any:
    value = source.get(key, default)
    if value is None and default is None:
        return None
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise _Invalid(f"{key} must be {_KINDS[kind]}")
    return value


_KINDS = {bool: "true or false", str: "a string", dict: "an object"}


def cap(text: str) -> str:
    """``text``, cut to ``TEXT_CHARS`` with a line saying how much was cut."""
    if len(text) <= TEXT_CHARS:
        return text
    return f"{text[:TEXT_CHARS]}\n[... {len(text) - TEXT_CHARS:,} characters more cut]"


def _first_line(text: str) -> str:
    line = next((x.strip() for x in text.splitlines() if x.strip()), "")
    return line if len(line) <= 200 else line[:197] + "..."


@dataclass(frozen=True)
class Answer:
    """What the hooks of one event say together."""

    blocks: tuple[str, ...] = ()
    decision: str | None = None
    """``ask`` when any hook asks, else ``allow`` when any allows (a deny is among ``blocks``)."""
    reason: str = ""
    updated_input: dict[str, Any] | None = None
    """The first hook's (in the settings' order) that gives one."""
    contexts: tuple[str, ...] = ()
    stop: str | None = None
    not_run: tuple[str, ...] = ()
    """Why hooks that matched did not run (the sandbox refused them)."""
    grant: Grant | None = None
    """``PermissionRequest``: any hook's deny, else the first allow (in the settings' order)."""


def combine(saids: Sequence[Said]) -> Answer:
    """The answer of the hooks of one event: any block blocks, ``ask`` beats ``allow``."""
    decisions = [s.decision for s in saids if s.decision]
    decision = "ask" if "ask" in decisions else ("allow" if decisions else None)
    return Answer(
        blocks=tuple(s.block for s in saids if s.block),
        decision=decision,
        reason=next((s.reason for s in saids if s.decision == decision and s.reason), ""),
        updated_input=next((s.updated_input for s in saids if s.updated_input is not None), None),
        contexts=tuple(s.context for s in saids if s.context),
        stop=next((s.stop for s in saids if s.stop), None),
        not_run=tuple(s.note for s in saids if s.outcome == "not run"),
        grant=next((s.grant for s in saids if s.grant and s.grant.behavior == "deny"), None)
        or next((s.grant for s in saids if s.grant), None),
    )
