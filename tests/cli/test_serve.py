"""``teamrt serve``: the TUI in a real browser (Debian's chromium, driven by Playwright), and its guard.

One server (with a token, on loopback) and one browser serve the whole module. The page draws the
terminal with xterm.js on a canvas, so the text it shows is read from xterm's own buffer: textual-serve
keeps its ``Terminal`` in a closure, so an init script catches it as the page's script stores it
(``this.terminal = new Terminal(...)``, see ``CATCH_TERMINAL``).
"""

from __future__ import annotations

import asyncio
import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from teamrt import procs
from teamrt.store import create_store
from teamrt.terminal import clean
from tests.helpers.tuidata import finished_run, freeze, mail_run

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
TOKEN = "test-token-0123456789abcdef"
HOSTILE_TASK = "Fix \x1b]0;pwned\x07 the \x1b[2Jtests"
WAIT_S = 90.0

CATCH_TERMINAL = """
Object.defineProperty(Object.prototype, "terminal", {
  configurable: true,
  get() { return undefined; },
  set(value) {
    Object.defineProperty(this, "terminal", {value, writable: true, configurable: true, enumerable: true});
    if (value && value.buffer) {
      window.__terminal = value;
      window.__titles = [];  // every title an escape sequence set
      value.onTitleChange((title) => window.__titles.push(title));
    }
  },
});
"""
SCREEN_TEXT = """() => {
  const t = window.__terminal;
  if (!t) { return ""; }
  const rows = [];
  for (let y = 0; y < t.rows; y++) {
    const line = t.buffer.active.getLine(y);
    rows.push(line ? line.translateToString(true) : "");
  }
  return rows.join("\\n");
}"""


def chromium_or_skip() -> None:
    """Skips only where chromium is missing and not in CI: CI installs it (.ci/run), so there it fails."""
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing: CI must test teamrt serve in a browser")
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def until(check: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not in {timeout} s: {what}"
        time.sleep(0.05)


async def hostile_run(runs: Path, run_id: str) -> None:
    """A finished run whose task holds terminal escape sequences (a title change, a screen clear)."""
    run_dir = runs / run_id
    run_dir.mkdir(parents=True)
    settings = {"team": {"model": "sim", "lead": {}, "roles": {}}}
    store = create_store(run_dir, run_id, task=HOSTILE_TASK, workdir="/work/kit", settings=settings)
    await store.add_agent("lead", kind="lead", model="sim", role="lead")
    await store.set_run_status("done", "answered")
    store.close()
    freeze(run_dir, owner_gone=True)


def make_home(home: Path) -> None:
    async def fill() -> None:
        await finished_run(home / "runs", "run-demo")
        await mail_run(home / "runs", "run-mail")
        await hostile_run(home / "runs", "run-hostile")

    asyncio.run(fill())


@dataclass
class Served:
    process: subprocess.Popen[bytes]
    port: int
    out: Path
    err: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def said(self) -> str:
        return self.out.read_text(errors="replace") + self.err.read_text(errors="replace")


def serve(where: Path, home: Path, *args: str) -> Served:
    """``teamrt serve`` (with the token) started on a free loopback port, once it says where it serves."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "TEAMRT_SERVE_TOKEN"}
    env.update(TEAMRT_HOME=str(home), TEAMRT_SERVE_TOKEN=TOKEN)
    out, err = where / f"serve-{port}.out", where / f"serve-{port}.err"
    with out.open("wb") as o, err.open("wb") as e:
        process = subprocess.Popen(
            [sys.executable, "-m", "teamrt", "serve", "--port", str(port), *args],
            stdout=o, stderr=e, env=env, cwd=where, start_new_session=True,
        )  # fmt: skip
    served = Served(process, port, out, err)
    until(lambda: "serving the TUI at" in served.said() or process.poll() is not None, "the start line")
    assert process.poll() is None, served.said()
    return served


def stop(served: Served) -> int:
    """Ctrl-C, as a terminal sends it: to the server's whole process group."""
    os.killpg(served.process.pid, signal.SIGINT)
    return served.process.wait(timeout=WAIT_S)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    chromium_or_skip()
    where = tmp_path_factory.mktemp("serve")
    make_home(where / "home")
    served = serve(where, where / "home")
    yield served
    stop(served)


@pytest.fixture(scope="module")
def browser(server: Served) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@contextmanager
def opened(browser: Any, served: Served) -> Iterator[Any]:
    """A new page (an empty profile) on the server's address with its token; only the server is reached."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.add_init_script(CATCH_TERMINAL)
    local = f"{served.base}/"
    context.route(
        "**/*", lambda route: route.continue_() if route.request.url.startswith(local) else route.abort()
    )
    page = context.new_page()
    page.goto(f"{local}?token={TOKEN}")
    yield page
    context.close()


@pytest.fixture
def page(browser: Any, server: Served) -> Iterator[Any]:
    with opened(browser, server) as page:
        yield page


def screen_shows(page: Any, *texts: str, gone: tuple[str, ...] = ()) -> str:
    """Waits until the terminal in the page shows every one of ``texts`` and none of ``gone``; returns
    what it shows then."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(
            f"""([texts, gone]) => {{
                const s = ({SCREEN_TEXT})();
                return texts.every((t) => s.includes(t)) && !gone.some((t) => s.includes(t));
            }}""",
            arg=[list(texts), list(gone)],
            timeout=WAIT_S * 1000,
            polling=100,
        )
    except PlaywrightTimeout:
        raise AssertionError(
            f"{texts} shown, {gone} not: not so; the page shows:\n{page.evaluate(SCREEN_TEXT)}"
        ) from None
    return str(page.evaluate(SCREEN_TEXT))


