"""A bound on a hang, not a timing."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def within(seconds: float, call: Callable[[], T]) -> T:
    """``call()``, failing if it has not returned within ``seconds``: a bound on a hang, not a timing (what
    blocks is left in a daemon thread)."""
    returned: list[T] = []
    raised: list[BaseException] = []

    def target() -> None:
        try:
            returned.append(call())
        except BaseException as e:
            raised.append(e)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"blocked for more than {seconds} s"
    if raised:
        raise raised[0]
    return returned[0]
