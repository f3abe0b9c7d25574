"""Text helpers."""


def truncate(text: str, width: int, ellipsis: str = "...") -> str:
    """``text`` cut to at most ``width`` characters, ending in ``ellipsis`` when it was cut."""
    if len(text) < width:
        return text
    return text[: width - len(ellipsis)] + ellipsis


def slug(text: str) -> str:
    """Lower-case words joined by hyphens: ``"Hello, World!"`` becomes ``"hello-world"``."""
    words = "".join(c if c.isalnum() else " " for c in text.lower()).split()
    return "-".join(words)