def test_the_tui_in_a_browser_lists_runs_opens_one_and_an_agents_transcript(
    page: Any, server: Served, tmp_path: Path
) -> None:
    shown = screen_shows(page, "run-demo", "run-mail", "Fix the failing tests in kit", "Tidy the README")
    assert "3 runs" in shown
    assert page.url == f"{server.base}/", "the token is taken off the address"
    page.screenshot(path=str(tmp_path / "runs.png"))

    # keys as a person presses them; each key goes to the widget that has the focus when it arrives, and
    # Textual moves the focus later, so no key here is pressed straight after one that moves it
    page.focus(".xterm-helper-textarea")  # where xterm.js takes the keys
    page.keyboard.press("ArrowDown")  # newest first: run-mail, run-hostile, run-demo
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    shown = screen_shows(page, "coder-3", "lead-fork-1", "I will run the suite first")
    assert "Fix the failing tests in kit" in shown
    page.screenshot(path=str(tmp_path / "run.png"))

    page.keyboard.press("j")  # the reviewer: its transcript
    screen_shows(page, "Review each coder's diff", "Waiting for diffs.", gone=("I will run the suite first",))
    page.keyboard.press("Enter")  # alone, full size
    shown = screen_shows(page, "Review each coder's diff", gone=("lead-fork-1",))
    page.screenshot(path=str(tmp_path / "transcript.png"))

    page.keyboard.press("Escape")
    page.keyboard.press("Escape")  # back to the runs list
    screen_shows(page, "3 runs", "run-mail", gone=("lead-fork-1", "Review each coder's diff"))


