"""A server's ``elicitation/create`` as a person's ask: the form it asks for, and the person's answer read.

MCP lets a server ask the person for a few values mid-call, in a form described
by a *restricted* JSON Schema: one object whose properties are flat primitives
(string, with ``enum``/``oneOf`` choices or a ``format``; number and integer, with
bounds; boolean; and, since 2025-11-25, an array of choices). ``form`` reads a
requested schema into ``Field``s and refuses, in one line, anything else: nested
objects, ``$ref``, arrays of other things, too many fields or choices, names that
are not plain. A server is not trusted to describe a harmless form, so every
text it sends (its message, titles, descriptions, choices) is cut and cleaned
before a person sees it.

The person answers through teamrt's ask channel (``teamrt answer``, the TUI, the
prompt at the run's terminal), whose answers are allow or deny with a note: allow
accepts, with the values in the note (``values``): a JSON object, ``name=value``
pairs separated by ``;``, or, for a form of one field, the value alone. Values are
checked against the form; a value that does not fit is said, and the person is
asked again (``ASK_ROUNDS`` times at most).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final

from teamrt.errors import TeamrtError
from teamrt.terminal import clean_line

MAX_FIELDS: Final = 20
MAX_CHOICES: Final = 100
MESSAGE_CHARS: Final = 2000
TEXT_CHARS: Final = 200
"""A title, description, choice or default shown to the person, at most."""
VALUE_CHARS: Final = 10_000
"""A string value sent back, at most."""
ASK_ROUNDS: Final = 3
"""Times a person is asked for a form whose values did not fit it before teamrt answers ``cancel``."""
FORMATS: Final = ("email", "uri", "date", "date-time")
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_FIELD_KEYS: Final = frozenset({
    "type", "title", "description", "default", "enum", "enumNames", "oneOf", "anyOf", "items", "format",
    "minLength", "maxLength", "minimum", "maximum", "minItems", "maxItems",
})  # fmt: skip
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?")


class SchemaRefused(TeamrtError):
    """A requested schema teamrt does not put to a person; the message says why, in one line."""


@dataclass(frozen=True)
class Field:
    """One value the server asks for."""

    name: str
    kind: str
    """``string``, ``number``, ``integer``, ``boolean`` or ``choices`` (an array of choices)."""
    title: str
    description: str
    required: bool
    choices: tuple[str, ...] = ()
    """The values a ``string`` with ``enum``/``oneOf`` or a ``choices`` field takes; () for any."""
    labels: tuple[str, ...] = ()
    """How each choice is shown (its ``title``/``enumNames``), when the server named them."""
    format: str | None = None
    low: float | None = None
    """``minimum``, ``minLength`` or ``minItems``."""
    high: float | None = None
    """``maximum``, ``maxLength`` or ``maxItems``."""
    default: Any = None

    def shown(self) -> dict[str, Any]:
        """The field as the ask shows it (its input)."""
        said: dict[str, Any] = {"type": self.kind, "required": self.required}
        for key, value in (("title", self.title), ("description", self.description), ("format", self.format),
                           ("min", self.low), ("max", self.high), ("default", self.default)):  # fmt: skip
            if value not in (None, ""):
                said[key] = value
        if self.choices:
            said["choices"] = list(self.choices)
        return said


@dataclass(frozen=True)
class Form:
    """What a server asks a person for: its message and its fields (none for a URL to open)."""

    message: str
    fields: tuple[Field, ...]
    url: str | None = None
    """URL mode: the address the server asks the person to open (no fields)."""

    def shown(self) -> dict[str, Any]:
        if self.url is not None:
            return {"message": self.message, "url": self.url}
        return {"message": self.message, "fields": {f.name: f.shown() for f in self.fields}}


def _text(value: Any, limit: int = TEXT_CHARS) -> str:
    line = clean_line(value if isinstance(value, str) else "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def message_of(value: Any) -> str:
    """A server's message for the person: cleaned (its line breaks kept as spaces) and cut."""
    return _text(value, MESSAGE_CHARS)


def form(message: Any, schema: Any) -> Form:
    """The form ``schema`` (a requested schema) asks for; raises ``SchemaRefused``."""
    if not isinstance(schema, dict):
        raise SchemaRefused("its requested schema is not a JSON object")
    if schema.get("type") != "object":
        raise SchemaRefused('its requested schema is not of type "object"')
    unknown = set(schema) - {"type", "properties", "required", "$schema", "title", "description"}
    if unknown:
        raise SchemaRefused(f"its requested schema has {_keys(unknown)}, which a flat form does not take")
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        raise SchemaRefused("its requested schema's properties are not an object")
    if len(properties) > MAX_FIELDS:
        raise SchemaRefused(
            f"it asks for {len(properties)} fields; teamrt puts at most {MAX_FIELDS} to a person"
        )
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise SchemaRefused("its requested schema's required is not a list of names")
    if set(required) - set(properties):
        raise SchemaRefused(
            f"it requires fields it does not describe: {_keys(set(required) - set(properties))}"
        )
    fields = tuple(_field(name, spec, name in required) for name, spec in properties.items())
    return Form(message_of(message), fields)


