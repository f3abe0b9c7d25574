"""The ``TodoWrite`` tool: an agent's own task list, as Claude Code keeps it.

Each call sends the whole list, which replaces the one before. teamrt keeps
it as a ``todos`` event of the agent (``TodoSink``, the supervisor), so
``teamrt show`` and the TUI can display what each agent is doing; the list
changes no file and runs no program, so it needs no permission.
"""

from __future__ import annotations

from typing import Any, Final, Protocol

from teamrt.tools.base import ToolContext, ToolError, ToolResult, object_schema

TODOS_EVENT: Final = "todos"
"""The event holding an agent's latest list: ``{"todos": [{content, status, activeForm}, ...]}``."""
STATUSES = ("pending", "in_progress", "completed")
TODO_ITEMS = 100
TODO_CHARS = 1000
"""Longest content or activeForm of one todo."""


class TodoSink(Protocol):
    """Where an agent's list is kept."""

    async def record_todos(self, agent: str, todos: list[dict[str, str]]) -> None: ...


class TodoWrite:
    name = "TodoWrite"
    description = (
        "Keep your task list for the work in hand, to plan it and show your progress. Send the whole list"
        " each time: it replaces the one before. Each todo has content (the step, in the imperative: 'Run"
        " the tests'), activeForm (the same in the present continuous: 'Running the tests') and a status:"
        " pending, in_progress or completed. Keep exactly one in_progress while you work and mark each"
        " completed as soon as it is done. Use it for work of three steps or more, not for a single step."
    )
    input_schema = object_schema(
        {
            "todos": {
                "type": "array",
                "description": "The whole updated list.",
                "items": object_schema(
                    {
                        "content": {"type": "string", "minLength": 1},
                        "status": {"type": "string", "enum": list(STATUSES)},
                        "activeForm": {"type": "string", "minLength": 1},
                    },
                    "content",
                    "status",
                    "activeForm",
                ),
            }
        },
        "todos",
    )
    read_only = True

    def __init__(self, sink: TodoSink) -> None:
        self.sink = sink

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        todos = _todos(input.get("todos"))
        await self.sink.record_todos(ctx.agent, todos)
        counts = {s: sum(1 for t in todos if t["status"] == s) for s in STATUSES}
        if not todos:
            return ToolResult("todo list cleared")
        said = ", ".join(f"{n} {s.replace('_', ' ')}" for s, n in counts.items() if n)
        return ToolResult(f"todo list saved: {len(todos)} todo(s), {said}. Keep it current as you work.")


def _todos(value: Any) -> list[dict[str, str]]:
    """The list as sent, checked; each todo keeps only content, status and activeForm (older Claude Code
    lists also carry id and priority, which are left out)."""
    if not isinstance(value, list) or len(value) > TODO_ITEMS:
        raise ToolError(f"TodoWrite: todos must be a list of at most {TODO_ITEMS} todos")
    todos = []
    for i, todo in enumerate(value, 1):
        if not isinstance(todo, dict):
            raise ToolError(f"TodoWrite: todo {i} must be an object with content, status and activeForm")
        status = todo.get("status")
        if status not in STATUSES:
            raise ToolError(f"TodoWrite: todo {i}: status must be one of {', '.join(STATUSES)}")
        kept = {"content": _text(todo, i, "content"), "status": status}
        if "activeForm" in todo:
            kept["activeForm"] = _text(todo, i, "activeForm")
        todos.append(kept)
    return todos


def _text(todo: dict[str, Any], i: int, key: str) -> str:
    value = todo.get(key)
    if not isinstance(value, str) or not value.strip() or len(value) > TODO_CHARS:
        raise ToolError(
            f"TodoWrite: todo {i}: {key} must be a non-empty string of at most {TODO_CHARS} characters"
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ToolError(
            f"TodoWrite: todo {i}: {key} holds a lone surrogate, which is not valid Unicode"
        ) from e
    return value
