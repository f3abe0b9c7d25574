"""The run store: SQLite through SQLAlchemy, one writer per run.

Knows nothing of agents' behaviour or of models: rows in, records out.
"""

from teamrt.store.errors import (
    InvalidTransition,
    NotFound,
    RunExists,
    RunNotFound,
    RunOwned,
    RunTakenOver,
    SchemaTooNew,
    SchemaTooOld,
    StoreClosed,
    StoreError,
    StoreWriteFailed,
    TaskUnavailable,
)
from teamrt.store.ownership import owner_alive
from teamrt.store.reader import StoreReader, open_reader
from teamrt.store.records import (
    AgentRecord,
    EventRecord,
    FinishedCall,
    IngestedMail,
    MailRecord,
    MergeRecord,
    NewEvent,
    Owner,
    ProcessRecord,
    RunRecord,
    SteeringRecord,
    TaskRecord,
    ToolCallRecord,
    ToolUse,
    TurnRecord,
    Usage,
)
from teamrt.store.store import Store, create_store, open_store

__all__ = [
    "AgentRecord",
    "EventRecord",
    "FinishedCall",
    "IngestedMail",
    "InvalidTransition",
    "MailRecord",
    "MergeRecord",
    "NewEvent",
    "NotFound",
    "Owner",
    "ProcessRecord",
    "RunExists",
    "RunNotFound",
    "RunOwned",
    "RunRecord",
    "RunTakenOver",
    "SchemaTooNew",
    "SchemaTooOld",
    "SteeringRecord",
    "Store",
    "StoreClosed",
    "StoreError",
    "StoreReader",
    "StoreWriteFailed",
    "TaskRecord",
    "TaskUnavailable",
    "ToolCallRecord",
    "ToolUse",
    "TurnRecord",
    "Usage",
    "create_store",
    "open_reader",
    "open_store",
    "owner_alive",
]
