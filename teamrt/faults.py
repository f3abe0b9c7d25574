"""Named fault points.

Code that must survive a failure at a precise moment calls ``point(name)``
there, with a detail that says which (a tool call's id, a message id); a
test registers a hook under that name (raise ``OSError(ENOSPC)``, block
until released, SIGKILL the process) with ``inject``. With no hook an
unregistered point costs one dictionary lookup.

The points: ``store.before_commit``, ``store.after_commit``, ``tool.before``
and ``tool.after`` (a call id), ``mail.written`` (in ``tmp/``, not yet in
``new/``) and ``mail.delivered`` (a message id), ``merge.merged`` (merged in
the queue's worktree, gates not run), ``merge.before_ref`` and
``merge.after_ref`` (the integration branch moved, not yet recorded).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

Hook = Callable[[str], None]
"""Called with the point's detail."""
_hooks: dict[str, Hook] = {}


def point(name: str, detail: str = "") -> None:
    """Run the hook registered for ``name``, if any."""
    hook = _hooks.get(name)
    if hook is not None:
        hook(detail)


@contextmanager
def inject(name: str, hook: Hook) -> Iterator[None]:
    """Run ``hook`` at every ``point(name)`` inside the block."""
    if name in _hooks:
        raise RuntimeError(f"a fault is already injected at {name!r}")
    _hooks[name] = hook
    try:
        yield
    finally:
        del _hooks[name]
