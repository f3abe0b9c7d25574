"""Signatures of simulated thinking blocks, and the sealed contents of web search results.

Like the real API, the simulator signs each thinking block it emits and
rejects a request whose thinking block does not carry its signature, so a
single changed byte in a block teamrt replays (in a turn, a fork or after a
resume) fails loudly. A signature seals the model that wrote the block, a
digest of its text and the digest of its prefix (``teamrt.sim.binding``: the
system prompt, the tools and every block before it), so the sim can run the
API's model and prefix checks on it. Signatures depend only on what they seal,
so a later process (a resumed run) accepts blocks an earlier one signed. Web
search results and citations carry sealed tokens the same way.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ThinkingSeal:
    """What a thinking block's ``signature`` (or a ``redacted_thinking`` block's ``data``) says of it."""

    model: str
    """The Claude model that wrote the block."""
    prefix: str
    """The hex digest of the block's prefix when it was written (``binding.PrefixChain``)."""
    text: str
    """The hex digest of the thinking text (a redacted block: of its hidden text)."""


def text_digest(thinking: str) -> str:
    return hashlib.sha256(b"teamrt-sim-thinking\0" + thinking.encode()).hexdigest()[:24]


def signature_for(model: str, thinking: str, prefix: str) -> str:
    """The ``signature`` of a thinking block ``model`` wrote with ``thinking`` after ``prefix`` (short
    keys: a signature is sent back with every turn)."""
    return seal({"k": "t", "m": model, "p": prefix, "t": text_digest(thinking)})


def redacted_data(model: str, thinking: str, prefix: str) -> str:
    """The ``data`` of a ``redacted_thinking`` block: the hidden thinking, sealed with the model that wrote
    it and its prefix."""
    fields = {"kind": "redacted_thinking", "model": model, "prefix": prefix, "redacted_thinking": thinking}
    return seal(fields)


def read_signature(block: dict[str, Any]) -> ThinkingSeal | None:
    """What the seal of a ``thinking`` or ``redacted_thinking`` block says, or None when the simulator did
    not make it, it was changed, or (a thinking block) its text is not the text it was signed with."""
    if block.get("type") == "thinking":
        short = unseal(block.get("signature"))
        if (
            short is None
            or short.get("k") != "t"
            or short.get("t") != text_digest(str(block.get("thinking", "")))
        ):
            return None
        fields: dict[str, Any] = {"model": short.get("m"), "prefix": short.get("p"), "text": short["t"]}
    else:
        sealed = unseal(block.get("data"))
        if sealed is None or sealed.get("kind") != "redacted_thinking":
            return None
        fields = {**sealed, "text": text_digest(str(sealed.get("redacted_thinking", "")))}
    model, prefix = fields.get("model"), fields.get("prefix")
    if not isinstance(model, str) or not isinstance(prefix, str):
        return None
    return ThinkingSeal(model, prefix, str(fields["text"]))


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
