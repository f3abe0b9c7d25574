"""The durable, watched filesystem mailbox.

Knows nothing of agents or models: names, directories, messages and wake-ups.
"""

from teamrt.mailbox.errors import (
    DuplicateId,
    InvalidMessage,
    InvalidName,
    MailboxError,
    MessageTooLarge,
    UnknownRecipient,
    UnsafePath,
)
from teamrt.mailbox.ids import is_id, new_id
from teamrt.mailbox.inbox import Inbox
from teamrt.mailbox.mailbox import Mailbox
from teamrt.mailbox.message import KINDS, MAX_MESSAGE_BYTES, SCHEMA_VERSION, Message
from teamrt.mailbox.names import check_name, is_name
from teamrt.mailbox.watcher import open_watcher

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