def _keys(keys: set[str]) -> str:
    shown = sorted(_text(k, 40) for k in keys)
    return ", ".join(shown[:5]) + (" ..." if len(shown) > 5 else "")


def _field(name: Any, spec: Any, required: bool) -> Field:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise SchemaRefused(
            f"the field name {_text(str(name), 40)!r} is not a plain name (letters, digits, _ . -)"
        )
    if not isinstance(spec, dict):
        raise SchemaRefused(f"field {name!r} is not described by an object")
    unknown = set(spec) - _FIELD_KEYS
    if unknown:
        raise SchemaRefused(f"field {name!r} has {_keys(unknown)}: only flat primitive fields are taken")
    kind = spec.get("type")
    base: dict[str, Any] = {"name": name, "title": _text(spec.get("title")),
                            "description": _text(spec.get("description")), "required": required}  # fmt: skip
    if kind == "string":
        return _string(spec, base)
    if kind in ("number", "integer"):
        low, high = _bound(name, spec.get("minimum")), _bound(name, spec.get("maximum"))
        default = spec.get("default")
        ok = isinstance(default, int | float) and not isinstance(default, bool)
        return Field(kind=kind, low=low, high=high, default=default if ok else None, **base)
    if kind == "boolean":
        default = spec.get("default")
        return Field(kind="boolean", default=default if isinstance(default, bool) else None, **base)
    if kind == "array":
        items = spec.get("items")
        if not isinstance(items, dict):
            raise SchemaRefused(f"field {name!r} is an array of no described items")
        choices, labels = _choices(name, items.get("enum"), items.get("anyOf") or items.get("oneOf"))
        if not choices or items.get("type", "string") != "string":
            raise SchemaRefused(f"field {name!r} is an array of other than string choices: not a flat form")
        default = spec.get("default")
        kept = [d for d in default if d in choices] if isinstance(default, list) else None
        return Field(kind="choices", choices=choices, labels=labels, low=_bound(name, spec.get("minItems")),
                     high=_bound(name, spec.get("maxItems")), default=kept, **base)  # fmt: skip
    shown = _text(json.dumps(kind), 40)
    raise SchemaRefused(f"field {name!r} is of type {shown}: only string, number, integer,"
                        " boolean and arrays of choices are taken")  # fmt: skip


def _string(spec: dict[str, Any], base: dict[str, Any]) -> Field:
    name = base["name"]
    fmt = spec.get("format")
    if fmt is not None and fmt not in FORMATS:
        raise SchemaRefused(f"field {name!r} has format {_text(str(fmt), 40)!r}; taken: {', '.join(FORMATS)}")
    choices, labels = _choices(name, spec.get("enum"), spec.get("oneOf") or spec.get("anyOf"))
    names = spec.get("enumNames")
    if isinstance(names, list) and len(names) == len(choices) and not labels:
        labels = tuple(_text(n) for n in names)
    default = spec.get("default")
    return Field(kind="string", choices=choices, labels=labels, format=fmt,
                 low=_bound(name, spec.get("minLength")), high=_bound(name, spec.get("maxLength")),
                 default=_text(default) if isinstance(default, str) else None, **base)  # fmt: skip


