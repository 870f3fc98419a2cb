"""The text assembler: UTF-8 boundaries and stop strings, with no model involved."""

from __future__ import annotations

import pytest

from mockserver.spine.events import Token
from mockserver.spine.stopping import TextAssembler


def _run(pieces: list[bytes], stops: tuple[str, ...]) -> tuple[list[str], bool]:
    """Feed byte pieces as tokens; returns the text released after each push (and at the end)."""
    assembler = TextAssembler(stops)
    released: list[str] = []
    for raw in pieces:
        out = assembler.push(raw, lambda text, raw=raw: Token(raw.hex(), raw, text, -1.0))
        released.append("".join(t.text for t in out))
        if assembler.stopped:
            return released, True
    released.append("".join(t.text for t in assembler.flush()))
    return released, False


def test_multibyte_character_is_never_split() -> None:
    smile = "😀".encode()
    released, _ = _run([b"a", smile[:1], smile[1:3], smile[3:], b"b"], ())
    assert released == ["a", "", "", "😀", "b", ""]


def test_dangling_partial_character_is_replaced_at_the_end() -> None:
    released, _ = _run([b"x", "é".encode()[:1]], ())
    assert "".join(released) == "x\ufffd"


@pytest.mark.parametrize(
    ("pieces", "stops", "text", "stopped"),
    [
        pytest.param([b"Hello", b" wor", b"ld"], ("world",), "Hello ", True, id="across-tokens"),
        pytest.param([b"Hello world"], ("o",), "Hell", True, id="inside-one-token"),
        pytest.param([b"ab", b"cd"], ("cd", "bc"), "a", True, id="earliest-match-wins"),
        pytest.param([b"one\n", b"\ntwo"], ("\n\n",), "one", True, id="double-newline"),
        pytest.param([b"abc", b"def"], ("xyz",), "abcdef", False, id="no-match"),
        pytest.param([b"ab", b"c"], ("abd",), "abc", False, id="false-start-released"),
        pytest.param([b"stop"], ("stop",), "", True, id="immediately"),
    ],
)
def test_stop_strings(pieces: list[bytes], stops: tuple[str, ...], text: str, stopped: bool) -> None:
    released, was_stopped = _run(pieces, stops)
    assert "".join(released) == text
    assert was_stopped is stopped


def test_possible_stop_prefix_is_held_back_then_released() -> None:
    released, stopped = _run([b"x a", b"b", b"z"], ("abc",))
    assert not stopped
    assert released[0] == ""  # " a" might begin "abc": the whole token waits
    assert released[1] == ""  # "ab" still might
    assert released[2] == "x abz"  # "abz" cannot: everything goes


def test_tokens_keep_their_logprobs_when_released() -> None:
    assembler = TextAssembler(("END",))
    out = assembler.push(b"fine", lambda text: Token("fine", b"fine", text, -0.5))
    assert [(t.text, t.logprob) for t in out] == [("fine", -0.5)]
    out = assembler.push(b" thEND", lambda text: Token(" thEND", b" thEND", text, -0.25))
    assert [(t.text, t.logprob) for t in out] == [(" th", -0.25)]
