"""What WebFetch makes of a page's bytes: Markdown from HTML, text as it is, anything else refused.

HTML goes through BeautifulSoup and ``markdownify`` with what is not the
page's text left out (scripts, styles, navigation, forms, inline images'
data). A page nested too deep for the converter keeps its plain text.
"""

from __future__ import annotations

import codecs
import re

from teamrt.tools.base import ToolError

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TEXT_TYPES = frozenset({
    "application/json", "application/xml", "application/javascript", "application/x-javascript",
    "application/ecmascript", "application/yaml", "application/x-yaml", "application/toml",
    "application/x-ndjson", "application/ld+json", "application/x-sh", "application/sql",
})  # fmt: skip
NOISE = ("script", "style", "noscript", "template", "nav", "aside", "footer", "form", "button", "iframe",
         "svg", "canvas", "select", "head")  # fmt: skip
"""Elements whose content is not the page's text."""
_META_CHARSET = re.compile(rb"<meta[^>]+charset\s*=\s*[\"']?\s*([\w.:-]+)", re.IGNORECASE)
_SNIFF_BYTES = 4096


def readable(mime: str) -> bool:
    """Whether WebFetch reads a body of this type ("" when the server gave none: the bytes decide)."""
    return not mime or mime in HTML_TYPES or mime.startswith("text/") or mime in TEXT_TYPES or (
        mime.endswith(("+json", "+xml"))
    )  # fmt: skip


def page_text(body: bytes, mime: str, charset: str | None, url: str) -> tuple[str, str]:
    """The page as the model reads it (Markdown for HTML), and how it was made (``text/html -> Markdown``).

    Bytes that do not decode become U+FFFD; a body with NUL bytes in its start is binary, refused."""
    head = body[:_SNIFF_BYTES]
    if b"\0" in head:
        raise ToolError(f"WebFetch: {url} is binary ({mime or 'no content type'}), not text")
    html = mime in HTML_TYPES or (
        not mime and head.lstrip()[:14].lower().startswith((b"<!doctype html", b"<html"))
    )
    if charset is None and html:
        found = _META_CHARSET.search(head)
        charset = found[1].decode("ascii") if found else None
    text = body.decode(_codec(charset), errors="replace")
    if not html:
        return text, mime or "text (no content type)"
    return to_markdown(text), f"{mime or 'text/html'} -> Markdown"


def _codec(charset: str | None) -> str:
    """The codec for a declared charset; UTF-8 when none is declared or Python does not know it."""
    try:
        return codecs.lookup(charset).name if charset else "utf-8"
    except LookupError:
        return "utf-8"


def to_markdown(html: str) -> str:
    """``html`` as Markdown: ATX headings, ``-`` bullets, blank lines collapsed."""
    from bs4 import BeautifulSoup
    from markdownify import ATX, MarkdownConverter

    soup = BeautifulSoup(html, "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for element in soup(NOISE):
        element.decompose()
    for image in soup("img", src=re.compile(r"^\s*data:", re.IGNORECASE)):  # often megabytes of base64
        image.replace_with(str(image.get("alt") or ""))
    try:
        markdown = MarkdownConverter(heading_style=ATX, bullets="-").convert_soup(soup)
    except RecursionError:  # nested deeper than the converter recurses: keep the words
        markdown = soup.get_text("\n", strip=True)
    markdown = re.sub(r"\n{3,}", "\n\n", markdown).strip()
    return f"# {title}\n\n{markdown}" if title and not markdown.startswith("#") else markdown
