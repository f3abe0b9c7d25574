"""Errors raised to senders and owners of a mailbox.

Each carries its facts in fields, so callers branch on fields, never on text.
"""

from __future__ import annotations

from teamrt.errors import UserError


class MailboxError(UserError):
    """Base class for every mailbox error: each names a file, a name or a message the person can see to,
    in one line (the CLI tells every one so)."""


class InvalidName(MailboxError, ValueError):
    """An agent or run name outside the allowlist pattern."""

    def __init__(self, name: str, what: str = "agent") -> None:
        self.name = name
        self.what = what
        shown = name if len(name) <= 40 else name[:40] + "..."
        super().__init__(
            f"invalid {what} name {shown!r}: use 1-64 characters of a-z, 0-9, '-' and '_',"
            " starting with a letter or digit"
        )


class UnknownRecipient(MailboxError):
    """Mail addressed to an agent that has no mailbox in this run."""

    def __init__(self, run: str, name: str) -> None:
        self.run = run
        self.name = name
        super().__init__(f"no agent named {name!r} in run {run!r}; mail was not delivered")


class UnsafePath(MailboxError):
    """A mailbox directory that is a symlink, not a directory, or escapes the root."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"refusing mailbox path {path}: {reason}")


class InvalidMessage(MailboxError, ValueError):
    """A message that breaks the schema or the strict-JSON rules."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"invalid message: {reason}")


class MessageTooLarge(InvalidMessage):
    """An encoded message over the size cap, with no spill directory to take the body."""

    def __init__(self, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(f"{size} bytes encoded, over the {limit}-byte cap")


class DuplicateId(MailboxError):
    """A different message already holds this id in the recipient's mailbox."""

    def __init__(self, msg_id: str, recipient: str) -> None:
        self.msg_id = msg_id
        self.recipient = recipient
        super().__init__(f"message id {msg_id} is already used by another message to {recipient!r}")
