"""Named fault points.

Code that must survive a failure at a precise moment calls ``point(name)``
there; a test registers a hook under that name (raise ``OSError(ENOSPC)``,
block until released, SIGKILL the process) with ``inject``. With no hook an
unregistered point costs one dictionary lookup.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

_hooks: dict[str, Callable[[], None]] = {}


def point(name: str) -> None:
    """Run the hook registered for ``name``, if any."""
    hook = _hooks.get(name)
    if hook is not None:
        hook()


@contextmanager
def inject(name: str, hook: Callable[[], None]) -> Iterator[None]:
    """Run ``hook`` at every ``point(name)`` inside the block."""
    if name in _hooks:
        raise RuntimeError(f"a fault is already injected at {name!r}")
    _hooks[name] = hook
    try:
        yield
    finally:
        del _hooks[name]
