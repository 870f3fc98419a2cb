"""Plausible values by hint: what a property's name (``email``, ``billing_city``, ``price`` …) or a
string's ``format`` suggests, as draws from the call's seeded Faker.

Draws use only the Faker passed in (and its ``.random``), never the clock or a global RNG, so the
same seed always gives the same value. Faker itself is never imported here.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

__all__ = ["FORMATS", "Draw", "name_hint", "singular", "words"]


def singular(name: str | None) -> str | None:
    if not name:
        return None
    for plural, single in (("ies", "y"), ("sses", "ss"), ("ches", "ch"), ("shes", "sh"), ("xes", "x")):
        if name.endswith(plural):
            return name[: -len(plural)] + single
    return name[:-1] if name.endswith("s") and not name.endswith("ss") else name


Draw = Callable[[Any], Any]  # a Faker instance (seeded; its .random is the call's generator) → a value


def words(fk: Any, n: int = 2) -> str:
    return " ".join(fk.words(nb=n))


def _uuid(fk: Any) -> str:
    return str(uuid.UUID(int=fk.random.getrandbits(128), version=4))


def _moment(fk: Any, fmt: str) -> str:
    # Not fk.date_time(): its range ends at "now", so the same seed would drift from day to day.
    when = datetime.fromtimestamp(fk.random.randint(0, 1_900_000_000), tz=UTC)
    return when.strftime(fmt)


def _datetime(fk: Any) -> str:
    return _moment(fk, "%Y-%m-%dT%H:%M:%SZ")  # RFC 3339, as format "date-time" demands


def _duration(fk: Any) -> str:
    r = fk.random
    return f"P{r.randint(1, 30)}D" if r.random() < 0.5 else f"PT{r.randint(1, 23)}H{r.randint(1, 59)}M"


FORMATS: dict[str, Draw] = {
    "email": lambda fk: fk.email(),
    "idn-email": lambda fk: fk.email(),
    "uri": lambda fk: fk.url(),
    "url": lambda fk: fk.url(),
    "iri": lambda fk: fk.url(),
    "uri-reference": lambda fk: fk.uri_path(),
    "iri-reference": lambda fk: fk.uri_path(),
    "uri-template": lambda fk: fk.url() + "{id}",
    "uuid": _uuid,
    "date": lambda fk: _moment(fk, "%Y-%m-%d"),
    "date-time": _datetime,
    "time": lambda fk: _moment(fk, "%H:%M:%SZ"),  # RFC 3339 full-time carries an offset
    "ipv4": lambda fk: fk.ipv4(),
    "ipv6": lambda fk: fk.ipv6(),
    "hostname": lambda fk: fk.hostname(),
    "idn-hostname": lambda fk: fk.hostname(),
    "duration": _duration,
    "json-pointer": lambda fk: "/" + "/".join(fk.words(nb=2)),
    "relative-json-pointer": lambda fk: "0/" + fk.word(),
    "regex": lambda fk: "^[a-z]+$",
}


def _hints() -> dict[str, Draw]:
    table: dict[tuple[str, ...], Draw] = {
        ("email", "emailaddress", "mail"): lambda fk: fk.email(),
        ("name", "fullname", "customername", "contactname", "authorname", "personname"): lambda fk: fk.name(),
        ("firstname", "givenname"): lambda fk: fk.first_name(),
        ("lastname", "surname", "familyname"): lambda fk: fk.last_name(),
        ("username", "login", "handle", "screenname", "nickname"): lambda fk: fk.user_name(),
        ("city", "cityname", "town"): lambda fk: fk.city(),
        ("country", "countryname"): lambda fk: fk.country(),
        ("countrycode",): lambda fk: fk.country_code(),
        ("state", "province", "region"): lambda fk: fk.state(),
        ("street", "streetaddress", "address", "address1", "addressline1"): lambda fk: fk.street_address(),
        ("zip", "zipcode", "postalcode", "postcode"): lambda fk: fk.postcode(),
        ("phone", "phonenumber", "mobile", "telephone", "tel"): lambda fk: fk.phone_number(),
        ("url", "website", "homepage", "link", "uri"): lambda fk: fk.url(),
        ("company", "companyname", "organization", "organisation", "employer"): lambda fk: fk.company(),
        ("job", "jobtitle", "occupation", "profession", "role"): lambda fk: fk.job(),
        ("title", "subject", "headline"): lambda fk: fk.sentence(nb_words=4).rstrip("."),
        ("date", "birthdate", "dob", "dateofbirth", "day"): lambda fk: _moment(fk, "%Y-%m-%d"),
        ("time",): lambda fk: _moment(fk, "%H:%M"),
        ("datetime", "timestamp", "at"): _datetime,
        ("description", "summary", "text", "comment", "content", "message", "body", "note", "notes", "bio"): (
            lambda fk: fk.sentence()
        ),
        ("reason", "explanation", "reasoning", "answer", "feedback", "review"): lambda fk: fk.sentence(),
        ("id", "uuid", "guid"): _uuid,
        ("price", "amount", "cost", "total", "subtotal", "salary", "balance", "fee", "budget"): (
            lambda fk: round(fk.random.uniform(1, 500), 2)
        ),
        ("age",): lambda fk: fk.random.randint(18, 90),
        ("year",): lambda fk: fk.random.randint(1990, 2030),
        ("month",): lambda fk: fk.random.randint(1, 12),
        ("quantity", "qty", "count"): lambda fk: fk.random.randint(1, 10),
        ("lat", "latitude"): lambda fk: float(fk.latitude()),
        ("lon", "lng", "long", "longitude"): lambda fk: float(fk.longitude()),
        ("color", "colour"): lambda fk: fk.color_name(),
        ("currency", "currencycode"): lambda fk: fk.currency_code(),
        ("language", "lang"): lambda fk: fk.language_name(),
        ("locale",): lambda fk: fk.locale(),
        ("unit", "units", "temperatureunit"): lambda fk: fk.random.choice(["celsius", "fahrenheit"]),
        ("temperature", "temp"): lambda fk: round(fk.random.uniform(-10, 35), 1),
        ("location", "place"): lambda fk: f"{fk.city()}, {fk.country()}",
        ("query", "q", "search", "searchterm", "keywords"): lambda fk: words(fk, 3),
        ("tag", "word", "keyword", "category", "label"): lambda fk: fk.word(),
        ("domain", "hostname", "host"): lambda fk: fk.domain_name(),
        ("ip", "ipaddress"): lambda fk: fk.ipv4(),
        ("password",): lambda fk: fk.password(),
        ("filename", "file"): lambda fk: fk.file_name(),
        ("path", "filepath"): lambda fk: fk.file_path(),
        ("rating", "score"): lambda fk: round(fk.random.uniform(1, 5), 1),
        ("percent", "percentage"): lambda fk: round(fk.random.uniform(0, 100), 1),
        ("timezone", "tz"): lambda fk: fk.timezone(),
    }
    return {key: draw for keys, draw in table.items() for key in keys}


_HINTS = _hints()
_TAIL_ONLY_SKIP = frozenset({"name", "title", "text", "body"})  # "product_name" is not a person's name


@lru_cache(maxsize=1024)
def name_hint(name: str | None) -> Draw | None:
    """The value maker a property name suggests: the whole name, else its last word (``billing_city``)."""
    if not name:
        return None
    words = re.findall(r"[a-z]+|[0-9]+", re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower())
    if not words:
        return None
    whole = _HINTS.get("".join(words))
    if whole is not None or len(words) == 1 or words[-1] in _TAIL_ONLY_SKIP:
        return whole
    return _HINTS.get(words[-1])
