"""Deterministic pictures for the images endpoints: a flat-colour landscape painter and a PNG encoder.

Stdlib only (zlib, struct, colorsys, random), so importing it costs nothing and it needs no imaging
library. A picture is a function of its ``key`` (the request's content, seed and image index, hashed
by the caller) and its ``theme`` (the prompt, or an input image's bytes): the theme picks the colours
— a colour word in the prompt ("a red fox") wins, else a hash of it — so the images of one prompt
look related and another prompt's visibly differ; the key places the sun, clouds, mountains and
water. Every draw comes from one ``random.Random`` seeded by the key: no global RNG.

Speed: nothing loops over pixels. The sky is one precomputed diagonal gradient strip of which each
row is a slice; shapes are horizontal spans copied into the row from a precomputed full-width row
of their colour. A 1024×1024 picture takes a few tens of milliseconds, about half of it in zlib.
"""

from __future__ import annotations

import colorsys
import hashlib
import math
import random
import re
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["PNG_SIGNATURE", "encode_png", "paint", "png_has_alpha"]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_LEVEL = 6  # zlib: ~2.5× smaller than level 1 (a 1024² picture is ~22 KB, ~150×) for ~15 ms more

Colour = tuple[float, float, float]  # r, g, b in [0, 1]


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def encode_png(width: int, height: int, rows: Iterable[bytes | bytearray], *, alpha: bool = False) -> bytes:
    """An 8-bit RGB (or RGBA, with ``alpha``) PNG of ``height`` rows of ``width`` pixels each."""
    channels = 4 if alpha else 3
    raw = bytearray()
    count = 0
    for row in rows:
        if len(row) != width * channels:
            raise ValueError(f"row {count} has {len(row)} bytes, expected {width * channels}")
        raw += b"\x00"  # filter type 0 (None): rows are mostly repeats, which zlib finds by itself
        raw += row
        count += 1
    if count != height:
        raise ValueError(f"got {count} rows, expected {height}")
    header = struct.pack(">IIBBBBB", width, height, 8, 6 if alpha else 2, 0, 0, 0)
    return b"".join(
        (PNG_SIGNATURE, _chunk(b"IHDR", header), _chunk(b"IDAT", zlib.compress(raw, _LEVEL)), _chunk(b"IEND", b""))
    )


def png_has_alpha(data: bytes) -> bool:
    """Whether a PNG (already known to be one) can be transparent: an alpha channel, or a tRNS chunk."""
    if len(data) > 25 and data[25] in (4, 6):  # IHDR colour type: grey+alpha, RGBA
        return True
    at = 8
    while at + 8 <= len(data):
        length, kind = struct.unpack_from(">I4s", data, at)
        if kind == b"tRNS":
            return True
        if kind in (b"IDAT", b"IEND"):
            return False  # tRNS must come before the image data
        at += 12 + length
    return False


# Colour words a prompt may name, as HLS hues.
_HUES = {
    "red": 0.0, "crimson": 0.97, "scarlet": 0.01, "orange": 0.07, "amber": 0.1, "gold": 0.12, "golden": 0.12,
    "yellow": 0.15, "lime": 0.25, "green": 0.33, "emerald": 0.38, "teal": 0.47, "cyan": 0.5, "turquoise": 0.48,
    "blue": 0.6, "azure": 0.58, "navy": 0.64, "indigo": 0.7, "purple": 0.78, "violet": 0.8, "lavender": 0.75,
    "magenta": 0.85, "pink": 0.92, "rose": 0.95,
}  # fmt: skip
_DARK = frozenset({"night", "midnight", "dark", "moon", "moonlit", "stars", "starry"})


@dataclass(frozen=True, slots=True)
class _Mood:
    hue: float
    night: bool


def _mood(theme: str | bytes) -> _Mood:
    if isinstance(theme, str):
        words = re.findall(r"[a-z]+", theme.lower())
        hue = next((_HUES[w] for w in words if w in _HUES), None)
        night = any(w in _DARK for w in words)
        if hue is not None:
            return _Mood(hue, night)
        theme = theme.encode()
    else:
        night = False
    h = hashlib.sha256(b"theme" + theme).digest()
    return _Mood(int.from_bytes(h[:2], "big") / 65536, night)