def _choices(name: str, enum: Any, alternatives: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The values of ``enum``, or of ``oneOf``/``anyOf``'s ``const``s with their titles."""
    if enum is None and alternatives is None:
        return (), ()
    if enum is not None:
        if not isinstance(enum, list) or not all(isinstance(v, str) for v in enum):
            raise SchemaRefused(f"field {name!r} has choices that are not strings")
        values, labels = list(enum), []
    else:
        if not isinstance(alternatives, list) or not all(
            isinstance(a, dict) and isinstance(a.get("const"), str) for a in alternatives
        ):
            raise SchemaRefused(f"field {name!r} has choices that are not {{const, title}} strings")
        values = [a["const"] for a in alternatives]
        labels = [_text(a.get("title") or a["const"]) for a in alternatives]
    if not values or len(values) > MAX_CHOICES:
        raise SchemaRefused(f"field {name!r} has {len(values)} choices; teamrt shows 1 to {MAX_CHOICES}")
    if any(len(v) > TEXT_CHARS for v in values) or len(set(values)) != len(values):
        raise SchemaRefused(f"field {name!r} has choices too long or repeated")
    return tuple(values), tuple(labels)


def _bound(name: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value or abs(value) > 1e15:
        raise SchemaRefused(f"field {name!r} has a bound that is not a finite number")
    return float(value)


# -- the person's answer ---------------------------------------------------------------------------------


def values(note: str | None, fields: tuple[Field, ...]) -> dict[str, Any] | str:
    """The values a person's note gives ``fields``, checked (defaults filling what it leaves out), or why
    they do not fit, in one line."""
    given = _given(note or "", fields)
    if isinstance(given, str):
        return given
    unknown = set(given) - {f.name for f in fields}
    if unknown:
        return f"no field is named {_keys(unknown)}"
    found: dict[str, Any] = {}
    for field in fields:
        raw = given.get(field.name)
        if raw is None or raw == "":
            if field.default is not None:
                found[field.name] = field.default
            elif field.required:
                return f"{field.name} is required"
            continue
        value = _value(field, raw)
        if isinstance(value, _Problem):
            return f"{field.name}: {value.why}"
        found[field.name] = value
    return found


@dataclass(frozen=True)
class _Problem:
    why: str


def _given(note: str, fields: tuple[Field, ...]) -> dict[str, Any] | str:
    text = note.strip()
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            return "the answer starts with { but is not a JSON object"
        return data if isinstance(data, dict) else "the answer is not a JSON object"
    if not text:
        return {}
    pairs = [p for p in text.split(";") if p.strip()]
    if all("=" in p and _NAME.fullmatch(p.split("=", 1)[0].strip()) for p in pairs):
        return {p.split("=", 1)[0].strip(): p.split("=", 1)[1].strip() for p in pairs}
    if len(fields) == 1:
        return {fields[0].name: text}
    return "give the values as name=value; name=value, or as a JSON object"


def _value(field: Field, raw: Any) -> Any:
    if field.kind == "boolean":
        if isinstance(raw, bool):
            return raw
        word = str(raw).strip().lower()
        if word in ("true", "yes", "y", "1", "on"):
            return True
        if word in ("false", "no", "n", "0", "off"):
            return False
        return _Problem("not yes or no")
    if field.kind in ("number", "integer"):
        return _number(field, raw)
    if field.kind == "choices":
        items = raw if isinstance(raw, list) else [x.strip() for x in str(raw).split(",") if x.strip()]
        picked = [_choice(field, x) for x in items]
        bad = next((p for p in picked if isinstance(p, _Problem)), None)
        if bad is not None:
            return bad
        if (field.low is not None and len(picked) < field.low) or (
            field.high is not None and len(picked) > field.high
        ):
            return _Problem(
                f"pick between {field.low or 0:g} and {field.high or len(field.choices):g} choices"
            )
        return picked
    if not isinstance(raw, str | int | float) or isinstance(raw, bool):
        return _Problem("not a text")
    text = str(raw)
    if field.choices:
        return _choice(field, text)
    if len(text) > VALUE_CHARS or (field.high is not None and len(text) > field.high):
        return _Problem("too long")
    if field.low is not None and len(text) < field.low:
        return _Problem(f"shorter than {field.low:g} characters")
    pattern = {"email": _EMAIL, "date": _DATE, "date-time": _DATE_TIME}.get(field.format or "")
    if pattern is not None and not pattern.fullmatch(text):
        return _Problem(f"not a valid {field.format}")
    if field.format == "uri" and not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*:\S+", text):
        return _Problem("not a valid uri")
    return text


def _choice(field: Field, raw: Any) -> str | _Problem:
    text = str(raw).strip()
    if text in field.choices:
        return text
    if text in field.labels:
        return field.choices[field.labels.index(text)]
    return _Problem(f"{_text(text, 40)!r} is not one of {', '.join(field.choices[:10])}")


def _number(field: Field, raw: Any) -> float | int | _Problem:
    if isinstance(raw, bool):
        return _Problem("not a number")
    try:
        number = float(raw) if not isinstance(raw, int) else raw
    except (TypeError, ValueError):
        return _Problem("not a number")
    if number != number or abs(number) > 1e15:
        return _Problem("not a finite number")
    if field.kind == "integer":
        if int(number) != number:
            return _Problem("not a whole number")
        number = int(number)
    if (field.low is not None and number < field.low) or (field.high is not None and number > field.high):
        low = "-inf" if field.low is None else f"{field.low:g}"
        high = "inf" if field.high is None else f"{field.high:g}"
        return _Problem(f"outside {low}..{high}")
    return number
