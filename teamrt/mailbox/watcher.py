"""Wake-up hints for inboxes: inotify read by the event loop, or watchdog's polling observer.

A watcher calls ``on_change()`` when something may have arrived in a watched
``new/`` directory, and ``on_overflow()`` when the kernel dropped events. A
hint is only a hint: the inbox scans ``new/`` itself, at start, on a timer
and after every hint, so a lost or spurious event costs nothing but a scan.

Why not watchdog's Observer (docs/architecture.md, Design choices). The inotify watcher here uses
watchdog's inotify bindings (``inotify_c``), but reads the descriptor on the
asyncio loop itself instead of through the Observer's threads:

- the Observer passes each event across three threads (inotify reader,
  emitter, dispatcher) before a handler could hand it to the loop; measured
  here, that alone made a wake-up cost 1.6x the bare fsync-and-inotify floor,
  where the target is 1.5x. Read on the loop, the kernel wakes the
  waiting loop directly, as in the floor;
- one inotify descriptor serves every inbox of a loop (the Observer starts a
  thread per watch), so hundreds of agents cost one descriptor and no thread;
- a kernel queue overflow reaches every inbox (watchdog 7 only logs it);
- the Observer's 0.5 s hold on unpaired moves, the reason for watching the
  whole maildir, does not exist here, and watching only ``new/`` keeps
  ``tmp/``/``cur/`` traffic out of the kernel queue.
  ``test_wake_right_after_an_ack_is_as_fast_as_any_other`` pins the property.

The polling watcher (``TEAMRT_WATCHER=poll``, and the fallback where inotify
is missing or its watch limit is reached) is watchdog's ``PollingObserver``;
its thread hands hints to the loop with ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import struct
from collections.abc import Callable
from typing import Protocol

from teamrt.mailbox.errors import MailboxError

log = logging.getLogger(__name__)

POLL_INTERVAL = 0.1
WATCHER_ENV = "TEAMRT_WATCHER"
_EVENT_HEADER = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (then name)

Callback = Callable[[], None]


class Watcher(Protocol):
    """Calls back, on the loop, when a watched directory may have new entries."""

    kind: str

    def watch(self, path: str, on_change: Callback, on_overflow: Callback) -> object:
        """Start calling back for directory ``path`` (from a running loop); returns a handle."""
        ...

    def unwatch(self, handle: object) -> None: ...

    def close(self) -> None: ...


class InotifyWatcher:
    """One non-blocking inotify descriptor, read by the event loop that watches through it."""

    kind = "inotify"

    def __init__(self) -> None:
        # Importing inotify_c raises where the C library has no inotify.
        from watchdog.observers.inotify_c import InotifyConstants as C
        from watchdog.observers.inotify_c import inotify_init

        fd = inotify_init()
        if fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init failed")
        os.set_blocking(fd, False)
        os.set_inheritable(fd, False)
        self._fd = fd
        self._mask = C.IN_CREATE | C.IN_MOVED_TO | C.IN_ONLYDIR | C.IN_DONT_FOLLOW
        self._ignored = C.IN_IGNORED
        self._overflow = C.IN_Q_OVERFLOW
        self._loop: asyncio.AbstractEventLoop | None = None
        self._callbacks: dict[int, list[tuple[Callback, Callback]]] = {}  # wd -> callbacks
        self._fallback: PollingWatcher | None = None

    def watch(self, path: str, on_change: Callback, on_overflow: Callback) -> object:
        from watchdog.observers.inotify_c import inotify_add_watch

        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            if self._loop is not None and not self._loop.is_closed():
                raise MailboxError("an inotify watcher serves one event loop at a time")
            self._loop = loop
            loop.add_reader(self._fd, self._read)
        wd = inotify_add_watch(self._fd, os.fsencode(path), self._mask)
        if wd < 0:  # the watch limit, or a filesystem without inotify
            error = OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
            return ("poll", self._polling(error).watch(path, on_change, on_overflow))
        pair = (on_change, on_overflow)
        self._callbacks.setdefault(wd, []).append(pair)
        return ("inotify", wd, pair)

    def _polling(self, error: OSError) -> PollingWatcher:
        if self._fallback is None:
            log.warning(
                "inotify watch refused (%s); polling those mailboxes every %.2fs", error, POLL_INTERVAL
            )
            self._fallback = PollingWatcher()
        return self._fallback

    def unwatch(self, handle: object) -> None:
        from watchdog.observers.inotify_c import inotify_rm_watch

        assert isinstance(handle, tuple)
        if handle[0] == "poll":
            assert self._fallback is not None
            self._fallback.unwatch(handle[1])
            return
        _, wd, pair = handle
        pairs = self._callbacks.get(wd, [])
        if pair in pairs:
            pairs.remove(pair)
        if not pairs and self._callbacks.pop(wd, None) is not None:
            inotify_rm_watch(self._fd, wd)

    def close(self) -> None:
        if self._fd < 0:
            return
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._fd)
        os.close(self._fd)
        self._fd = -1
        self._callbacks.clear()
        if self._fallback is not None:
            self._fallback.close()

    def _read(self) -> None:
        try:
            buf = os.read(self._fd, 64 * 1024)
        except (BlockingIOError, InterruptedError):
            return
        woken: set[int] = set()
        offset = 0
        while offset + _EVENT_HEADER.size <= len(buf):
            wd, mask, _cookie, name_len = _EVENT_HEADER.unpack_from(buf, offset)
            offset += _EVENT_HEADER.size + name_len
            if mask & self._overflow:
                for pairs in list(self._callbacks.values()):
                    for _, on_overflow in pairs:
                        _call(on_overflow)
            elif wd not in woken:
                woken.add(wd)  # one hint per directory per read is enough
                for on_change, _ in self._callbacks.get(wd, []):
                    _call(on_change)
            if mask & self._ignored:  # the directory went away
                self._callbacks.pop(wd, None)


class PollingWatcher:
    """watchdog's polling observer, for filesystems that do not report changes."""

    kind = "poll"

    def __init__(self) -> None:
        from watchdog.observers.polling import PollingObserver

        self._observer = PollingObserver(timeout=POLL_INTERVAL)
        self._observer.start()

    def watch(self, path: str, on_change: Callback, on_overflow: Callback) -> object:
        from watchdog.events import FileSystemEvent, FileSystemEventHandler

        loop = asyncio.get_running_loop()

        def hint() -> None:
            try:
                loop.call_soon_threadsafe(on_change)
            except RuntimeError:  # the loop has closed
                pass

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: FileSystemEvent) -> None:
                hint()

        return self._observer.schedule(Handler(), path, recursive=False)

    def unwatch(self, handle: object) -> None:
        self._observer.unschedule(handle)  # type: ignore[arg-type]

    def close(self) -> None:
        self._observer.stop()
        self._observer.join(timeout=5)


def _call(fn: Callback) -> None:
    try:
        fn()
    except Exception:  # one inbox's failure must not starve the others
        log.exception("mailbox watch callback failed")


def open_watcher(kind: str | None = None) -> Watcher:
    """``kind`` (or ``$TEAMRT_WATCHER``): ``inotify`` (default) or ``poll``."""
    kind = kind or os.environ.get(WATCHER_ENV) or "inotify"
    if kind == "poll":
        return PollingWatcher()
    if kind != "inotify":
        raise MailboxError(f"{WATCHER_ENV} must be 'inotify' or 'poll', not {kind!r}")
    try:
        return InotifyWatcher()
    except Exception as e:  # no inotify here: watchdog raises its own error types on import
        log.warning("inotify is not available (%s); polling mailboxes every %.2fs", e, POLL_INTERVAL)
        return PollingWatcher()
