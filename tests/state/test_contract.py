"""The State interface's contract (:mod:`mockserver.state.base`), run against every engine.

``memory`` is the reference; ``sqlite`` and ``redis`` must behave the same, and being shared,
also across states opened on the same URL and across processes. Every test here is written to
fail for an engine that gets its point wrong (a LIKE or glob prefix, a count that is read then
written, a bucket charged in part, a list trimmed from the wrong end…).

Bucket rates are slow on purpose: the calls pass ``now`` explicitly, but Redis lets an idle
bucket expire in real time once it would be full again, so each refill here takes seconds.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import random
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mockserver.clock import SystemClock
from mockserver.state.base import TOLERANCE, Draw, Drawn, State, StateUnavailable
from mockserver.state.open import hidden, open_state
from mockserver.state.records import Record
from tests.state import procs
from tests.state.conftest import Reopen
from tests.support.redis_server import free_port

T = 1_000.0  # the ``now`` the bucket tests start from (any time does: buckets take it as given)


def approx(value: float, tolerance: float = 1e-9) -> Any:  # Any: it stands in for a float in comparisons
    return pytest.approx(value, rel=tolerance, abs=tolerance)


async def _every_kind(state: State, key: str) -> None:
    """Put something of every kind under ``key`` (a bucket drawn down to 1 of 2)."""
    await state.put(key, b"v")
    await state.add(key + "#n", 5)
    await state.map_put(key, "f", b"m")
    await state.push(key, b"l", 10)
    await state.draw([Draw(key, 2.0, 0.001, 1.0)], T)


async def _kinds_left(state: State, key: str) -> set[str]:
    """Which kinds ``key`` still has (a bucket counts when it is not full again)."""
    left = set()
    if await state.get(key) is not None:
        left.add("value")
    if (await state.exchange((key + "#n",)))[0] != [None]:
        left.add("counter")
    if await state.map_all(key):
        left.add("map")
    if await state.items(key):
        left.add("list")
    drawn = await state.draw([Draw(key, 2.0, 0.001, 0.0)], T)  # amount 0: looks, takes nothing
    if drawn.levels[0] < 2.0:
        left.add("bucket")
    return left


EVERY_KIND = {"value", "counter", "map", "list", "bucket"}


# ---- what the engine is -------------------------------------------------------------------


async def test_url_and_shared(state: State, state_url: str) -> None:
    assert state.url == hidden(state_url)
    assert state.shared is (state_url != "memory")
    await state.ping()


# ---- values ---------------------------------------------------------------------------------


async def test_get_put_delete(state: State) -> None:
    assert await state.get("a") is None
    await state.put("a", b"1")
    assert await state.get("a") == b"1"
    await state.put("a", b"2")  # replaced
    assert await state.get("a") == b"2"
    assert await state.get("b") is None  # another key untouched
    assert await state.delete("a") is True
    assert await state.get("a") is None
    assert await state.delete("a") is False
    assert await state.delete("never") is False


@pytest.mark.parametrize(
    "value",
    [b"", b"\x00\xff\xfe binary \x00", "ünïcode ✓".encode(), bytes(range(256)) * 40],
    ids=["empty", "binary", "utf-8", "10k"],
)
async def test_values_come_back_byte_for_byte(state: State, value: bytes) -> None:
    await state.put("k", value)
    got = await state.get("k")
    assert got == value and type(got) is bytes


@pytest.mark.parametrize("key", ["", " ", "a:b:c", "ü ✓ 🙂", "x\x00y", "*?[%_\\"], ids=repr)
async def test_any_string_is_a_key(state: State, key: str) -> None:
    await state.put(key, b"v")
    await state.put(key + "z", b"w")
    assert await state.get(key) == b"v"
    assert await state.get(key + "z") == b"w"
    assert await state.delete(key) is True
    assert await state.get(key + "z") == b"w"


async def test_ttl_expires_in_real_time(state: State) -> None:
    await state.put("short", b"1", ttl=0.3)
    await state.put("kept", b"2")
    await state.put("long", b"3", ttl=60)
    assert await state.get("short") == b"1"
    assert (await state.exchange(("short",)))[0] == [b"1"]
    await asyncio.sleep(0.5)
    assert await state.get("short") is None
    assert (await state.exchange(("short", "kept", "long")))[0] == [None, b"2", b"3"]
    assert await state.delete("short") is False  # an expired value is not there to delete


async def test_put_without_ttl_keeps_for_good_and_ttl_zero_is_gone(state: State) -> None:
    await state.put("k", b"1", ttl=0.3)
    await state.put("k", b"2")  # no ttl: the earlier expiry no longer applies
    await state.put("now", b"x", ttl=0)
    assert await state.get("now") is None
    await asyncio.sleep(0.5)
    assert await state.get("k") == b"2"


# ---- counters -------------------------------------------------------------------------------


async def test_add(state: State) -> None:
    assert await state.add("n") == 1
    assert await state.add("n") == 2
    assert await state.add("n", 40) == 42
    assert await state.add("n", -50) == -8
    assert await state.get("n") == b"-8"  # a counter reads as its decimal digits
    assert await state.add("other", 0) == 0
    assert await state.get("other") == b"0"


async def test_add_counts_on_from_a_value_put_as_digits(state: State) -> None:
    await state.put("n", b"41")
    assert await state.add("n") == 42
    assert await state.get("n") == b"42"


async def test_add_on_a_value_that_is_no_number_fails_and_changes_nothing(state: State) -> None:
    await state.put("n", b"abc")
    with pytest.raises(Exception):  # noqa: B017 - the type is the engine's; silently counting from 0 is wrong
        await state.add("n")
    assert await state.get("n") == b"abc"


async def test_a_counter_expires_with_its_value_and_then_starts_over(state: State) -> None:
    await state.put("n", b"10", ttl=0.3)
    assert await state.add("n") == 11  # counting keeps the expiry of what it counts on…
    assert await state.add("n") == 12  # …the first count and the next ones
    assert (await state.exchange((), ("n", "n")))[1] == [13, 14]
    await asyncio.sleep(0.5)
    assert await state.get("n") is None
    assert await state.add("n") == 1
    await asyncio.sleep(0.4)
    assert await state.get("n") == b"1"  # the fresh counter has no expiry


async def test_delete_a_counter(state: State) -> None:
    await state.add("n", 3)
    assert await state.delete("n") is True
    assert await state.add("n") == 1


async def test_exchange_reads_then_counts(state: State) -> None:
    await state.put("v", b"text")
    await state.add("c", 41)
    read, counted = await state.exchange(("v", "c", "absent", "v"), ("c", "x", "y", "x"))
    # The reads see the state before this call's counts; each count is its key's new value,
    # a key counted twice is counted twice.
    assert read == [b"text", b"41", None, b"text"]
    assert counted == [42, 1, 1, 2]
    assert (await state.exchange(("c", "x", "y"), ()))[0] == [b"42", b"2", b"1"]


async def test_exchange_edge_cases(state: State) -> None:
    assert await state.exchange() == ([], [])
    assert await state.exchange(("a",)) == ([None], [])
    assert await state.exchange((), ("a",)) == ([], [1])
    assert await state.exchange(count=["a", "a", "a"]) == ([], [2, 3, 4])


async def test_counts_are_atomic_under_concurrency(state: State) -> None:
    async def one(i: int) -> int:
        if i % 2:
            return await state.add("n")
        return (await state.exchange(("n",), ("n",)))[1][0]

    got = await asyncio.gather(*(one(i) for i in range(200)))
    assert sorted(got) == list(range(1, 201))  # each value handed out exactly once
    assert await state.get("n") == b"200"


# ---- maps -----------------------------------------------------------------------------------


async def test_maps(state: State) -> None:
    assert await state.map_all("m") == {}
    await state.map_put("m", "a", b"1")
    await state.map_put("m", "b", b"\x00\xff")
    await state.map_put("m", "a", b"3")  # replaced
    await state.map_put("n", "a", b"other map")
    await state.map_put("m", "ü :*%", b"")
    assert await state.map_all("m") == {"a": b"3", "b": b"\x00\xff", "ü :*%": b""}
    assert await state.map_delete("m", "a") is True
    assert await state.map_delete("m", "a") is False
    assert await state.map_delete("absent", "a") is False
    assert await state.map_all("m") == {"b": b"\x00\xff", "ü :*%": b""}
    assert await state.map_delete("m", "b") and await state.map_delete("m", "ü :*%")
    assert await state.map_all("m") == {}
    assert await state.map_all("n") == {"a": b"other map"}


async def test_map_writes_are_not_lost_under_concurrency(state: State) -> None:
    await asyncio.gather(*(state.map_put("m", f"f{i}", str(i).encode()) for i in range(100)))
    assert await state.map_all("m") == {f"f{i}": str(i).encode() for i in range(100)}


# ---- lists ----------------------------------------------------------------------------------


async def test_push_keeps_the_newest_cap_oldest_first(state: State) -> None:
    assert await state.items("l") == []
    for i in range(7):
        await state.push("l", b"%d" % i, 5)
    await state.push("other", b"x", 5)
    assert await state.items("l") == [b"2", b"3", b"4", b"5", b"6"]
    assert await state.items("other") == [b"x"]


async def test_the_newest_items_of_a_list(state: State) -> None:
    for i in range(7):
        await state.push("l", b"%d" % i, 5)
    assert await state.items("l", newest=2) == [b"5", b"6"]
    assert await state.items("l", newest=5) == await state.items("l", newest=50) == await state.items("l")
    assert await state.items("l", newest=0) == []
    assert await state.items("none", newest=3) == []
    await state.push("l", b"7", 3)  # a smaller cap: the newest are read within it
    assert await state.items("l", newest=4) == [b"5", b"6", b"7"]


async def test_push_with_a_changed_cap(state: State) -> None:
    for i in range(6):
        await state.push("l", b"%d" % i, 10)
    await state.push("l", b"6", 3)  # a smaller cap trims at once
    assert await state.items("l") == [b"4", b"5", b"6"]
    await state.push("l", b"7", 10)  # a larger one does not bring dropped items back
    assert await state.items("l") == [b"4", b"5", b"6", b"7"]
    await state.push("l", b"8", 1)
    assert await state.items("l") == [b"8"]
    await state.push("l", b"9", 0)  # a cap of 0 keeps nothing
    assert await state.items("l") == []
    await state.push("l", b"10", 2)
    assert await state.items("l") == [b"10"]


async def test_items_are_byte_for_byte_and_may_repeat(state: State) -> None:
    values = [b"", b"\x00", b"same", b"same", bytes(range(256))]
    for value in values:
        await state.push("l", value, 100)
    assert await state.items("l") == values


async def test_concurrent_pushes_keep_exactly_cap(state: State) -> None:
    await asyncio.gather(*(state.push("l", b"%d" % i, 50) for i in range(120)))
    items = await state.items("l")
    assert len(items) == 50
    assert len(set(items)) == 50


async def test_push_matches_a_deque_through_changing_caps(state: State) -> None:
    rng = random.Random(17)
    model: deque[bytes] = deque()
    for i in range(150):
        cap = rng.choice([0, 1, 2, 3, 5, 8, 13, 40])
        model = deque(model, maxlen=cap)
        model.append(b"%d" % i)
        await state.push("l", b"%d" % i, cap)
        assert await state.items("l") == list(model), (i, cap)


# ---- token buckets --------------------------------------------------------------------------


async def test_a_new_bucket_starts_full_and_drains(state: State) -> None:
    bucket = [Draw("b", capacity=3.0, rate=0.01, amount=1.0)]
    for left in (2.0, 1.0, 0.0):
        drawn = await state.draw(bucket, T)
        assert drawn == Drawn(True, (approx(left),), 0.0, -1)
    refused = await state.draw(bucket, T)
    assert refused.allowed is False
    assert refused.levels == (approx(0.0),)
    assert refused.wait == approx(100.0)  # 1 token at 0.01 a second
    assert refused.short == 0


async def test_draw_is_all_or_nothing(state: State) -> None:
    wide = Draw("wide", capacity=5.0, rate=0.01, amount=1.0)
    narrow = Draw("narrow", capacity=1.0, rate=0.01, amount=1.0)
    first = await state.draw([wide, narrow], T)
    assert first.allowed and first.levels == (approx(4.0), approx(0.0))
    second = await state.draw([wide, narrow], T)
    assert not second.allowed
    assert second.levels == (approx(4.0), approx(0.0))  # the wide bucket was not charged
    assert (second.wait, second.short) == (approx(100.0), 1)
    alone = await state.draw([wide], T)  # and it still holds 4
    assert alone.allowed and alone.levels == (approx(3.0),)


async def test_short_names_the_bucket_with_the_longest_wait(state: State) -> None:
    quick = Draw("quick", capacity=1.0, rate=0.1, amount=1.0)
    slow = Draw("slow", capacity=1.0, rate=0.01, amount=1.0)
    assert (await state.draw([quick, slow], T)).allowed
    a = await state.draw([quick, slow], T)
    b = await state.draw([slow, quick], T)
    assert (a.allowed, a.short, a.wait) == (False, 1, approx(100.0))
    assert (b.allowed, b.short, b.wait) == (False, 0, approx(100.0))


async def test_buckets_refill_at_their_rate_up_to_capacity(state: State) -> None:
    bucket = [Draw("b", capacity=2.0, rate=0.1, amount=1.0)]
    assert (await state.draw(bucket, T)).allowed
    assert (await state.draw(bucket, T)).allowed
    half = await state.draw(bucket, T + 5)  # 0.5 refilled: not enough, 5 s more to wait
    assert (half.allowed, half.levels, half.wait, half.short) == (False, (approx(0.5),), approx(5.0), 0)
    one = await state.draw(bucket, T + 10)
    assert one.allowed and one.levels == (approx(0.0),)
    later = await state.draw(bucket, T + 1_000)  # long idle: full, never more
    assert later.allowed and later.levels == (approx(1.0),)


async def test_a_draw_bigger_than_the_level_waits_for_the_difference(state: State) -> None:
    bucket = Draw("b", capacity=10.0, rate=0.5, amount=4.0)
    assert (await state.draw([bucket], T)).levels == (approx(6.0),)
    assert (await state.draw([bucket], T)).levels == (approx(2.0),)
    refused = await state.draw([bucket], T)
    assert (refused.allowed, refused.wait) == (False, approx(4.0))  # 2 missing at 0.5 a second
    big = await state.draw([Draw("big", capacity=3.0, rate=0.5, amount=4.0)], T)
    assert (big.allowed, big.levels, big.wait) == (False, (approx(3.0),), approx(2.0))


async def test_tolerance(state: State) -> None:
    drained = [Draw("b", capacity=1.0, rate=0.1, amount=1.0), Draw("c", capacity=1.0, rate=0.1, amount=1.0)]
    assert (await state.draw(drained, T)).allowed
    # 10 s refill one token; a hair less than a tolerance short of it still passes…
    hair = await state.draw(drained[:1], T + 10 - TOLERANCE / 2 / 0.1)
    assert hair.allowed and hair.levels == (approx(-TOLERANCE / 2),)
    # …but twice the tolerance short does not, and says how little is missing.
    short = await state.draw(drained[1:], T + 10 - 2 * TOLERANCE / 0.1)
    assert not short.allowed
    assert short.wait == pytest.approx(2 * TOLERANCE / 0.1, rel=1e-4)


async def test_empty_draw(state: State) -> None:
    assert await state.draw([], T) == Drawn(True, (), 0.0, -1)


async def test_concurrent_draws_let_exactly_capacity_through(state: State) -> None:
    bucket = [Draw("b", capacity=6.0, rate=1e-9, amount=1.0)]
    drawn = await asyncio.gather(*(state.draw(bucket, time.time()) for _ in range(40)))
    assert sum(d.allowed for d in drawn) == 6


# ---- kinds and forget -----------------------------------------------------------------------


async def test_one_name_holds_every_kind_apart(state: State) -> None:
    await _every_kind(state, "x")
    assert await _kinds_left(state, "x") == EVERY_KIND
    assert await state.get("x") == b"v"
    assert await state.map_all("x") == {"f": b"m"}
    assert await state.items("x") == [b"l"]
    assert await state.delete("x") is True  # the value only
    assert await _kinds_left(state, "x") == EVERY_KIND - {"value"}


async def test_forget_drops_the_prefixs_keys_of_every_kind(state: State) -> None:
    dropped = ["s:1:", "s:1:a", "s:1:a:b"]
    kept = ["s:1", "s:10:a", "t:s:1:a", "s:2:a"]
    for key in dropped + kept:
        await _every_kind(state, key)
    await state.forget("s:1:")
    for key in dropped:
        assert await _kinds_left(state, key) == set(), key
    for key in kept:
        assert await _kinds_left(state, key) == EVERY_KIND, key
    assert await state.add("s:1:a#n") == 1  # a dropped counter starts over


@pytest.mark.parametrize(
    ("prefix", "dropped", "kept"),
    [
        ("a*", ["a*", "a*b"], ["a", "ab", "b*"]),
        ("a?", ["a?", "a?b"], ["a", "ab"]),
        ("a[bc]", ["a[bc]", "a[bc]d"], ["ab", "ac", "a[b"]),
        ("a]", ["a]", "a]b"], ["a", "ab"]),
        ("a%", ["a%", "a%b"], ["a", "ab", "axb"]),
        ("a_", ["a_", "a_b"], ["a", "ab", "axb"]),
        ("a\\", ["a\\", "a\\*", "a\\\\"], ["a", "a*", "a/"]),
        ("a:", ["a:", "a:b"], ["a", "a;", "ab:"]),
        ("AB", ["AB", "ABc"], ["ab", "abc", "Ab", "aB"]),
        ("é", ["é", "éa"], ["e", "ê", "f", "E"]),
        ("z\U0010ffff", ["z\U0010ffff", "z\U0010ffffa"], ["z", "{", "za"]),
    ],
    ids=repr,
)
async def test_forget_treats_every_character_literally(
    state: State, prefix: str, dropped: list[str], kept: list[str]
) -> None:
    for key in dropped + kept:
        await _every_kind(state, key)
    await state.forget(prefix)
    assert {key: await _kinds_left(state, key) for key in dropped + kept} == {
        **{key: set() for key in dropped},
        **{key: EVERY_KIND for key in kept},
    }


async def test_forget_everything(state: State) -> None:
    record = Record("resp_kept", {"id": "resp_kept", "status": "completed"}, (), ())
    assert await state.records.create(record)
    for key in ("", "a", "script:s:1:n", "ü"):
        await _every_kind(state, key)
    await state.forget("")
    for key in ("", "a", "script:s:1:n", "ü"):
        assert await _kinds_left(state, key) == set(), key
    got = await state.records.get("resp_kept")  # the records are not the state's keys
    assert got is not None and got.id == "resp_kept"
    await state.forget("")  # nothing left to forget: fine
    assert await state.add("a#n") == 1


async def test_forget_nothing_that_matches(state: State) -> None:
    await _every_kind(state, "a")
    await state.forget("b")
    await state.forget("a:")
    assert await _kinds_left(state, "a") == EVERY_KIND


# ---- shared engines: another state on the same URL, other processes ---------------------------


def _shared_only(state: State) -> None:
    if not state.shared:
        pytest.skip("memory is one process's own: nothing is shared")


async def test_another_state_on_the_url_sees_every_write(state: State, reopen: Reopen) -> None:
    _shared_only(state)
    other = await reopen()
    await _every_kind(state, "k")
    await state.put("ttl", b"t", ttl=60)
    assert await _kinds_left(other, "k") == EVERY_KIND
    assert await other.get("k") == b"v"
    assert await other.get("ttl") == b"t"
    assert await other.map_all("k") == {"f": b"m"}
    assert await other.items("k") == [b"l"]
    assert await other.add("k#n") == 6  # counts on from the first's 5
    assert await state.get("k#n") == b"6"
    assert (await other.draw([Draw("k", 2.0, 0.001, 1.0)], T)).levels == (approx(0.0),)  # the same bucket
    await other.push("k", b"m", 2)
    await other.push("k", b"n", 2)
    assert await state.items("k") == [b"m", b"n"]
    await other.forget("k")
    assert await _kinds_left(state, "k") == set()
    assert await state.delete("ttl") and not await other.delete("ttl")


async def test_another_state_sees_values_expire(state: State, reopen: Reopen) -> None:
    _shared_only(state)
    other = await reopen()
    await state.put("short", b"1", ttl=0.3)
    assert await other.get("short") == b"1"
    await asyncio.sleep(0.5)
    assert await other.get("short") is None


async def test_two_states_count_and_draw_together(state: State, reopen: Reopen) -> None:
    _shared_only(state)
    other = await reopen()
    both = [state, other]
    got = await asyncio.gather(*(both[i % 2].add("n") for i in range(100)))
    assert sorted(got) == list(range(1, 101))
    bucket = [Draw("b", capacity=6.0, rate=1e-9, amount=1.0)]
    drawn = await asyncio.gather(*(both[i % 2].draw(bucket, time.time()) for i in range(20)))
    assert sum(d.allowed for d in drawn) == 6


def _in_processes(target: Callable[..., None], url: str, key: str, processes: int, times: int) -> list[list[Any]]:
    """Run ``target`` in ``processes`` spawned processes at once; what each returned."""
    spawn = multiprocessing.get_context("spawn")
    barrier = spawn.Barrier(processes)
    out = spawn.Queue()
    workers = [spawn.Process(target=target, args=(url, key, times, barrier, out)) for _ in range(processes)]
    for worker in workers:
        worker.start()
    try:
        results = [out.get(timeout=120) for _ in workers]
    finally:
        for worker in workers:
            worker.join(30)
            if worker.is_alive():
                worker.kill()
    assert all(worker.exitcode == 0 for worker in workers)
    return results


@pytest.mark.slow
async def test_processes_count_each_value_once(state: State, state_url: str) -> None:
    _shared_only(state)
    await state.add("n", 0)
    processes, times = 4, 150
    results = await asyncio.to_thread(_in_processes, procs.count, state_url, "n", processes, times)
    values = sorted(v for got in results for v in got)
    assert values == list(range(1, processes * times + 1))
    assert await state.get("n") == str(processes * times).encode()


@pytest.mark.slow
async def test_processes_draw_exactly_capacity(state: State, state_url: str) -> None:
    _shared_only(state)
    results = await asyncio.to_thread(_in_processes, procs.draw, state_url, "b", 4, 10)
    assert sum(allowed for got in results for allowed in got) == 6


# ---- unreachable engines --------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["sqlite", "redis"])
async def test_an_engine_out_of_reach_is_state_unavailable(engine: str, tmp_path: Path) -> None:
    if engine == "sqlite":
        url = f"sqlite:{tmp_path / 'no such folder' / 'state.db'}"
    else:
        url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    unreachable = open_state(url, SystemClock())
    try:
        with pytest.raises(StateUnavailable) as caught:
            await unreachable.ping()
        assert caught.value.where == hidden(url)
        assert caught.value.status == 503
        with pytest.raises(StateUnavailable):
            await unreachable.add("n")
    finally:
        await unreachable.close()
        await unreachable.records.close()
