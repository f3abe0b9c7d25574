"""WebFetch against local HTTP servers (127.0.0.1, allowed through ``[web] private_hosts``): pages, redirects,
limits, refused addresses, the cache, hostile servers, and a real run whose model reads what it fetched."""

from __future__ import annotations

import asyncio
import re
import socket
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from teamrt.models import ModelRequest, Reply, ScriptedModel
from teamrt.sandbox.policy import WebPolicy
from teamrt.testing import run_on_sim
from teamrt.tools import ToolContext, ToolError, ToolResult, builtin_tools
from teamrt.tools.web.fetch import MAX_REDIRECTS, WebFetch
from tests.helpers.teams import FAST
from tests.helpers.waiting import within

if TYPE_CHECKING:
    from tests.helpers.hostile import Scene

Route = Callable[[BaseHTTPRequestHandler], None]


class Site:
    """A local HTTP server whose pages a test sets: ``routes`` by path; ``hits`` and ``hosts`` (the
    ``Host`` headers) are what it was asked."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.hits: Counter[str] = Counter()
        self.hosts: list[str] = []
        self.release = threading.Event()
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                site.hits[self.path] += 1
                site.hosts.append(self.headers.get("Host", ""))
                route = site.routes.get(self.path)
                if route is None:
                    self.send_error(404)
                    return
                try:
                    route(self)
                except OSError:  # the client went away (a body it stopped reading)
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.host = f"127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://{self.host}{path}"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def site() -> Iterator[Site]:
    server = Site()
    yield server
    server.close()


def page(body: bytes | str, content_type: str = "text/html; charset=utf-8", status: int = 200) -> Route:
    data = body.encode() if isinstance(body, str) else body

    def route(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        if content_type:
            handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    return route


def redirect(location: str, status: int = 302) -> Route:
    def route(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        handler.send_header("Location", location)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    return route


def fetch(
    tool: WebFetch, url: Any, *private_hosts: str, prompt: Any = "What does it say?", tmp: Path = Path("/")
) -> ToolResult:
    """One call as the loop makes it (a ToolError is an error result); 30 s only bound a hang."""
    ctx = ToolContext(workspace=tmp, run_dir=tmp, web=WebPolicy(private_hosts=private_hosts))

    async def go() -> ToolResult:
        try:
            return await tool.run({"url": url, "prompt": prompt}, ctx)
        except ToolError as e:
            return ToolResult(str(e), is_error=True)

    return within(30, lambda: asyncio.run(go()))


def read(tool: WebFetch, url: str, *private_hosts: str) -> str:
    """What a call that succeeded gives the model."""
    result = fetch(tool, url, *private_hosts)
    assert not result.is_error and isinstance(result.content, str), result.content
    return result.content


def failed(result: ToolResult) -> str:
    """The one line of an error result."""
    assert result.is_error, result.content
    assert isinstance(result.content, str) and "\n" not in result.content
    return result.content


ARTICLE = """<!doctype html><html><head><title>The Title</title><style>body { color: red }</style>
<script>var secret = "x=1";</script></head><body>
<nav><a href="/">Home</a> | <a href="/menu">Menu</a></nav>
<main><h1>Release notes</h1><p>Version <b>2.0</b> adds <a href="https://docs.example.org/x">docs</a>.</p>
<ul><li>one</li><li>two</li></ul><img src="data:image/png;base64,iVBORw0KGgo=" alt="a chart">
<pre><code>print("hi")</code></pre></main><footer>Copyright</footer></body></html>"""


# --- pages ----------------------------------------------------------------------


def test_html_becomes_markdown_headed_by_the_prompt(site: Site) -> None:
    site.routes["/notes"] = page(ARTICLE)
    result = fetch(WebFetch(), site.url("/notes"), site.host, prompt="Which version?")
    text = result.content
    assert not result.is_error and isinstance(text, str)
    assert text.startswith("Prompt: Which version?\n")
    assert f"URL: {site.url('/notes')}\n" in text and "text/html -> Markdown" in text
    page_md = text.split("\n---\n\n", 1)[1]
    assert page_md.startswith("# Release notes")
    assert "Version **2.0** adds [docs](https://docs.example.org/x)." in page_md
    assert "- one\n- two" in page_md and 'print("hi")' in page_md and "a chart" in page_md
    for noise in ("color: red", "secret", "Menu", "Copyright", "base64"):
        assert noise not in page_md


def test_text_and_json_come_as_they_are(site: Site) -> None:
    site.routes["/a.txt"] = page("plain *text*\n", "text/plain")
    site.routes["/a.json"] = page('{"a": [1, 2]}', "application/json")
    site.routes["/typeless"] = page("no type given\n", "")
    tool = WebFetch()
    assert read(tool, site.url("/a.txt"), site.host).endswith("\n\nplain *text*\n")
    assert read(tool, site.url("/a.json"), site.host).endswith('\n\n{"a": [1, 2]}')
    assert read(tool, site.url("/typeless"), site.host).endswith("\n\nno type given\n")


def test_content_that_is_not_text_is_refused(site: Site) -> None:
    site.routes["/a.png"] = page(b"\x89PNG\r\n\x1a\n" + bytes(100), "image/png")
    site.routes["/blob"] = page(b"\x00\x01\x02binary", "")
    site.routes["/lying.txt"] = page(b"text\x00with NULs", "text/plain")
    tool = WebFetch()
    assert failed(fetch(tool, site.url("/a.png"), site.host)).endswith(
        "is image/png, not text: WebFetch reads HTML, text and JSON"
    )
    assert "is binary (no content type), not text" in failed(fetch(tool, site.url("/blob"), site.host))
    assert "is binary (text/plain)" in failed(fetch(tool, site.url("/lying.txt"), site.host))


def test_encodings_are_followed_and_bytes_that_do_not_decode_are_replaced(site: Site) -> None:
    site.routes["/bad"] = page(b"caf\xe9 \xff\xfe ok", "text/plain; charset=utf-8")
    site.routes["/latin"] = page(b"caf\xe9", "text/plain; charset=latin-1")
    site.routes["/unknown"] = page(b"caf\xc3\xa9", "text/plain; charset=x-no-such-charset")
    site.routes["/meta"] = page(
        b'<html><head><meta charset="iso-8859-1"></head><body>caf\xe9</body>', "text/html"
    )
    tool = WebFetch()
    assert read(tool, site.url("/bad"), site.host).endswith("caf\ufffd \ufffd\ufffd ok")
    assert read(tool, site.url("/latin"), site.host).endswith("café")
    assert read(tool, site.url("/unknown"), site.host).endswith("café")
    assert read(tool, site.url("/meta"), site.host).endswith("café")


def test_http_errors_are_one_line(site: Site) -> None:
    site.routes["/gone"] = page("<p>gone</p>", status=410)
    tool = WebFetch()
    assert (
        failed(fetch(tool, site.url("/gone"), site.host))
        == f"WebFetch: {site.url('/gone')} answered 410 Gone"
    )
    assert failed(fetch(tool, site.url("/missing"), site.host)).endswith("answered 404 Not Found")


@pytest.mark.parametrize(
    ("url", "prompt", "problem"),
    [
        (None, "p", "url must be a string"),
        ("https://example.com", None, "prompt must be a string"),
        ("https://example.com/\ud800", "p", "lone surrogate"),
        ("ftp://example.com/x", "p", "is not an http or https URL"),
        ("https://user:secret@example.com/", "p", "user name or password are refused"),
        ("https:///nohost", "p", "names no host"),
        ("https://example.com:99999/", "p", "has no valid port"),
        ("http://[::1/", "p", "is not a valid URL"),
        ("https://example.com/" + "a" * 2000, "p", "longer than 2000 characters"),
    ],
)
def test_bad_input_is_one_line(url: Any, prompt: Any, problem: str) -> None:
    assert problem in failed(fetch(WebFetch(), url, prompt=prompt))


# --- redirects ------------------------------------------------------------------


def test_redirects_on_the_same_host_are_followed(site: Site) -> None:
    site.routes["/old"] = redirect("/older", 301)
    site.routes["/older"] = redirect(site.url("/page"), 308)
    site.routes["/page"] = page("<p>arrived</p>")
    text = read(WebFetch(), site.url("/old"), site.host)
    assert f"URL: {site.url('/page')} (redirected from {site.url('/old')})" in text
    assert text.endswith("arrived")
    assert site.hits == Counter({"/old": 1, "/older": 1, "/page": 1})


def test_too_many_redirects_is_an_error(site: Site) -> None:
    site.routes["/loop"] = redirect("/loop")
    message = failed(fetch(WebFetch(), site.url("/loop"), site.host))
    assert message == f"WebFetch: {site.url('/loop')} redirects more than {MAX_REDIRECTS} times"
    assert site.hits["/loop"] == MAX_REDIRECTS + 1


def test_a_redirect_to_another_host_is_told_not_followed(site: Site) -> None:
    site.routes["/moved"] = redirect("http://example.org/new?q=1", 301)
    site.routes["/local"] = redirect(f"http://localhost:{site.port}/page")
    tool = WebFetch()
    result = fetch(tool, site.url("/moved"), site.host, prompt="Find the date")
    assert not result.is_error
    assert result.content == (
        f"{site.url('/moved')} redirects (301) to another host: https://example.org/new?q=1\n"
        "WebFetch follows redirects only on the same host. To read the page, call WebFetch again with url"
        " 'https://example.org/new?q=1' and prompt 'Find the date'."
    )
    assert "to another host: https://localhost" in read(tool, site.url("/local"), site.host)
    assert site.hits["/page"] == 0


@pytest.mark.hostile
def test_a_redirect_from_an_allowed_host_to_a_refused_address_is_refused(site: Site) -> None:
    other = Site()
    try:
        other.routes["/admin"] = page("<p>internal</p>")
        site.routes["/jump"] = redirect(f"http://127.0.0.1:{other.port}/admin")
        message = failed(fetch(WebFetch(), site.url("/jump"), site.host))
        assert message.startswith("WebFetch: refused: 127.0.0.1 is not a public address (loopback)")
        assert other.hits["/admin"] == 0
    finally:
        other.close()


def test_a_redirect_to_an_invalid_url_is_an_error(site: Site) -> None:
    site.routes["/broken"] = redirect("http://[::1")
    message = failed(fetch(WebFetch(), site.url("/broken"), site.host))
    assert message == f"WebFetch: {site.url('/broken')} redirects to 'http://[::1', which is not a valid URL"


# --- addresses ------------------------------------------------------------------

REFUSED = [
    ("http://localhost/", "loopback"),
    ("http://127.0.0.1/", "loopback"),
    ("http://2130706433/", "loopback"),
    ("http://0x7f.1/", "loopback"),
    ("http://127.1/", "loopback"),
    ("http://017700000001/", "loopback"),
    ("http://[::1]/", "loopback"),
    ("http://[::ffff:127.0.0.1]/", "loopback 127.0.0.1 inside IPv6"),
    ("http://[64:ff9b::a00:1]/", "private 10.0.0.1 inside IPv6"),
    ("http://[2002:c0a8:1::]/", "private 192.168.0.1 inside IPv6"),
    ("http://0/", "unspecified"),
    ("http://10.1.2.3/", "private"),
    ("http://192.168.1.1:8080/", "private"),
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("http://[fe80::1]/", "link-local"),
    ("http://224.0.0.1/", "multicast"),
    ("http://240.0.0.1/", "reserved"),
    ("http://100.64.0.1/", "non-public"),
]


@pytest.mark.parametrize(("url", "kind"), REFUSED)
@pytest.mark.hostile
def test_addresses_off_the_public_internet_are_refused(url: str, kind: str) -> None:
    message = failed(fetch(WebFetch(), url))
    assert message.startswith("WebFetch: refused: ") and f"is not a public address ({kind})" in message
    assert "[web] private_hosts" in message


@pytest.mark.hostile
def test_an_allowed_private_host_is_allowed_on_its_port_only(site: Site) -> None:
    site.routes["/"] = page("<p>local</p>")
    assert read(WebFetch(), site.url("/"), site.host).endswith("local")
    assert read(WebFetch(), site.url("/"), "127.0.0.1").endswith("local")
    refused = failed(fetch(WebFetch(), site.url("/"), "127.0.0.1:1"))
    assert refused.startswith("WebFetch: refused: 127.0.0.1 is not a public address (loopback)")
    assert site.hits["/"] == 2


@pytest.mark.hostile
def test_the_name_is_resolved_once_and_the_checked_address_is_the_one_connected(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name that would resolve elsewhere the second time (DNS rebinding) cannot move the connection:
    teamrt connects to the address it checked, with the name in the Host header."""
    site.routes["/"] = page("<p>pinned</p>")
    real = socket.getaddrinfo
    asked: list[str] = []

    def rebinding(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "rebind.test":
            asked.append(host)
            if len(asked) > 1:
                raise AssertionError("resolved twice")
            return real("127.0.0.1", *args, **kwargs)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    assert read(WebFetch(), f"http://rebind.test:{site.port}/", f"rebind.test:{site.port}").endswith("pinned")
    assert asked == ["rebind.test"] and site.hosts == [f"rebind.test:{site.port}"]


def test_http_is_upgraded_to_https_for_public_hosts_only(site: Site) -> None:
    from teamrt.tools.web.address import target
    from teamrt.tools.web.fetch import upgraded

    assert str(upgraded(target("http://example.com/a?b#c"), ()).url) == "https://example.com/a?b"
    assert str(upgraded(target("http://example.com:8080/"), ()).url) == "https://example.com:8080/"
    assert str(upgraded(target(site.url("/x")), (site.host,)).url) == site.url("/x")


# --- limits ---------------------------------------------------------------------


@pytest.mark.hostile
def test_a_body_over_the_size_limit_is_refused(site: Site) -> None:
    site.routes["/big"] = page("x" * 5000, "text/plain")

    def endless(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        chunk = b"y" * 4096
        while not site.release.is_set():
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))

    site.routes["/endless"] = endless
    tool = WebFetch(max_bytes=1000)
    assert failed(fetch(tool, site.url("/big"), site.host)).endswith(
        "is 5,000 bytes; WebFetch reads at most 1,000"
    )
    assert failed(fetch(tool, site.url("/endless"), site.host)).endswith(
        "is larger than 1,000 bytes, the most WebFetch reads"
    )


