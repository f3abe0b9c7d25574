"""The message schema (version 1) and its strict JSON form.

A message is one JSON object. Both sides validate it: the sender before it
writes, the receiver after it reads. Decoding is strict: UTF-8 only, no NaN
or Infinity, no duplicate keys, nesting bounded, no unknown fields.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from teamrt.mailbox.errors import InvalidMessage, MessageTooLarge
from teamrt.mailbox.ids import is_id, new_id
from teamrt.mailbox.names import check_name, is_name

SCHEMA_VERSION = 1
MAX_MESSAGE_BYTES = 256 * 1024
MAX_DEPTH = 32
MAX_SUMMARY_CHARS = 200

KINDS = frozenset(
    {
        "message",
        "result",
        "shutdown_request",
        "shutdown_response",
        "task_assigned",
        "permission_request",
        "permission_response",
        "control",
    }
)

FIELDS = (
    "v",
    "id",
    "run",
    "from",
    "to",
    "kind",
    "thread",
    "reply_to",
    "summary",
    "body",
    "data",
    "created_at",
    "epoch",
)


@dataclass(frozen=True, slots=True)
class Message:
    """One piece of mail. ``sender``/``recipient`` are ``from``/``to`` on disk."""

    id: str
    run: str
    sender: str
    recipient: str
    kind: str
    thread: str
    reply_to: str | None
    summary: str
    body: str
    data: dict[str, Any] = field(hash=False)
    created_at: str
    epoch: int

    @classmethod
    def compose(
        cls,
        *,
        run: str,
        sender: str,
        recipient: str,
        body: str,
        kind: str = "message",
        summary: str | None = None,
        thread: str | None = None,
        reply_to: str | None = None,
        data: dict[str, Any] | None = None,
        epoch: int = 0,
    ) -> Message:
        """A message with a fresh id (its own thread unless given one); validated when encoded."""
        msg_id = new_id()
        return cls(
            id=msg_id,
            run=run,
            sender=sender,
            recipient=recipient,
            kind=kind,
            thread=thread or msg_id,
            reply_to=reply_to,
            summary=preview(body) if summary is None else summary,
            body=body,
            data={} if data is None else data,
            created_at=datetime.now(UTC).isoformat(timespec="microseconds"),
            epoch=epoch,
        )

    def reply(self, body: str, *, kind: str = "message", epoch: int = 0, **extra: Any) -> Message:
        """A message from this one's recipient back to its sender, in the same thread."""
        return Message.compose(
            run=self.run,
            sender=self.recipient,
            recipient=self.sender,
            body=body,
            kind=kind,
            thread=self.thread,
            reply_to=self.id,
            epoch=epoch,
            **extra,
        )

    def readdressed(self, recipient: str) -> Message:
        """The same message for another recipient, with an id of its own."""
        check_name(recipient)
        new = new_id()
        return dataclasses.replace(
            self, id=new, recipient=recipient, thread=new if self.thread == self.id else self.thread
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "v": SCHEMA_VERSION,
            "id": self.id,
            "run": self.run,
            "from": self.sender,
            "to": self.recipient,
            "kind": self.kind,
            "thread": self.thread,
            "reply_to": self.reply_to,
            "summary": self.summary,
            "body": self.body,
            "data": self.data,
            "created_at": self.created_at,
            "epoch": self.epoch,
        }

    def encode(self) -> bytes:
        """The bytes of the message file; raises :class:`InvalidMessage`."""
        obj = self.to_dict()
        validate(obj, check_text=False)
        try:
            return _ENCODER.encode(obj).encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidMessage(_SURROGATE) from None

    @classmethod
    def decode(cls, raw: bytes) -> Message:
        """Parse and validate message bytes; raises :class:`InvalidMessage`."""
        if len(raw) > MAX_MESSAGE_BYTES:
            raise MessageTooLarge(len(raw), MAX_MESSAGE_BYTES)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InvalidMessage(f"not UTF-8 (byte {e.start})") from None
        try:
            obj = json.loads(
                text, object_pairs_hook=_object_without_duplicates, parse_constant=_reject_constant
            )
        except InvalidMessage:
            raise
        except RecursionError:
            raise InvalidMessage(f"nested deeper than {MAX_DEPTH} levels") from None
        except json.JSONDecodeError as e:
            raise InvalidMessage(f"not JSON ({e.msg}, line {e.lineno} column {e.colno})") from None
        except ValueError as e:  # an int past Python's digit limit, or a hook's refusal
            raise InvalidMessage(str(e)) from None
        # Only a \u escape can smuggle a lone surrogate past strict UTF-8.
        validate(obj, check_text=b"\\u" in raw)
        return cls(
            id=obj["id"],
            run=obj["run"],
            sender=obj["from"],
            recipient=obj["to"],
            kind=obj["kind"],
            thread=obj["thread"],
            reply_to=obj["reply_to"],
            summary=obj["summary"],
            body=obj["body"],
            data=obj["data"],
            created_at=obj["created_at"],
            epoch=obj["epoch"],
        )


