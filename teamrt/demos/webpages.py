"""The web the research demo searches and reads, offline: a few pages served on loopback.

``serving()`` serves ``teamrt/demos/web/`` on 127.0.0.1 at a free port for as
long as the demo runs, and points the simulator's web search at it
(``TEAMRT_SIM_SEARCH_DIR`` and ``TEAMRT_SIM_SEARCH_URL``), so the research
lead's WebSearch finds these pages and its WebFetch reads them from the server,
through the same code that reads a page on the internet.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from teamrt.sim.corpus import DIR_ENV, URL_ENV

PAGES = Path(__file__).resolve().parent / "web"


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """The demo prints its own progress; the server's access log would interleave with it."""


@contextmanager
def serving(pages: Path = PAGES) -> Iterator[str]:
    """Serve ``pages`` on loopback; yields the host and port (``127.0.0.1:PORT``) for ``[web]
    private_hosts``. The search variables are restored afterwards."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(pages)))
    host = f"127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="demo-web", daemon=True)
    thread.start()
    saved = {name: os.environ.get(name) for name in (DIR_ENV, URL_ENV)}
    os.environ[DIR_ENV], os.environ[URL_ENV] = str(pages), f"http://{host}/"
    try:
        yield host
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        server.shutdown()
        server.server_close()
        thread.join()
