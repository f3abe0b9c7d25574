"""The pages the simulator's web search finds: a small built-in set, or a directory served over HTTP.

Search is plain term matching, so the same query always finds the same pages
in the same order: a page scores one point for each distinct query term in
its text and two for each in its title; pages with no point are left out;
ties go by URL.

A demo that serves a directory on a local HTTP server points the search at it
with ``TEAMRT_SIM_SEARCH_DIR`` (the directory) and ``TEAMRT_SIM_SEARCH_URL``
(the URL the directory is served at), or with ``Corpus.from_directory``: each
``.md``, ``.txt`` or ``.html`` file becomes a page at that URL plus its path,
so an agent can WebFetch what it found.
"""

from __future__ import annotations

import functools
import html
import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

DIR_ENV = "TEAMRT_SIM_SEARCH_DIR"
URL_ENV = "TEAMRT_SIM_SEARCH_URL"
MAX_RESULTS = 5
MAX_PAGES = 500
MAX_PAGE_BYTES = 256 * 1024
_SUFFIXES = (".md", ".txt", ".html", ".htm")
_TERM = re.compile(r"[a-z0-9]+")
_STOP = frozenset({"a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "how", "in", "is",
                   "it", "of", "on", "or", "the", "to", "what", "when", "where", "which", "who", "why",
                   "with"})  # fmt: skip


@dataclass(frozen=True)
class Page:
    url: str
    title: str
    text: str
    page_age: str | None = None


BUILTIN: tuple[Page, ...] = (
    Page(
        "https://docs.example.org/sqlite/wal",
        "Write-ahead logging in SQLite",
        "In WAL mode SQLite appends changes to a separate write-ahead log. Readers do not block writers and"
        " a writer does not block readers. A checkpoint moves the log's pages back into the database file.",
        "March 2025",
    ),
    Page(
        "https://docs.example.org/sqlite/locking",
        "File locking and concurrency in SQLite",
        "SQLite allows many readers but only one writer at a time. In rollback mode a writer takes an"
        " exclusive lock on the whole database file while it commits.",
        "January 2025",
    ),
    Page(
        "https://wiki.example.net/prompt-caching",
        "Prompt caching",
        "A prompt cache stores the processed prefix of a request. A later request with the same prefix reads"
        " it back, which is faster and cheaper than processing it again.",
        "2 weeks ago",
    ),
    Page(
        "https://wiki.example.net/http-caching",
        "HTTP caching",
        "HTTP caches keep responses and reuse them while they are fresh. Cache-Control max-age says for how"
        " many seconds a response stays fresh.",
        None,
    ),
    Page(
        "https://news.example.com/2025/rust-1-85",
        "Rust 1.85 released with the 2024 edition",
        "Rust 1.85 stabilises the 2024 edition, async closures and new rules for temporaries in tail"
        " expressions.",
        "February 20, 2025",
    ),
    Page(
        "https://blog.example.com/python-3-13-free-threading",
        "Python 3.13: a build without the GIL",
        "Python 3.13 offers an experimental free-threaded build in which the global interpreter lock is"
        " disabled, so threads run Python code in parallel.",
        "October 2024",
    ),
)


def terms(text: str) -> set[str]:
    return {t for t in _TERM.findall(text.lower()) if t not in _STOP}


def domain_matches(url: str, domain: str) -> bool:
    """Whether ``url`` lies in ``domain``, as the API filters: the host or one of its subdomains
    (``example.com`` covers ``docs.example.com``); a domain with a path covers that path and below."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    name, _, path = domain.lower().strip().partition("/")
    if name not in (host, parts.netloc.lower()) and not host.endswith("." + name):
        return False
    return not path or (parts.path.lstrip("/") + "/").startswith(path.rstrip("/") + "/")


class Corpus:
    def __init__(self, pages: tuple[Page, ...]) -> None:
        self.pages = pages
        self._terms = [(terms(p.title), terms(p.text)) for p in pages]

    @classmethod
    def from_directory(cls, root: Path, base_url: str) -> Corpus:
        """The ``.md``, ``.txt`` and ``.html`` files under ``root`` as pages at ``base_url`` + their path."""
        base = base_url.rstrip("/") + "/"
        pages = []
        for path in sorted(root.rglob("*")):
            if path.suffix.lower() not in _SUFFIXES or not path.is_file() or path.is_symlink():
                continue
            raw = path.read_bytes()[:MAX_PAGE_BYTES].decode("utf-8", errors="replace")
            relative = path.relative_to(root).as_posix()
            pages.append(Page(base + relative, *_title_and_text(raw, path)))
            if len(pages) >= MAX_PAGES:
                break
        return cls(tuple(pages))

    def search(
        self, query: str, *, allowed: tuple[str, ...] = (), blocked: tuple[str, ...] = ()
    ) -> list[Page]:
        wanted = terms(query)
        scored = []
        for page, (title, text) in zip(self.pages, self._terms, strict=True):
            if allowed and not any(domain_matches(page.url, d) for d in allowed):
                continue
            if any(domain_matches(page.url, d) for d in blocked):
                continue
            score = 2 * len(wanted & title) + len(wanted & text)
            if score:
                scored.append((-score, page.url, page))
        return [page for _, _, page in sorted(scored, key=lambda s: s[:2])[:MAX_RESULTS]]


def corpus_from_env() -> Corpus:
    """The directory ``TEAMRT_SIM_SEARCH_DIR`` names, served at ``TEAMRT_SIM_SEARCH_URL``; else the built-in
    pages. Read once for each pair of values."""
    return _corpus(os.environ.get(DIR_ENV) or None, os.environ.get(URL_ENV) or None)


@functools.lru_cache(maxsize=8)
def _corpus(directory: str | None, url: str | None) -> Corpus:
    if not directory:
        return Corpus(BUILTIN)
    if not url or urlsplit(url).scheme not in ("http", "https"):
        raise ValueError(f"{DIR_ENV} is set: {URL_ENV} must name the http(s) URL the directory is served at")
    root = Path(directory)
    if not root.is_dir():
        raise ValueError(f"{DIR_ENV}: {directory} is not a directory")
    return Corpus.from_directory(root, url)


_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<(script|style)\b.*?</\1>|<[^>]+>", re.IGNORECASE | re.DOTALL)


def _title_and_text(raw: str, path: Path) -> tuple[str, str]:
    if path.suffix.lower() in (".html", ".htm"):
        found = _TITLE.search(raw)
        text = " ".join(html.unescape(_TAG.sub(" ", raw)).split())
        title = " ".join(html.unescape(found.group(1)).split()) if found else ""
        return title or path.stem, text
    lines = [line.strip() for line in raw.splitlines() if line.strip()]
    title = lines[0].lstrip("#").strip() if lines and lines[0].startswith("#") else path.stem
    return title, " ".join(" ".join(lines).split())
