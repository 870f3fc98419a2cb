"""The reference model's tokenizer: a byte-level BPE shipped as ``assets/tokenizer.json``.

It is trained by :mod:`training.train` with HF ``tokenizers``; this module only
loads it. Byte-level means every string encodes (emoji included) and every token is an exact
byte string, which is what logprobs report (``bytes``) and what lets streaming hold back a
multi-byte character that a token boundary has split.

The chat template is ChatML-like and lives here so that training and serving render a
conversation to the very same token ids::

    <|im_start|>system\\nYou are terse.<|im_end|>\\n<|im_start|>user\\nHi<|im_end|>\\n
    <|im_start|>assistant\\n          ← the generation prompt; the model ends with <|im_end|>
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cache, lru_cache
from pathlib import Path

from tokenizers import Tokenizer as _HFTokenizer

__all__ = ["ASSETS", "EOS", "IM_END", "IM_START", "SPECIAL_TOKENS", "NotUnicode", "Tokenizer"]

ASSETS = Path(__file__).parent / "assets"
EOS = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = (EOS, IM_START, IM_END)  # ids 0, 1, 2 in this order

CACHED_TEXTS = 4096  # texts whose ids are remembered
CACHED_LENGTH = 2048  # characters: longer texts are encoded every time
RELEASED_LENGTH = 8192  # characters: longer texts are encoded with the GIL released

# Roles as the template names them: OpenAI's "developer" is the newer name for "system".
_ROLE_NAMES = {"developer": "system"}


def byte_alphabet() -> dict[int, str]:
    """GPT-2's byte → printable-character table used by byte-level BPE.

    Printable Latin-1 bytes stand for themselves; the other 68 bytes are shifted to code
    points from 256 up, so that every byte has a visible, non-whitespace stand-in.
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {b: chr(b) for b in printable}
    shifted = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + shifted)
            shifted += 1
    return table


def display(raw: bytes) -> str:
    """How a token is named in logprobs: its text, or ``bytes:\\xNN…`` if not valid UTF-8.

    OpenAI names partial characters this way; it also keeps names unique per token, so a
    ``{token: logprob}`` map never merges two tokens.
    """
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return "bytes:" + "".join(f"\\x{b:02x}" for b in raw)


class NotUnicode(ValueError):
    """Text that is not Unicode: JSON may escape half a surrogate pair (``"\\ud800"``), which no
    byte-level tokenizer can encode. Callers answer it with a 400 naming the field."""


class Tokenizer:
    """Encode text, render chats, and give each token id its exact bytes."""

    def __init__(self, hf: _HFTokenizer) -> None:
        self._hf = hf
        self.vocab_size: int = hf.get_vocab_size(with_added_tokens=True)
        ids = [hf.token_to_id(t) for t in SPECIAL_TOKENS]
        if None in ids:
            raise ValueError(f"tokenizer lacks one of the special tokens {SPECIAL_TOKENS}")
        self.eos_id, self.im_start_id, self.im_end_id = (int(i or 0) for i in ids)
        self.special_ids = frozenset((self.eos_id, self.im_start_id, self.im_end_id))
        inverse = {ch: b for b, ch in byte_alphabet().items()}
        vocab = hf.get_vocab(with_added_tokens=True)
        table: list[bytes] = [b""] * self.vocab_size
        for token, index in vocab.items():
            if index not in self.special_ids:
                table[index] = bytes(inverse[ch] for ch in token)
        names = [display(b) for b in table]
        for name, index in zip(SPECIAL_TOKENS, (self.eos_id, self.im_start_id, self.im_end_id), strict=True):
            names[index] = name  # specials have no bytes, but they do have a name
        self._bytes = tuple(table)
        self._names = tuple(names)
        # Test suites send the same texts again and again (a scripted answer, a system prompt,
        # an agent's growing history), and one HF encode costs ~50 µs: short texts are
        # remembered, bounded in count and size.
        self._remembered = lru_cache(maxsize=CACHED_TEXTS)(self._encode)

    @classmethod
    def from_file(cls, path: Path) -> Tokenizer:
        return cls(_HFTokenizer.from_file(str(path)))

    @staticmethod
    @cache
    def shipped() -> Tokenizer:
        """The tokenizer that ships in the package (loaded once per process)."""
        return Tokenizer.from_file(ASSETS / "tokenizer.json")

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; adds no special tokens of its own (:class:`NotUnicode` for a
        lone surrogate)."""
        if len(text) <= CACHED_LENGTH:
            return list(self._remembered(text))
        return list(self._encode(text))

    def _encode(self, text: str) -> tuple[int, ...]:
        try:
            if len(text) > RELEASED_LENGTH:
                # The same ids; but HF's encode_batch lets go of the GIL while it works (encode
                # holds it throughout), so a thread encoding a long prompt leaves the event loop
                # running (an 8 KiB text takes ~8 ms, a megabyte a second).
                return tuple(self._hf.encode_batch([text], add_special_tokens=False)[0].ids)
            return tuple(self._hf.encode(text, add_special_tokens=False).ids)
        except TypeError:  # what the Rust side raises for a str it cannot turn into UTF-8
            raise NotUnicode("it is not valid Unicode (a lone surrogate escape such as \\ud800)") from None

    def token_bytes(self, token_id: int) -> bytes:
        """The exact bytes a token stands for (empty for special tokens)."""
        return self._bytes[token_id]

    def token_name(self, token_id: int) -> str:
        """The token as logprobs name it (see :func:`display`)."""
        return self._names[token_id]

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ``ids``, special tokens dropped, invalid UTF-8 replaced."""
        return b"".join([self._bytes[i] for i in ids]).decode("utf-8", errors="replace")

    def render_chat(self, messages: Sequence[tuple[str, str]], generation_prompt: bool = True) -> list[int]:
        """Token ids of a conversation of ``(role, content)`` pairs in the chat template."""
        ids: list[int] = []
        newline = self.encode("\n")
        for role, content in messages:
            ids.append(self.im_start_id)
            ids.extend(self.encode(f"{_ROLE_NAMES.get(role, role)}\n{content}"))
            ids.append(self.im_end_id)
            ids.extend(newline)
        if generation_prompt:
            ids.append(self.im_start_id)
            ids.extend(self.encode("assistant\n"))
        return ids
