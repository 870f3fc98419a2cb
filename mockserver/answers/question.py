"""The values a user's question names, put into the arguments and objects answering it.

"What's the weather in Paris?" is to call ``get_weather(city="Paris")``: a test that asserts the
tool was called for Paris must be able to pass. :func:`named_values` reads the question for

* **places**: a capitalised phrase after ``in``, ``at``, ``for``, ``to``, ``from``, ``near`` or
  ``of`` (``in New York``);
* **dates**: ISO dates (``2026-03-14``) and written ones (``March 14``, ``14 March 2026``);
* **ids**: a token mixing letters and digits (``ORD-1234``, ``A17``) or ``#1234``;
* **emails**, **quoted strings**, **currency codes** (``EUR``) and **numbers**;
* **names**: the other capitalised phrases of two words or more (``Ada Lovelace``).

:func:`filled` puts them into an object valid against a schema: a property takes a kind of
value by its name or description (``city``, ``location``, ``destination`` → a place; ``date``,
``day`` → a date; ``…id`` → an id; ``email``; ``currency``; ``name``, ``customer``, ``author`` →
a name; ``query``, ``text``, ``title`` → a quoted string); numeric properties take the
question's numbers in order; a property with an ``enum`` takes the member the question says.
A value is kept only when the whole object stays valid; otherwise the seeded value stays.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mockserver.fakejson.generate import is_valid

__all__ = ["Named", "filled", "first_named", "named_values"]

_CAPS = r"[A-Z][\w'’.-]*(?:\s+(?:de|da|del|la|le|van|von|of)?\s*[A-Z][\w'’-]*)*"
_PLACE = re.compile(rf"\b(?:in|at|for|to|from|near|of|around)\s+(?:the\s+)?({_CAPS})")
_PHRASE = re.compile(rf"\b({_CAPS})")
_MONTHS = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.?"
_DATE = re.compile(
    rf"\b(\d{{4}}-\d{{2}}-\d{{2}}|{_MONTHS}\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?|\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTHS}(?:\s+\d{{4}})?)\b"
)
_ID = re.compile(r"#(\d+)\b|\b((?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*)\b")
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_QUOTED = re.compile(r"\"([^\"\n]{1,200})\"|“([^”\n]{1,200})”|(?<![\w])'([^'\n]{1,200})'(?![\w])")
_CURRENCY = re.compile(r"\b([A-Z]{3})\b")
_NUMBER = re.compile(r"(?<![\w.-])-?\d+(?:[.,]\d+)?(?![\w-])")
_QUESTION_WORDS = frozenset(
    [
        "What",
        "Whats",
        "What's",
        "Where",
        "When",
        "Who",
        "Why",
        "How",
        "Which",
        "Is",
        "Are",
        "Can",
        "Could",
        "Would",
        "Will",
        "Do",
        "Does",
        "Please",
        "Tell",
        "Find",
        "Get",
        "Show",
        "Give",
        "Book",
        "Send",
        "The",
        "A",
        "An",
        "I",
        "It",
        "This",
        "That",
        "My",
        "Our",
        "Hi",
        "Hello",
        "Current",
        "Task",
        "Begin",
    ]
)

_PLACE_KEYS = (
    "city",
    "location",
    "place",
    "destination",
    "origin",
    "town",
    "country",
    "region",
    "where",
    "address",
    "airport",
)
_DATE_KEYS = ("date", "day", "when")
_NAME_KEYS = ("name", "customer", "person", "author", "user", "client", "recipient", "who")
_TEXT_KEYS = ("query", "text", "title", "message", "term", "keyword", "topic", "search", "content", "input")


@dataclass(frozen=True, slots=True)
class Named:
    """What the question names, each kind in the order written."""

    places: tuple[str, ...] = ()
    dates: tuple[str, ...] = ()
    ids: tuple[str, ...] = ()
    emails: tuple[str, ...] = ()
    quoted: tuple[str, ...] = ()
    currencies: tuple[str, ...] = ()
    numbers: tuple[float, ...] = ()
    names: tuple[str, ...] = ()
    words: frozenset[str] = frozenset()


def _trim(phrase: str) -> str:
    """A capitalised phrase without the question words it starts with, or ends in ('s, .)."""
    parts = phrase.rstrip(".'’").split()
    while parts and parts[0].strip("'’") in _QUESTION_WORDS:
        parts = parts[1:]
    text = " ".join(parts)
    return re.sub(r"['’]s$", "", text)


def named_values(question: str) -> Named:
    """What ``question`` names (see the module docstring)."""
    quoted = tuple(next(g for g in m.groups() if g) for m in _QUOTED.finditer(question))
    emails = tuple(_EMAIL.findall(question))
    plain = _EMAIL.sub(" ", question)
    dates = tuple(_DATE.findall(plain))
    undated = _DATE.sub(" ", plain)
    ids = tuple(a or b for a, b in _ID.findall(undated))
    places = tuple(p for p in (_trim(m) for m in _PLACE.findall(undated)) if p)
    currencies = tuple(c for c in _CURRENCY.findall(_ID.sub(" ", undated)) if c not in ("THE", "AND", "FOR"))
    names = tuple(p for p in (_trim(m) for m in _PHRASE.findall(undated)) if len(p.split()) >= 2 and p not in places)
    bare = _ID.sub(lambda m: m.group(0) if m.group(0).replace(".", "").replace(",", "").isdigit() else " ", undated)
    numbers = tuple(float(n.replace(",", ".")) for n in _NUMBER.findall(bare))
    said = frozenset(w.lower() for w in re.findall(r"[\w-]+", question))
    return Named(places, dates, ids, emails, quoted, currencies, numbers, names, said)


def _key_words(name: str) -> str:
    return re.sub(r"([a-z])([A-Z])", r"\1 \2", name).replace("_", " ").replace("-", " ").lower()


def _kinds(schema: Mapping[str, Any]) -> list[str]:
    kinds = schema.get("type")
    return [kinds] if isinstance(kinds, str) else [k for k in kinds or [] if isinstance(k, str)]


def _candidates(name: str, schema: Mapping[str, Any], named: Named, numbers: list[float]) -> list[Any]:
    """What the question names that ``name`` could take, best first."""
    enum = schema.get("enum")
    if isinstance(enum, list):
        return [e for e in enum if isinstance(e, str) and e.lower() in named.words]
    key = _key_words(name)
    about = str(schema.get("description") or "").lower()
    kinds = _kinds(schema)
    words = set(key.split())

    def says(keys: tuple[str, ...]) -> bool:
        return bool(words & set(keys)) or any(k in key for k in keys) or any(re.search(rf"\b{k}", about) for k in keys)

    if "integer" in kinds or "number" in kinds:
        if "integer" in kinds:
            return [int(n) for n in numbers if n.is_integer()][:1]
        return numbers[:1]
    if kinds and "string" not in kinds:
        return []
    if says(("email",)):
        return list(named.emails)
    if words & {"id"} or key.endswith("id") or says(("identifier", "number", "code", "reference")):
        return list(named.ids) + [str(int(n)) for n in numbers if n.is_integer()]
    if says(_DATE_KEYS) or schema.get("format") == "date":
        return list(named.dates)
    if says(("currency",)):
        return list(named.currencies)
    if says(_PLACE_KEYS):
        return list(named.places)
    if says(_NAME_KEYS):
        return list(named.names) + list(named.quoted)
    if says(_TEXT_KEYS):
        return list(named.quoted)
    return []


def filled(schema: Mapping[str, Any], value: Any, question: str) -> Any:
    """``value`` (an object valid against ``schema``) with the values ``question`` names put in."""
    properties = schema.get("properties")
    if not question or not isinstance(value, dict) or not isinstance(properties, Mapping):
        return value
    named = named_values(question)
    numbers = list(named.numbers)
    out = dict(value)
    for name, sub in properties.items():
        sub = sub if isinstance(sub, Mapping) else {}
        for candidate in _candidates(str(name), sub, named, numbers):
            trial = {**out, name: candidate}
            if is_valid(schema, trial):
                out = trial
                if isinstance(candidate, (int, float)) and not isinstance(candidate, bool):
                    numbers.remove(float(candidate))  # each number fills one property, in order
                break
    return out


def first_named(question: str) -> str | None:
    """The one value a single-string tool input most likely wants: a quoted string, a place, an
    id, a date, an email or a name the question gives (in that order), else None."""
    named = named_values(question)
    for kind in (named.quoted, named.places, named.ids, named.dates, named.emails, named.names):
        if kind:
            return kind[0]
    return None
