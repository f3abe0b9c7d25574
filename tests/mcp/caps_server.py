"""A hand-written stdio MCP server for tests/mcp/test_mcp_client_caps.py: it sends the client whatever a test
asks (requests, notifications, floods), including what the SDK's server side would refuse to build, so that
teamrt's client capabilities meet hostile input. One JSON-RPC message per line; calls handled one at a time.

Tools: ``caps`` (the client capabilities the initialize request declared), ``ask`` (sends the client the
request ``method`` with ``params`` and returns its answer as JSON text), ``burst`` (``count`` such requests at
once, their answers as a JSON list), ``progress`` (``count`` progress
notifications on the call's token), ``log`` (``count`` log messages), ``toggle`` (adds or removes the tool
``extra``, then says ``tools/list_changed`` ``count`` times; the next ``tools/list`` is answered
``list_delay`` seconds late), ``sleep`` (``seconds``), ``extra`` (when on).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

state: dict[str, Any] = {"caps": None, "extra": False, "next": 1000}


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def read() -> dict[str, Any] | None:
    line = sys.stdin.readline()
    if not line:
        return None
    return json.loads(line) if line.strip() else {}


def ask(method: str, params: dict[str, Any]) -> Any:
    """Send the client a request and wait for its answer (messages meanwhile are ignored)."""
    state["next"] += 1
    rid = state["next"]
    send({"id": rid, "method": method, "params": params})
    while True:
        message = read()
        if message is None:
            sys.exit(0)
        if message.get("id") == rid and "method" not in message:
            return message.get("result", {"error": message.get("error")})


def tools() -> list[dict[str, Any]]:
    schema = {"type": "object", "properties": {}, "additionalProperties": True}
    names = ["caps", "ask", "burst", "progress", "log", "toggle", "sleep"] + (
        ["extra"] if state["extra"] else []
    )
    return [{"name": n, "description": f"the {n} tool", "inputSchema": schema} for n in names]


def call(name: str, args: dict[str, Any], token: Any) -> str:
    if name == "caps":
        return json.dumps(state["caps"])
    if name == "ask":
        return json.dumps(ask(args["method"], args.get("params", {})))
    if name == "burst":  # ``count`` requests at once, then every answer, in the order they come
        ids = []
        for _ in range(int(args.get("count", 2))):
            state["next"] += 1
            ids.append(state["next"])
            send({"id": state["next"], "method": args["method"], "params": args.get("params", {})})
        answers: dict[int, Any] = {}
        while len(answers) < len(ids):
            message = read()
            if message is None:
                sys.exit(0)
            if message.get("id") in ids and "method" not in message:
                answers[message["id"]] = message.get("result", {"error": message.get("error")})
        return json.dumps([answers[i] for i in ids])
    if name == "progress":
        for i in range(int(args.get("count", 3))):
            params = {
                "progressToken": token,
                "progress": i + 1,
                "total": args.get("total", args.get("count", 3)),
                "message": args.get("message", f"step {i + 1}"),
            }
            send({"method": "notifications/progress", "params": params})
            time.sleep(float(args.get("gap", 0)))
        return "progressed"
    if name == "log":
        for i in range(int(args.get("count", 1))):
            data = args.get("data", f"{args.get('text', 'line')} {i}")
            send(
                {
                    "method": "notifications/message",
                    "params": {"level": args.get("level", "info"), "logger": "caps", "data": data},
                }
            )
        return "logged"
    if name == "toggle":
        state["extra"] = not state["extra"]
        state["list_delay"] = float(args.get("list_delay", 0))
        for _ in range(int(args.get("count", 1))):
            send({"method": "notifications/tools/list_changed"})
        return f"extra is {'on' if state['extra'] else 'off'}"
    if name == "sleep":
        time.sleep(float(args.get("seconds", 1)))
        return "slept"
    if name == "extra" and state["extra"]:
        return "extra here"
    raise KeyError(name)


def main() -> None:
    while True:
        message = read()
        if message is None:
            return
        method, rid, params = message.get("method"), message.get("id"), message.get("params") or {}
        if method == "initialize":
            state["caps"] = params.get("capabilities")
            send(
                {
                    "id": rid,
                    "result": {
                        "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                        "capabilities": {"tools": {"listChanged": True}, "logging": {}},
                        "serverInfo": {"name": "caps", "version": "1"},
                    },
                }
            )
        elif method == "tools/list":
            time.sleep(state.pop("list_delay", 0))  # a server slow to list its tools again (toggle)
            send({"id": rid, "result": {"tools": tools()}})
        elif method == "tools/call":
            token = (params.get("_meta") or {}).get("progressToken")
            try:
                text = call(params["name"], params.get("arguments") or {}, token)
                send({"id": rid, "result": {"content": [{"type": "text", "text": text}]}})
            except KeyError as e:
                send({"id": rid, "error": {"code": -32602, "message": f"no tool {e}"}})
        elif rid is not None and method is not None:
            if method == "ping":
                send({"id": rid, "result": {}})
            else:
                send({"id": rid, "error": {"code": -32601, "message": f"no method {method}"}})


if __name__ == "__main__":
    main()
