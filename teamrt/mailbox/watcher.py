"""Wake-up hints for mailboxes: watchdog's inotify layer, or its polling observer.

A watcher calls ``on_change()`` from its own thread when something may have
arrived in a watched ``new/`` directory. A hint is only a hint: the inbox
scans ``new/`` itself, at start, on a timer and after every hint, so a lost
or spurious event costs nothing but a scan.

Departure from DESIGN.md ("watch each agent's whole mailbox directory"):
that rule exists because watchdog's *Observer* holds an unpaired move out of
a watched directory for 0.5 s, which would stall the next wake after an
acknowledgement. teamrt uses watchdog's inotify layer (``InotifyFD``) under
the Observer instead: one inotify descriptor and one thread for every
mailbox of the process (the Observer starts a thread per watch), a single
thread hop to the event loop (the Observer makes three), no move pairing at
all, and the kernel's queue overflow reported through
``WatchCallback.on_queue_overflow`` (the Observer only logs it). Without
the pairing delay there is nothing to gain from watching ``tmp/``, ``cur/``
and ``bad/``, and their events would only fill the kernel queue sooner;
``test_wake_after_ack_is_fast`` pins the property the rule was for.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from watchdog.observers.inotify_c import InotifyEvent, WatchDescriptor

log = logging.getLogger(__name__)

POLL_INTERVAL = 0.1
WATCHER_ENV = "TEAMRT_WATCHER"


class Watcher(Protocol):
    kind: str

    def watch(self, path: str, on_change: Callable[[], None], on_overflow: Callable[[], None]) -> object:
        """Start calling ``on_change`` on changes in directory ``path``; returns a handle."""

    def unwatch(self, handle: object) -> None: ...

    def close(self) -> None: ...


class _InotifyCallback:
    """watchdog's ``WatchCallback`` protocol; called on the inotify thread, never raises."""

    def __init__(self, on_change: Callable[[], None], on_overflow: Callable[[], None]) -> None:
        self._on_change = on_change
        self._on_overflow = on_overflow

    def on_event(self, event: InotifyEvent) -> None:
        _call(self._on_change)

    def on_watch_deleted(self, wd: WatchDescriptor) -> None:
        _call(self._on_change)  # the directory went away: let the inbox find out

    def on_queue_overflow(self) -> None:
        _call(self._on_overflow)


def _call(fn: Callable[[], None]) -> None:
    try:
        fn()
    except Exception:  # a raising callback would end the shared inotify thread
        log.exception("mailbox watch callback failed")


class InotifyWatcher:
    """All watches of the process on one inotify descriptor and one thread."""

    kind = "inotify"

    def __init__(self) -> None:
        from watchdog.observers.inotify_c import InotifyConstants, InotifyFD, Mask

        self._mask = Mask(
            InotifyConstants.IN_CREATE
            | InotifyConstants.IN_MOVED_TO
            | InotifyConstants.IN_ONLYDIR
            | InotifyConstants.IN_DONT_FOLLOW
        )
        self._fd = InotifyFD()
        self._fd.start()
        self._fallback: PollingWatcher | None = None
        self._lock = threading.Lock()

    def watch(self, path: str, on_change: Callable[[], None], on_overflow: Callable[[], None]) -> object:
        from watchdog.observers.inotify_c import CallbackId

        callback = _InotifyCallback(on_change, on_overflow)
        callback_id = CallbackId(id(callback))
        try:
            wd = self._fd.add_callback(os.fsencode(path), self._mask, callback, callback_id)
        except OSError as e:  # the watch limit, or a filesystem without inotify
            return ("poll", self._polling(e).watch(path, on_change, on_overflow))
        return ("inotify", wd, callback_id, callback)

    def _polling(self, error: OSError) -> PollingWatcher:
        with self._lock:
            if self._fallback is None:
                log.warning(
                    "inotify watch refused (%s); polling those mailboxes every %.2fs",
                    error,
                    POLL_INTERVAL,
                )
                self._fallback = PollingWatcher()
            return self._fallback

    def unwatch(self, handle: object) -> None:
        assert isinstance(handle, tuple)
        if handle[0] == "poll":
            assert self._fallback is not None
            self._fallback.unwatch(handle[1])
        else:
            self._fd.remove_callbacks([(handle[1], handle[2])])

    def close(self) -> None:
        self._fd.stop()
        self._fd.join(timeout=5)
        if self._fallback is not None:
            self._fallback.close()


class PollingWatcher:
    """watchdog's polling observer: for filesystems that do not report changes."""

    kind = "poll"

    def __init__(self) -> None:
        from watchdog.observers.polling import PollingObserver

        self._observer = PollingObserver(timeout=POLL_INTERVAL)
        self._observer.start()

    def watch(self, path: str, on_change: Callable[[], None], on_overflow: Callable[[], None]) -> object:
        from watchdog.events import FileSystemEvent, FileSystemEventHandler

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: FileSystemEvent) -> None:
                _call(on_change)

        return self._observer.schedule(Handler(), path, recursive=False)

    def unwatch(self, handle: object) -> None:
        self._observer.unschedule(handle)  # type: ignore[arg-type]

    def close(self) -> None:
        self._observer.stop()
        self._observer.join(timeout=5)


def open_watcher(kind: str | None = None) -> Watcher:
    """``kind`` (or ``$TEAMRT_WATCHER``): ``inotify`` (default) or ``poll``."""
    kind = kind or os.environ.get(WATCHER_ENV) or "inotify"
    if kind == "poll":
        return PollingWatcher()
    if kind != "inotify":
        raise ValueError(f"{WATCHER_ENV} must be 'inotify' or 'poll', not {kind!r}")
    try:
        return InotifyWatcher()
    except Exception as e:  # no inotify here: watchdog raises its own error types on import or init
        log.warning("inotify is not available (%s); polling mailboxes every %.2fs", e, POLL_INTERVAL)
        return PollingWatcher()


_shared: Watcher | None = None
_shared_lock = threading.Lock()


def shared_watcher() -> Watcher:
    """The process-wide watcher that inboxes use unless given one."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = open_watcher()
        return _shared