def preview(body: str, limit: int = 120) -> str:
    """A one-line summary of a body."""
    line = " ".join(body.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def validate(obj: object, *, check_text: bool = True) -> None:
    """Raise :class:`InvalidMessage` unless ``obj`` is a schema-1 message object.

    ``check_text=False`` skips the search for lone surrogates, for callers
    that find them another way (encoding to UTF-8 fails on them).
    """
    if not isinstance(obj, dict):
        raise InvalidMessage("not a JSON object")
    if obj.get("v") != SCHEMA_VERSION or type(obj.get("v")) is not int:
        raise InvalidMessage(
            f"unsupported schema version {obj.get('v')!r} (this reader knows {SCHEMA_VERSION})"
        )
    missing = [f for f in FIELDS if f not in obj]
    if missing:
        raise InvalidMessage(f"missing field(s): {', '.join(missing)}")
    unknown = sorted(set(obj) - set(FIELDS))
    if unknown:
        raise InvalidMessage(f"unknown field(s): {', '.join(map(repr, unknown[:5]))}")
    if not is_id(obj["id"]):
        raise InvalidMessage("'id' is not a message id")
    for key, what in (("run", "run"), ("from", "agent"), ("to", "agent")):
        if not is_name(obj[key]):
            raise InvalidMessage(f"'{key}' is not a valid {what} name")
    if obj["kind"] not in KINDS:
        raise InvalidMessage(f"'kind' must be one of {', '.join(sorted(KINDS))}")
    if not is_id(obj["thread"]):
        raise InvalidMessage("'thread' is not a message id")
    if obj["reply_to"] is not None and not is_id(obj["reply_to"]):
        raise InvalidMessage("'reply_to' is neither null nor a message id")
    if not isinstance(obj["summary"], str) or len(obj["summary"]) > MAX_SUMMARY_CHARS:
        raise InvalidMessage(f"'summary' must be a string of at most {MAX_SUMMARY_CHARS} characters")
    if not isinstance(obj["body"], str):
        raise InvalidMessage("'body' must be a string")
    if not isinstance(obj["data"], dict):
        raise InvalidMessage("'data' must be an object")
    epoch = obj["epoch"]
    if type(epoch) is not int or not 0 <= epoch < 2**63:
        raise InvalidMessage("'epoch' must be a non-negative integer")
    if not _is_timestamp(obj["created_at"]):
        raise InvalidMessage("'created_at' must be an ISO 8601 time with a UTC offset")
    if check_text:
        for key in ("summary", "body"):
            _check_text(obj[key])
    _check_values(obj["data"], check_text)


def _check_values(data: dict[str, Any], check_text: bool) -> None:
    """``data`` is plain JSON: str keys, finite numbers, depth bounded (and valid text)."""
    stack: list[tuple[Any, int]] = [(data, 2)]  # the message object is level 1
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            if check_text:
                _check_text(value)
        elif isinstance(value, dict):
            if depth > MAX_DEPTH:
                raise InvalidMessage(f"nested deeper than {MAX_DEPTH} levels")
            for key, item in value.items():
                if not isinstance(key, str):
                    raise InvalidMessage("object keys must be strings")
                if check_text:
                    _check_text(key)
                stack.append((item, depth + 1))
        elif isinstance(value, list):
            if depth > MAX_DEPTH:
                raise InvalidMessage(f"nested deeper than {MAX_DEPTH} levels")
            stack.extend((item, depth + 1) for item in value)
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise InvalidMessage("numbers must be finite (no NaN or Infinity)")
        elif value is not None and not isinstance(value, int):  # bool is an int
            raise InvalidMessage(f"{type(value).__name__} is not a JSON value")


_SURROGATE = "text holds a lone surrogate, which is not valid UTF-8"


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidMessage(_SURROGATE) from None


def _is_timestamp(value: object) -> bool:
    if not isinstance(value, str) or len(value) > 40:
        return False
    try:
        return datetime.fromisoformat(value).tzinfo is not None
    except ValueError:
        return False


def _object_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise InvalidMessage(f"duplicate key {key[:40]!r}")
        obj[key] = value
    return obj


def _reject_constant(name: str) -> None:
    raise InvalidMessage(f"{name} is not allowed (strict JSON)")


_DECODER = json.JSONDecoder(object_pairs_hook=_object_without_duplicates, parse_constant=_reject_constant)
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
