"""Unique, sortable message ids (ULID layout: 48-bit milliseconds + 80 random bits).

Ids from one process are strictly increasing; ids from different processes
sort by their millisecond. They are 26 characters of Crockford base32.
"""

from __future__ import annotations

import re
import secrets
import threading
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
ID_RE = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")
_RANDOM_BITS = 80

_lock = threading.Lock()
_last_ms = -1
_last_rand = 0


def _encode(value: int) -> str:
    chars = []
    for _ in range(26):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def new_id() -> str:
    """Return a new id, greater than every id this process made before."""
    global _last_ms, _last_rand
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms <= _last_ms:
            # Same (or an earlier, after a clock step) millisecond: keep order.
            ms = _last_ms
            rand = _last_rand + 1
            if rand >> _RANDOM_BITS:
                ms, rand = ms + 1, secrets.randbits(_RANDOM_BITS - 1)
        else:
            rand = secrets.randbits(_RANDOM_BITS - 1)  # headroom for increments
        _last_ms, _last_rand = ms, rand
        return _encode((ms << _RANDOM_BITS) | rand)


def is_id(value: object) -> bool:
    return isinstance(value, str) and ID_RE.fullmatch(value) is not None