def fetch(server: Served, path: str, headers: dict[str, str] | None = None) -> tuple[int, Any, str]:
    """A GET (a redirect not followed): its status, headers and body."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=WAIT_S)
    try:
        connection.request("GET", path, headers={"Host": f"127.0.0.1:{server.port}", **(headers or {})})
        response = connection.getresponse()
        return response.status, response.headers, response.read().decode(errors="replace")
    finally:
        connection.close()


def http_status(server: Served, path: str, headers: dict[str, str] | None = None) -> int:
    return fetch(server, path, headers)[0]


def open_websocket(server: Served, headers: dict[str, str]) -> tuple[str, socket.socket]:
    """A websocket handshake: the status line the server answers, and the connection, left open."""
    lines = [
        "GET /ws?width=80&height=24 HTTP/1.1",
        *([] if "Host" in headers else [f"Host: 127.0.0.1:{server.port}"]),
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version: 13",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    connection = socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S)
    connection.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    status = b""
    while not status.endswith(b"\r\n"):
        status += connection.recv(1)
    return status.decode().strip(), connection


def websocket_status(server: Served, headers: dict[str, str]) -> str:
    """The status code a websocket handshake is answered with (the connection closed at once)."""
    status, connection = open_websocket(server, headers)
    connection.close()
    return status.split()[1]


def test_behind_a_proxy_the_page_names_the_public_address(tmp_path: Path) -> None:
    public = "https://teamrt.example.com"
    served = serve(tmp_path, tmp_path / "home", "--public-url", f"{public}/")
    try:
        assert f"serving the TUI at {public}/?token={TOKEN} " in served.said()
        proxied = {"Host": "teamrt.example.com"}
        status, headers, _ = fetch(served, f"/?token={TOKEN}", proxied)
        assert status == 303 and headers["Location"] == "./"
        cookie = headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Secure" in cookie
        status, headers, body = fetch(served, "/", {**proxied, "Cookie": f"teamrt_serve={TOKEN}"})
        assert status == 200 and headers["X-Frame-Options"] == "DENY"
        assert 'data-session-websocket-url="wss://teamrt.example.com/ws"' in body
        assert f'href="{public}/static/css/xterm.css"' in body
        through = {**proxied, "Origin": public, "Cookie": f"teamrt_serve={TOKEN}"}
        assert websocket_status(served, through) == "101"
        assert websocket_status(served, {**through, "Origin": "https://other.example.com"}) == "403"
    finally:
        assert stop(served) == 0


@pytest.mark.hostile
def test_without_the_token_the_page_and_the_websocket_are_refused(server: Served) -> None:
    cookie = {"Cookie": f"teamrt_serve={TOKEN}"}
    origin = {"Origin": server.base}
    assert http_status(server, "/") == 403
    assert http_status(server, "/?token=not-the-token-at-all") == 403
    assert http_status(server, "/", {"Cookie": "teamrt_serve=not-the-token-at-all"}) == 403
    assert http_status(server, "/static/js/textual.js") == 403
    assert http_status(server, "/", cookie) == 200
    assert http_status(server, "/", {**cookie, "Host": "rebound.example.com"}) == 403  # DNS rebinding
    assert websocket_status(server, origin) == "403"
    assert websocket_status(server, {**origin, "Cookie": "teamrt_serve=wrong"}) == "403"
    assert websocket_status(server, {**cookie, "Origin": "http://evil.example.com"}) == "403"
    assert websocket_status(server, cookie) == "403", "a websocket with no Origin"
    assert websocket_status(server, {**cookie, **origin}) == "101"


@pytest.mark.hostile
def test_a_task_with_escape_sequences_shows_inert_in_the_browser(page: Any) -> None:
    cleaned = clean(HOSTILE_TASK)
    assert "\x1b" not in cleaned
    shown = screen_shows(page, "run-hostile", cleaned)
    assert "]0;pwned" in shown and "[2Jtests" in shown, "shown, not acted on"
    assert not [t for t in page.evaluate("window.__titles") if "pwned" in t], "no title was set"


@pytest.mark.hostile
@pytest.mark.parametrize("host", ["0.0.0.0", "10.0.0.7", "example.com"])
def test_an_address_not_loopback_without_a_token_is_refused(tmp_path: Path, host: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TEAMRT_SERVE_TOKEN"}
    env["TEAMRT_HOME"] = str(tmp_path / "home")
    done = subprocess.run(
        [sys.executable, "-m", "teamrt", "serve", "--host", host, "--port", str(free_port())],
        capture_output=True, text=True, env=env, timeout=WAIT_S,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith(f"teamrt: refusing to serve on {host}, not a loopback address")
    assert done.stderr.count("\n") == 1


def tuis_under(pid: int) -> set[int]:
    """The ``teamrt tui`` processes under ``pid``."""
    tuis = set()
    for child in procs.tree(pid):
        try:
            if Path(f"/proc/{child}/cmdline").read_bytes().endswith(b"teamrt\0tui\0"):
                tuis.add(child)
        except OSError:  # gone meanwhile
            continue
    return tuis


def test_a_port_in_use_or_a_short_token_is_told_in_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TEAMRT_SERVE_TOKEN"}
    env["TEAMRT_HOME"] = str(tmp_path / "home")
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = str(taken.getsockname()[1])
        for extra, said in (
            ({}, f"teamrt: cannot listen on 127.0.0.1:{port}: Address already in use\n"),
            ({"TEAMRT_SERVE_TOKEN": "short"}, "teamrt: TEAMRT_SERVE_TOKEN must be at least 16 printable"),
        ):
            done = subprocess.run(
                [sys.executable, "-m", "teamrt", "serve", "--port", port],
                capture_output=True, text=True, env={**env, **extra}, timeout=WAIT_S,
            )  # fmt: skip
            assert (done.returncode, done.stdout) == (1, "")
            assert done.stderr.startswith(said) and done.stderr.count("\n") == 1, done.stderr


@pytest.mark.hostile
def test_the_token_reaches_no_log_but_the_start_line_and_ctrl_c_stops_every_tui(
    browser: Any, tmp_path: Path
) -> None:
    served = serve(tmp_path, tmp_path / "home")
    assert f"serving the TUI at {served.base}/?token={TOKEN} (Ctrl-C stops it)" in served.said()
    assert http_status(served, f"/?token={TOKEN}&fontsize=14") == 303  # the cookie set, the token dropped
    assert http_status(served, f"/static/js/textual.js?token={TOKEN}") == 200
    assert http_status(served, f"/?token={TOKEN}x") == 403
    with opened(browser, served) as page:
        screen_shows(page, "no runs yet")
        tuis = tuis_under(served.process.pid)
        assert len(tuis) == 1, "the page's own teamrt tui"
        environ = Path(f"/proc/{next(iter(tuis))}/environ").read_bytes()
        assert b"TEAMRT_SERVE_TOKEN" not in environ and TOKEN.encode() not in environ, "nor its tools"

        assert stop(served) == 0
        assert not any(Path(f"/proc/{p}").exists() for p in tuis), "no teamrt tui outlives the server"
        page.wait_for_selector("text=Session ended.", timeout=WAIT_S * 1000)
    said = served.said()
    assert said.count(TOKEN) == 1, said
    assert "token=[redacted]" in said
    assert said.endswith("teamrt: stopped serving\n"), said