def _hls(h: float, light: float, sat: float) -> Colour:
    return colorsys.hls_to_rgb(h % 1.0, min(max(light, 0.0), 1.0), min(max(sat, 0.0), 1.0))


def _mix(a: Colour, b: Colour, t: float) -> Colour:
    return (a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t, a[2] + (b[2] - a[2]) * t)


def _px(c: Colour, alpha: int | None) -> bytes:
    rgb = bytes(min(255, max(0, round(v * 255))) for v in c)
    return rgb if alpha is None else rgb + bytes((alpha,))


@dataclass(frozen=True, slots=True)
class _Disc:
    cx: int
    cy: int
    r: int
    fill: bytes  # one full row of this shape's colour

    def span(self, y: int) -> tuple[int, int] | None:
        dy = y - self.cy
        if dy * dy > self.r * self.r:
            return None
        dx = math.isqrt(self.r * self.r - dy * dy)
        return self.cx - dx, self.cx + dx + 1


@dataclass(frozen=True, slots=True)
class _Peak:
    px: int
    py: int
    slope: float  # half-width gained per row down
    fill: bytes

    def span(self, y: int) -> tuple[int, int] | None:
        if y < self.py:
            return None
        half = int((y - self.py) * self.slope)
        return self.px - half, self.px + half + 1


