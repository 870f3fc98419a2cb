"""PNGs for tests: read one strictly, make a solid one, or a blank one as a data URL."""

from __future__ import annotations

import base64
import struct
import zlib

from mockserver.media.painting import encode_png


def read_png(data: bytes) -> tuple[int, int, int]:
    """(width, height, colour type) of a PNG, after checking its signature, every chunk's CRC and
    that the image data inflates to exactly one filter byte plus one row of pixels per row."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at, chunks, idat = 8, [], b""
    while at < len(data):
        (length,) = struct.unpack_from(">I", data, at)
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        assert zlib.crc32(kind + body) == struct.unpack_from(">I", data, at + 8 + length)[0], kind
        chunks.append(kind)
        idat += body if kind == b"IDAT" else b""
        at += 12 + length
    assert chunks[0] == b"IHDR" and chunks[-1] == b"IEND" and b"IDAT" in chunks
    width, height, depth, colour = struct.unpack_from(">IIBB", data, 16)
    assert depth == 8 and colour in (2, 6)
    assert len(zlib.decompress(idat)) == height * (1 + width * (4 if colour == 6 else 3))
    return width, height, colour


def solid_png(width: int, height: int, alpha: bool = False, rgb: bytes = b"\x20\x80\xc0") -> bytes:
    pixel = rgb + b"\xff" if alpha else rgb
    return encode_png(width, height, [pixel * width] * height, alpha=alpha)


def png_data_url(width: int, height: int) -> str:
    """A real (blank) PNG as a data URL."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    raw = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
    return "data:image/png;base64," + base64.b64encode(raw).decode()
