"""Canonical bodies, derived seeds and ids."""

from __future__ import annotations

from mockserver.spine.seeding import canonical, choice_seed, derive_seed, make_id


def test_canonical_ignores_order_and_delivery_fields() -> None:
    a = canonical({"model": "m", "prompt": "x", "stream": True, "user": "u", "stream_options": {}})
    b = canonical({"prompt": "x", "model": "m"})
    assert a == b
    assert canonical({"model": "m", "prompt": "y"}) != b


def test_seeds_are_stable_and_distinct() -> None:
    body = canonical({"model": "m"})
    assert derive_seed(body, 0) == derive_seed(body, 0) != derive_seed(body, 1)
    assert 0 <= derive_seed(body, 0) < 2**63
    assert len({choice_seed(5, i) for i in range(100)}) == 100


def test_ids() -> None:
    body = canonical({"model": "m"})
    assert make_id("cmpl-", body, 1) == make_id("cmpl-", body, 1)
    assert make_id("cmpl-", body, 1) != make_id("cmpl-", body, 2)
    assert make_id("chatcmpl-", body, 1).startswith("chatcmpl-")