def paint(
    width: int, height: int, *, key: bytes, theme: str | bytes, transparent: bool = False, vivid: bool = True
) -> bytes:
    """A ``width``×``height`` PNG landscape: same arguments, same bytes.

    ``transparent`` makes the sky fully transparent (an RGBA PNG); ``vivid`` saturates the colours
    (DALL·E 3's ``style``: vivid, else natural).
    """
    rng = random.Random(int.from_bytes(hashlib.sha256(b"paint" + key).digest(), "big"))
    mood = _mood(theme)
    hue = mood.hue + rng.uniform(-0.02, 0.02)
    sat = 0.75 if vivid else 0.42
    channels = 4 if transparent else 3
    sky_alpha = 0 if transparent else None
    solid = 255 if transparent else None
    w, h = width, height

    top = _hls(hue + rng.uniform(-0.06, 0.06), 0.12 if mood.night else rng.uniform(0.3, 0.45), sat)
    middle = _hls(hue + rng.uniform(0.05, 0.12), 0.3 if mood.night else rng.uniform(0.55, 0.65), sat)
    glow = _hls(hue + rng.uniform(0.1, 0.2), 0.45 if mood.night else rng.uniform(0.78, 0.88), sat)
    sun = _hls(hue + rng.choice((0.5, 0.12, 0.15)), 0.85 if mood.night else 0.7, sat + 0.15)

    # The sky: pixel (x, y) has colour strip[x + slant·(h-1-y)], so each row is a slice of one strip.
    slant = rng.uniform(1.5, 4.0)
    length = w + math.ceil(slant * (h - 1)) + 1
    stops = _sky_strip(length, glow, middle, top, sky_alpha)
    mirror = rng.random() < 0.5
    if mirror:  # lean the other way: mirror every row, i.e. read rows from the mirrored strip
        mirrored = b"".join(stops[i : i + channels] for i in range(len(stops) - channels, -1, -channels))
        offsets = [length - w - round(slant * (h - 1 - y)) for y in range(h)]
        stops = mirrored
    else:
        offsets = [round(slant * (h - 1 - y)) for y in range(h)]

    def fill(c: Colour) -> bytes:
        return _px(c, solid) * w

    def sky_at(x: int, y: int) -> Colour:
        return _gradient(((w - 1 - x if mirror else x) + slant * (h - 1 - y)) / (length - 1), glow, middle, top)

    horizon = int(h * rng.uniform(0.55, 0.72))
    shore = int(h * rng.uniform(0.8, 0.9))
    shapes: list[_Disc | _Peak] = []
    r = max(2, int(min(w, h) * rng.uniform(0.06, 0.11)))
    cx, cy = int(w * rng.uniform(0.15, 0.85)), int(horizon - h * rng.uniform(0.12, 0.35))
    behind = sky_at(cx, cy)
    for scale, t in ((2.1, 0.2), (1.5, 0.45)):  # two halo rings fading into the sky behind the sun
        shapes.append(_Disc(cx, cy, int(r * scale), fill(_mix(behind, sun, t))))
    shapes.append(_Disc(cx, cy, r, fill(sun)))
    cloud = fill(_mix(top, (1.0, 1.0, 1.0), 0.2) if mood.night else _mix(glow, (1.0, 1.0, 1.0), 0.6))
    for _ in range(rng.randint(1, 3)):
        x0, y0, size = int(w * rng.random()), int(horizon * rng.uniform(0.1, 0.6)), min(w, h) * rng.uniform(0.03, 0.06)
        for _ in range(rng.randint(3, 5)):
            dx, dy = int(size * rng.uniform(-2.2, 2.2)), int(size * rng.uniform(-0.5, 0.4))
            shapes.append(_Disc(x0 + dx, y0 + dy, int(size * rng.uniform(0.7, 1.3)), cloud))
    ranges = rng.randint(2, 4)
    for layer in range(ranges):  # far ranges are paler (air in between), near ones darker
        depth = layer / max(1, ranges - 1)
        tone = fill(_mix(_mix(glow, top, 0.5), _hls(hue + 0.55, 0.12, sat * 0.6), 0.3 + 0.6 * depth))
        base = horizon + int((shore - horizon) * depth * 0.6)
        for _ in range(rng.randint(2, 5)):
            peak = int(base - h * rng.uniform(0.05, 0.25) * (1.2 - 0.4 * depth))
            shapes.append(_Peak(int(w * rng.uniform(-0.1, 1.1)), peak, rng.uniform(0.9, 2.6), tone))

    deep = _hls(hue + 0.55, 0.1, sat * 0.5)
    water = (fill(_mix(top, deep, 0.45)), fill(_mix(middle, deep, 0.5)))  # the sky, darkened
    ripple = max(2, h // 90)
    reflection = fill(_mix(sun, glow, 0.3))

    def rows() -> Iterable[bytearray]:
        for y in range(h):
            if y >= shore:  # water: stripes, and the sun's broken reflection narrowing towards us
                band = (y - shore) // ripple
                row = bytearray(water[band % 2])
                if band % 2 == 0:
                    _put(row, cx - r + (y - shore) // 3, cx + r - (y - shore) // 3, reflection, w, channels)
                yield row
                continue
            at = offsets[y] * channels
            row = bytearray(stops[at : at + w * channels])
            for shape in shapes:
                span = shape.span(y)
                if span is not None:
                    _put(row, span[0], span[1], shape.fill, w, channels)
            yield row

    return encode_png(w, h, rows(), alpha=transparent)


def _put(row: bytearray, x0: int, x1: int, fill: bytes, width: int, channels: int) -> None:
    x0, x1 = max(0, x0), min(width, x1)
    if x1 > x0:
        row[x0 * channels : x1 * channels] = fill[x0 * channels : x1 * channels]


def _sky_strip(length: int, low: Colour, middle: Colour, high: Colour, alpha: int | None) -> bytes:
    """``length`` pixels from ``low`` through ``middle`` (at 55 %) to ``high``, eased."""
    last = max(1, length - 1)
    return b"".join(_px(_gradient(i / last, low, middle, high), alpha) for i in range(length))


def _gradient(t: float, low: Colour, middle: Colour, high: Colour) -> Colour:
    t = min(max(t, 0.0), 1.0)
    u = t / 0.55 if t < 0.55 else (t - 0.55) / 0.45
    return _mix(low, middle, u * u * (3 - 2 * u)) if t < 0.55 else _mix(middle, high, u * u * (3 - 2 * u))
