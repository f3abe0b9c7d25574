"""The durable, watched filesystem mailbox.

Knows nothing of agents or models: names, directories, messages and wake-ups.
"""

from .errors import (
    DuplicateId,
    InvalidMessage,
    InvalidName,
    MailboxError,
    MessageTooLarge,
    UnknownRecipient,
    UnsafePath,
)
from .ids import is_id, new_id
from .inbox import Inbox
from .mailbox import Mailbox
from .message import KINDS, MAX_MESSAGE_BYTES, SCHEMA_VERSION, Message
from .names import check_name, is_name
from .watcher import open_watcher

__all__ = [
    "KINDS",
    "MAX_MESSAGE_BYTES",
    "SCHEMA_VERSION",
    "DuplicateId",
    "Inbox",
    "InvalidMessage",
    "InvalidName",
    "Mailbox",
    "MailboxError",
    "Message",
    "MessageTooLarge",
    "UnknownRecipient",
    "UnsafePath",
    "check_name",
    "is_id",
    "is_name",
    "new_id",
    "open_watcher",
]
