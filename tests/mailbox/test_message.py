"""The message schema and its strict JSON: valid mail round-trips, hostile bytes are refused."""

from __future__ import annotations

import json
from typing import Any

import pytest

from teamrt.mailbox import InvalidMessage, Message, MessageTooLarge, is_id, new_id
from teamrt.mailbox.message import MAX_DEPTH, MAX_MESSAGE_BYTES


def sample(**changes: Any) -> dict[str, Any]:
    obj = Message.compose(run="run1", sender="lead", recipient="alice", body="hi", data={"n": 1}).to_dict()
    obj.update(changes)
    return obj


def raw(obj: object) -> bytes:
    return json.dumps(obj).encode()


def test_round_trip_keeps_every_field() -> None:
    msg = Message.compose(
        run="run1",
        sender="lead",
        recipient="alice",
        body="é ✓ 日本",
        kind="task_assigned",
        data={"a": [1, 2.5, None]},
    )
    back = Message.decode(msg.encode())
    assert back == msg
    assert json.loads(msg.encode())["from"] == "lead"
    assert msg.thread == msg.id and msg.reply_to is None and msg.summary == "é ✓ 日本"


def test_reply_keeps_the_thread() -> None:
    first = Message.compose(run="run1", sender="lead", recipient="alice", body="q")
    answer = first.reply("a", kind="result")
    again = answer.reply("thanks")
    assert (answer.sender, answer.recipient, answer.reply_to) == ("alice", "lead", first.id)
    assert answer.thread == again.thread == first.id


def test_ids_are_unique_and_increasing() -> None:
    ids = [new_id() for _ in range(20_000)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    assert all(is_id(i) for i in ids[:100])


HOSTILE = [
    (b'{"v":1,"v":1}', "duplicate key 'v'"),
    (raw(sample()).replace(b'"n": 1', b'"n": NaN'), "NaN is not allowed"),
    (raw(sample()).replace(b'"n": 1', b'"n": -Infinity'), "-Infinity is not allowed"),
    (raw(sample()).replace(b'"n": 1', b'"n": 1e400'), "finite"),
    (b"[" * 10_000 + b"]" * 10_000, "nested deeper"),
    (raw(sample(data={"x": "y"})).replace(b'"y"', b"[" * MAX_DEPTH + b"]" * MAX_DEPTH), "nested deeper"),
    (b'{"v": 1, "body": "\xff"}', "not UTF-8"),
    (raw(sample(body="\ud800")), "lone surrogate"),
    (b"{not json", "not JSON"),
    (b"[]", "not a JSON object"),
    (raw(sample(v=2)), "unsupported schema version 2"),
    (raw(sample(v=True)), "unsupported schema version True"),
    (raw({k: v for k, v in sample().items() if k != "body"}), "missing field(s): body"),
    (raw(sample(extra=1)), "unknown field(s): 'extra'"),
    (raw(sample(id="../../etc")), "'id' is not a message id"),
    (raw(sample(to="../x")), "'to' is not a valid agent name"),
    (raw(sample(**{"from": "a/b"})), "'from' is not a valid agent name"),
    (raw(sample(kind="exec")), "'kind' must be one of"),
    (raw(sample(epoch=-1)), "'epoch' must be a non-negative integer"),
    (raw(sample(epoch=1.5)), "'epoch' must be a non-negative integer"),
    (raw(sample(created_at="yesterday")), "'created_at'"),
    (raw(sample(created_at="2026-01-01T00:00:00")), "'created_at'"),
    (raw(sample(summary="x" * 201)), "'summary'"),
    (raw(sample(reply_to=5)), "'reply_to'"),
    (raw(sample(data=[])), "'data' must be an object"),
    (b'{"epoch": ' + b"9" * 5000 + b"}", "digits"),
]


@pytest.mark.parametrize(("payload", "reason"), HOSTILE, ids=[reason for _, reason in HOSTILE])
@pytest.mark.hostile
def test_hostile_bytes_are_refused_with_a_reason(payload: bytes, reason: str) -> None:
    with pytest.raises(InvalidMessage) as info:
        Message.decode(payload)
    assert reason in info.value.reason


@pytest.mark.hostile
def test_oversized_bytes_are_refused_before_parsing() -> None:
    with pytest.raises(MessageTooLarge) as info:
        Message.decode(b" " * (MAX_MESSAGE_BYTES + 1))
    assert info.value.size == MAX_MESSAGE_BYTES + 1


def test_sender_side_validation() -> None:
    def encode(**fields: Any) -> bytes:
        return Message.compose(
            **{"run": "run1", "sender": "lead", "recipient": "alice", "body": "x", **fields}
        ).encode()

    with pytest.raises(InvalidMessage, match="finite"):
        encode(data={"f": float("nan")})
    with pytest.raises(InvalidMessage, match="keys must be strings"):
        encode(data={1: "int key"})
    with pytest.raises(InvalidMessage, match="not a JSON value"):
        encode(data={"s": {1, 2}})
    with pytest.raises(InvalidMessage, match="'to' is not a valid agent name"):
        encode(recipient=".hidden")
    with pytest.raises(InvalidMessage, match="'kind' must be one of"):
        encode(kind="exec")
