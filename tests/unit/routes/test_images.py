"""The images routes' picture store, without HTTP."""

from __future__ import annotations

from mockserver.routes.images import ImageStore


def test_store_keeps_the_latest() -> None:
    store = ImageStore(capacity=2)
    ids = [store.put(bytes([i])) for i in range(3)]
    assert store.get(ids[0]) is None and store.get(ids[2]) == b"\x02"
    assert store.put(b"\x02") == ids[2]  # content-addressed