@pytest.mark.hostile
def test_a_server_that_stalls_times_out(site: Site) -> None:
    def stall(handler: BaseHTTPRequestHandler) -> None:
        site.release.wait(30)

    site.routes["/stall"] = stall

    def drip(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        while not site.release.wait(0.05):
            handler.wfile.write(b"1\r\nz\r\n")

    site.routes["/drip"] = drip
    tool = WebFetch(total_seconds=0.3)
    assert failed(fetch(tool, site.url("/stall"), site.host)).startswith("WebFetch: timed out: ")
    assert failed(fetch(tool, site.url("/drip"), site.host)) == (
        f"WebFetch: timed out: {site.url('/drip')} took more than 0.3 s"
    )


# --- hostile servers ------------------------------------------------------------


@pytest.mark.hostile
def test_huge_headers_are_a_one_line_error(site: Site) -> None:
    def huge(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("X-Junk", "j" * 2_000_000)
        handler.end_headers()

    site.routes["/huge"] = huge
    assert failed(fetch(WebFetch(), site.url("/huge"), site.host)).startswith(
        f"WebFetch: {site.url('/huge')}: "
    )


def test_a_page_nested_too_deep_for_the_converter_keeps_its_text(site: Site) -> None:
    site.routes["/deep"] = page("<div>" * 20_000 + "bottom" + "</div>" * 20_000)
    assert read(WebFetch(), site.url("/deep"), site.host).endswith("bottom")


@pytest.mark.hostile
def test_a_server_that_hangs_up_is_a_one_line_error(site: Site) -> None:
    def hang_up(handler: BaseHTTPRequestHandler) -> None:
        handler.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort")
        handler.close_connection = True

    site.routes["/cut"] = hang_up
    assert failed(fetch(WebFetch(), site.url("/cut"), site.host)).startswith(
        f"WebFetch: {site.url('/cut')}: "
    )


# --- the cache ------------------------------------------------------------------


def test_a_page_is_fetched_once_per_run_by_the_url_asked_and_the_url_it_came_from(site: Site) -> None:
    site.routes["/page"] = page("<p>v1</p>")
    site.routes["/short"] = redirect("/page")
    tool = WebFetch()
    first = read(tool, site.url("/short"), site.host)
    site.routes["/page"] = page("<p>v2</p>")
    assert read(tool, site.url("/short"), site.host) == first
    assert read(tool, site.url("/page"), site.host).endswith("v1")
    assert site.hits == Counter({"/short": 1, "/page": 1})
    assert read(WebFetch(), site.url("/page"), site.host).endswith("v2")


def test_the_cache_forgets_pages_after_its_time_and_over_its_size(site: Site) -> None:
    site.routes["/a"] = page("a" * 100, "text/plain")
    site.routes["/b"] = page("b" * 100, "text/plain")
    tool = WebFetch()
    tool.cache.seconds = -1
    fetch(tool, site.url("/a"), site.host)
    fetch(tool, site.url("/a"), site.host)
    assert site.hits["/a"] == 2
    tool.cache.seconds, tool.cache.chars = 900, 150
    fetch(tool, site.url("/a"), site.host)
    fetch(tool, site.url("/b"), site.host)
    fetch(tool, site.url("/b"), site.host)
    fetch(tool, site.url("/a"), site.host)
    assert site.hits == Counter({"/a": 4, "/b": 1})


# --- in a run -------------------------------------------------------------------

TEAM = """
[team]
name = "t"
model = "sim"
on_ask = "deny"
[permissions]
allow = ["WebFetch(domain:127.0.0.1)"]
deny = ["WebFetch(domain:*.internal.test)"]
[web]
private_hosts = ["127.0.0.1:{port}"]
"""


def test_a_run_fetches_pages_and_the_model_reads_them_long_ones_spilled_whole(
    site: Site, tmp_path: Path
) -> None:
    site.routes["/short"] = page(ARTICLE)
    site.routes["/long"] = page("<p>" + "word " * 30_000 + "THE-END</p>")
    project = tmp_path / "project"
    project.mkdir()
    (project / "team.toml").write_text(TEAM.replace("{port}", str(site.port)))
    run_dir = tmp_path / "home" / "runs" / "r1"

    def results(request: ModelRequest) -> list[str]:
        return [b["content"] for b in request.messages[-1]["content"] if b.get("type") == "tool_result"]

    fetches = (
        Reply()
        .call("WebFetch", {"url": site.url("/short"), "prompt": "Which version?"})
        .call("WebFetch", {"url": site.url("/long"), "prompt": "How does it end?"})
        .call("WebFetch", {"url": "http://db.internal.test/", "prompt": "Dump it"})
        .call("WebFetch", {"url": "https://example.org/", "prompt": "Anything?"})
    )
    model = ScriptedModel([fetches, Reply().say("read them")])

    outcome = run_on_sim(
        project / "team.toml",
        "go",
        project=project,
        run_dir=run_dir,
        settings=FAST,
        timeout=30,
        models={"sim": model},
    )
    assert outcome.status == "done"
    assert "WebFetch" in [t["name"] for t in model.requests[0].tools]
    short, long, denied, asked = results(model.requests[1])
    assert short.startswith("Prompt: Which version?") and "Version **2.0** adds" in short
    assert long.startswith("Prompt: How does it end?") and "THE-END" not in long
    spilled = re.search(r"The whole output is in (\S+); read it", long)
    assert spilled is not None and Path(spilled[1]).read_text().rstrip().endswith("THE-END")
    assert denied == 'permission denied: denied by rule "WebFetch(domain:*.internal.test)"'
    assert asked.startswith("permission denied: ")  # no allow rule: asked about, and the run denies asks
    assert site.hits == Counter({"/short": 1, "/long": 1})


def test_every_agent_has_webfetch_after_bash() -> None:
    names = list(builtin_tools())
    assert names[names.index("Bash") + 1] == "WebFetch"


@pytest.mark.hostile
def test_an_agent_allowed_everything_cannot_reach_a_local_service(site: Site, scene: Scene) -> None:
    """A lead in bypassPermissions mode, steered to the machine's own services, however it spells them."""
    from tests.helpers.hostile import SECRET

    site.routes["/secret"] = page(f"<p>{SECRET}</p>")
    port = site.port
    urls = [f"http://{host}:{port}/secret" for host in ("127.0.0.1", "localhost", "2130706433", "0x7f.1",
            "[::ffff:127.0.0.1]", "0", "[::1]")]  # fmt: skip
    said = scene.attack([("WebFetch", {"url": url, "prompt": "Print it"}) for url in urls])
    assert len(said) == len(urls)
    for result in said:
        assert result.is_error and result.content.startswith("WebFetch: refused: "), result.content
    assert site.hits == Counter()
    scene.untouched()


def certificate(tmp_path: Path, name: str) -> tuple[Path, Path, str]:
    """A self-signed certificate for ``name``: its file, its key's file, and the certificate as PEM."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    pem = cert.public_bytes(serialization.Encoding.PEM).decode()
    (tmp_path / f"{name}.pem").write_text(pem)
    (tmp_path / f"{name}.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return tmp_path / f"{name}.pem", tmp_path / f"{name}.key", pem


def test_https_to_the_checked_address_keeps_the_name_for_the_certificate(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection goes to the pinned address, and TLS still sends and checks the host's name."""
    import ssl

    cert, key, pem = certificate(tmp_path, "pinned.test")
    server_side = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_side.load_cert_chain(cert, key)
    site.server.socket = server_side.wrap_socket(site.server.socket, server_side=True)
    site.routes["/"] = page("<p>over TLS</p>")
    real = socket.getaddrinfo

    def local(host: Any, *args: Any, **kwargs: Any) -> Any:
        return real("127.0.0.1" if str(host).endswith(".test") else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", local)
    trusting = WebFetch(verify=ssl.create_default_context(cadata=pem))
    text = read(trusting, f"https://pinned.test:{site.port}/", f"pinned.test:{site.port}")
    assert text.endswith("over TLS") and site.hosts == [f"pinned.test:{site.port}"]
    wrong = failed(fetch(trusting, f"https://other.test:{site.port}/", f"other.test:{site.port}"))
    assert (
        wrong.startswith(f"WebFetch: cannot connect to other.test:{site.port}: ") and "certificate" in wrong
    )
    untrusted = failed(fetch(WebFetch(), f"https://pinned.test:{site.port}/", f"pinned.test:{site.port}"))
    assert "certificate verify failed" in untrusted


@pytest.mark.hostile
def test_a_private_hosts_entry_that_names_no_host_allows_nothing(site: Site) -> None:
    site.routes["/"] = page("<p>local</p>")
    assert failed(fetch(WebFetch(), site.url("/"), "☃.bad", "[::1", ":")).startswith("WebFetch: refused: ")
    assert read(WebFetch(), site.url("/"), "☃.bad", site.host).endswith("local")
