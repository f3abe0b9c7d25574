"""Signatures of simulated thinking blocks, and the sealed contents of web search results.

Like the real API, the simulator signs each thinking block it emits and
rejects a request whose thinking block does not carry its signature, so a
single changed byte in a block teamrt replays (in a turn, a fork or after a
resume) fails loudly. The signature depends only on the model and the text, so
a later process (a resumed run) accepts blocks an earlier one signed. Web
search results and citations carry sealed tokens the same way.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

_DOMAIN = b"teamrt-sim-thinking\0"


def signature_for(model: str, thinking: str) -> str:
    digest = hashlib.sha256(_DOMAIN + model.encode() + b"\0" + thinking.encode()).digest()
    return base64.b64encode(digest * 3).decode()


def redacted_data(model: str, thinking: str) -> str:
    """The ``data`` of a ``redacted_thinking`` block: the thinking, sealed with the model that wrote it."""
    return seal({"model": model, "redacted_thinking": thinking})


def redacted_model(data: Any) -> str | None:
    """The model that wrote a ``redacted_thinking`` block's ``data``, or None when the simulator did not."""
    fields = unseal(data)
    return fields.get("model") if fields is not None and "redacted_thinking" in fields else None


_SEAL_DOMAIN = b"teamrt-sim-web-search\0"


def seal(fields: dict[str, Any]) -> str:
    """``fields`` as an opaque token the simulator can read back and check, like the API's
    ``encrypted_content`` and ``encrypted_index``: the data, then a hash over it."""
    data = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    mac = hashlib.sha256(_SEAL_DOMAIN + data).digest()[:24]
    return base64.urlsafe_b64encode(data).decode() + "." + base64.urlsafe_b64encode(mac).decode()


def unseal(token: Any) -> dict[str, Any] | None:
    """The fields ``seal`` sealed in ``token``, or None when it was not made by ``seal`` or was changed."""
    if not isinstance(token, str) or token.count(".") != 1:
        return None
    data_part, mac_part = token.split(".")
    try:
        data = base64.urlsafe_b64decode(data_part.encode("ascii"))
        mac = base64.urlsafe_b64decode(mac_part.encode("ascii"))
    except (ValueError, UnicodeEncodeError):
        return None
    if not hmac.compare_digest(mac, hashlib.sha256(_SEAL_DOMAIN + data).digest()[:24]):
        return None
    if base64.urlsafe_b64encode(data).decode() != data_part:  # one token per content, no variants
        return None
    fields = json.loads(data)
    return fields if isinstance(fields, dict) else None
