"""Signatures of simulated thinking blocks.

Like the real API, the simulator signs each thinking block it emits and
rejects a request whose thinking block does not carry its signature, so a
single changed byte in a block teamrt replays (in a turn, a fork or after a
resume) fails loudly. The signature depends only on the model and the text, so
a later process (a resumed run) accepts blocks an earlier one signed.
"""

from __future__ import annotations

import base64
import hashlib

_DOMAIN = b"teamrt-sim-thinking\0"


def signature_for(model: str, thinking: str) -> str:
    digest = hashlib.sha256(_DOMAIN + model.encode() + b"\0" + thinking.encode()).digest()
    return base64.b64encode(digest * 3).decode()
