"""What an image in a request costs: its size read from the header, priced as OpenAI prices it.

The reference model cannot see, so an image only adds prompt tokens. Images arrive as chat
``image_url`` parts, Responses ``input_image`` parts and the Fireworks completions ``images``
list; each is a ``data:`` URL (decoded and measured here) or an http(s) URL (never fetched: it
is priced as :data:`REMOTE_SIZE`). Only headers are parsed, with the stdlib, so this module is
cheap to import and needs no imaging library.
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from mockserver.errors import InvalidRequest

__all__ = [
    "DETAILS",
    "REMOTE_SIZE",
    "SUPPORTED_MEDIA_TYPES",
    "ImageInfo",
    "data_url_bytes",
    "decode_data_url",
    "image_tokens",
    "images_tokens",
    "read_image",
    "url_tokens",
]

DETAILS = ("low", "high", "auto")
# What OpenAI accepts. read_image also reads BMP headers, but a request carrying one is refused
# as OpenAI refuses it, so a test that passes here does not fail against the real API.
SUPPORTED_MEDIA_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
# A remote image is never downloaded (the server is offline by design), so its size is unknown.
# 1024×1024 is a typical photo/screenshot size and prices as 765 tokens at high detail (4 tiles),
# 85 at low: a stable, documented number a test can assert on.
REMOTE_SIZE = (1024, 1024)

_LOW_TOKENS = 85  # low detail: one 512px thumbnail, whatever the size
_BASE_TOKENS = 85  # high detail: the thumbnail again, plus…
_TILE_TOKENS = 170  # …this much per 512×512 tile
_TILE = 512
_MAX_SIDE = 2048
_SHORT_SIDE = 768


@dataclass(frozen=True, slots=True)
class ImageInfo:
    """An image's pixel size and the media type its bytes (not its label) say it is."""

    width: int
    height: int
    media_type: str


def read_image(data: bytes) -> ImageInfo:
    """Read the size of a PNG, JPEG (any SOF frame: baseline, progressive, …), GIF, WebP
    (VP8, VP8L, VP8X) or BMP image from its header.

    Raises ValueError, with a reason that reads after "Invalid image: ", if the bytes are none
    of these, are truncated before the size, or declare an empty image.
    """
    for magic, reader in _READERS:
        if data.startswith(magic) and (magic != b"RIFF" or data[8:12] == b"WEBP"):
            info = reader(data)
            if info.width <= 0 or info.height <= 0:
                size = f"{info.width}x{info.height}"
                raise ValueError(f"the {_name(info.media_type)} image declares an empty size {size}")
            return info
    raise ValueError("the data is not a PNG, JPEG, GIF or WebP image")


def _name(media_type: str) -> str:
    return media_type.removeprefix("image/").upper().replace("WEBP", "WebP")


def _truncated(media_type: str) -> ValueError:
    return ValueError(f"the {_name(media_type)} image is truncated before its size")


def _png(data: bytes) -> ImageInfo:
    # Signature, then the IHDR chunk: length, type, width, height, …, and a CRC over type+data.
    if len(data) < 33:
        raise _truncated("image/png")
    length, kind = struct.unpack_from(">I4s", data, 8)
    if kind != b"IHDR" or length != 13:
        raise ValueError("the PNG image does not start with an IHDR chunk")
    # The CRC is cheap to check and catches a header that was cut or mangled in transit.
    if binascii.crc32(data[12:29]) != struct.unpack_from(">I", data, 29)[0]:
        raise ValueError("the PNG image header is corrupt (bad IHDR checksum)")
    width, height = struct.unpack_from(">II", data, 16)
    return ImageInfo(width, height, "image/png")


# Start-of-frame markers carry the size: all of C0–CF except DHT (C4), JPG (C8) and DAC (CC).
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_STANDALONE = frozenset({0x01, *range(0xD0, 0xD8)})  # markers without a length field


def _jpeg(data: bytes) -> ImageInfo:
    i, n = 2, len(data)
    while True:
        if i >= n:
            raise _truncated("image/jpeg")
        if data[i] != 0xFF:
            raise ValueError("the JPEG image is corrupt (expected a segment marker)")
        while i < n and data[i] == 0xFF:  # any number of 0xFF fill bytes may precede a marker
            i += 1
        if i >= n:
            raise _truncated("image/jpeg")
        marker = data[i]
        i += 1
        if marker in _STANDALONE:
            continue
        if marker in (0xD9, 0xDA):  # end of image / start of scan, and no frame header seen
            raise ValueError("the JPEG image has no frame header (SOF) before its data")
        if i + 2 > n:
            raise _truncated("image/jpeg")
        (length,) = struct.unpack_from(">H", data, i)
        if length < 2:
            raise ValueError("the JPEG image is corrupt (bad segment length)")
        if marker in _SOF:
            if i + 7 > n:
                raise _truncated("image/jpeg")
            # length(2) precision(1) height(2) width(2)
            height, width = struct.unpack_from(">HH", data, i + 3)
            return ImageInfo(width, height, "image/jpeg")
        i += length


def _gif(data: bytes) -> ImageInfo:
    if len(data) < 10:
        raise _truncated("image/gif")
    width, height = struct.unpack_from("<HH", data, 6)  # the logical screen descriptor
    return ImageInfo(width, height, "image/gif")


def _webp(data: bytes) -> ImageInfo:
    # RIFF header (12 bytes), then the first chunk: fourcc(4) size(4) payload from offset 20.
    if len(data) < 30:
        raise _truncated("image/webp")
    fourcc = data[12:16]
    if fourcc == b"VP8 ":  # lossy: 3-byte frame tag, start code, then 14-bit sizes (2 bits scale)
        if data[23:26] != b"\x9d\x01\x2a":
            raise ValueError("the WebP image is corrupt (bad VP8 start code)")
        width, height = struct.unpack_from("<HH", data, 26)
        return ImageInfo(width & 0x3FFF, height & 0x3FFF, "image/webp")
    if fourcc == b"VP8L":  # lossless: signature byte, then width-1 and height-1 in 14 bits each
        if data[20] != 0x2F:
            raise ValueError("the WebP image is corrupt (bad VP8L signature)")
        (bits,) = struct.unpack_from("<I", data, 21)
        return ImageInfo((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1, "image/webp")
    if fourcc == b"VP8X":  # extended: flags(1) reserved(3), canvas width-1 and height-1 in 24 bits
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return ImageInfo(width, height, "image/webp")
    raise ValueError(f"the WebP image has an unknown first chunk {fourcc!r}")


def _bmp(data: bytes) -> ImageInfo:
    # 14-byte file header, then the DIB header: its size tells the old 16-bit layout from the rest.
    if len(data) < 18:
        raise _truncated("image/bmp")
    (header_size,) = struct.unpack_from("<I", data, 14)
    if header_size == 12:
        if len(data) < 22:
            raise _truncated("image/bmp")
        width, height = struct.unpack_from("<HH", data, 18)
        return ImageInfo(width, height, "image/bmp")
    if header_size < 16:
        raise ValueError("the BMP image is corrupt (bad header size)")
    if len(data) < 26:
        raise _truncated("image/bmp")
    width, height = struct.unpack_from("<ii", data, 18)
    return ImageInfo(width, abs(height), "image/bmp")  # a negative height means rows run top-down


_READERS = (
    (b"\x89PNG\r\n\x1a\n", _png),
    (b"\xff\xd8", _jpeg),
    (b"GIF87a", _gif),
    (b"GIF89a", _gif),
    (b"RIFF", _webp),
    (b"BM", _bmp),
)


def decode_data_url(url: str) -> ImageInfo:
    """Decode ``data:[<mediatype>][;base64],<data>`` and read the image in it.

    Raises ValueError saying what is wrong: not a data URL, not base64 (OpenAI takes images
    only base64-encoded), a non-image media type, invalid base64, no data, or undecodable bytes.
    """
    return read_image(data_url_bytes(url))


def data_url_bytes(url: str) -> bytes:
    """The bytes of a base64 ``data:`` URL of an image; ValueError saying what is wrong."""
    if url[:5].lower() != "data:":
        raise ValueError("not a data URL")
    header, comma, payload = url[5:].partition(",")
    if not comma:
        raise ValueError("the data URL has no ',' before its data")
    params = [p.strip() for p in header.split(";")]
    if params[-1].lower() != "base64":
        raise ValueError("the data URL is not base64-encoded (expected data:<media type>;base64,<data>)")
    media_type = params[0].lower()
    if media_type and not media_type.startswith("image/"):
        raise ValueError(f"the data URL's media type is {params[0]!r}, not an image type")
    # Line-wrapped base64 (MIME style) is common; stray padding is forgiven, other characters are not.
    text = "".join(payload.split()).rstrip("=")
    if not text:
        raise ValueError("the data URL carries no data")
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("the data URL is not valid base64") from None


def image_tokens(width: int, height: int, detail: str) -> int:
    """Prompt tokens for a ``width``×``height`` image at ``detail``, by OpenAI's tiling rule.

    low: a flat 85. high: fit within 2048×2048, then shrink so the shortest side is 768 (neither
    step enlarges), then 170 per 512px tile covering it, plus 85. auto: OpenAI lets the model
    choose and does not say how; we price it as high, never less than low, so context-length
    checks err towards refusing rather than admitting a request the real API would refuse.
    """
    if width <= 0 or height <= 0:
        raise ValueError(f"image size must be positive, got {width}x{height}")
    if detail not in DETAILS:
        raise ValueError(f"detail must be one of {', '.join(DETAILS)}, got {detail!r}")
    if detail == "low":
        return _LOW_TOKENS
    # Integer arithmetic, truncating like an image resize to whole pixels (and never to zero).
    if max(width, height) > _MAX_SIDE:
        long_side = max(width, height)
        width, height = max(1, width * _MAX_SIDE // long_side), max(1, height * _MAX_SIDE // long_side)
    if min(width, height) > _SHORT_SIDE:
        short_side = min(width, height)
        width, height = width * _SHORT_SIDE // short_side, height * _SHORT_SIDE // short_side
    tiles = -(-width // _TILE) * -(-height // _TILE)
    return _TILE_TOKENS * tiles + _BASE_TOKENS


def url_tokens(url: str, detail: str | None, param: str, *, detail_param: str | None = None) -> int:
    """Tokens for one image reference.

    ``data:`` URLs are decoded and measured; http(s) URLs are accepted but never fetched and
    priced as :data:`REMOTE_SIZE`. ``detail`` None means "auto". Anything wrong raises
    :class:`InvalidRequest` with ``param`` — or, for a bad detail, ``detail_param`` (default
    ``param + ".detail"``, right for chat's ``image_url`` object; Responses' ``input_image``
    keeps ``detail`` beside ``image_url``, so its caller passes the sibling path).
    """
    detail = "auto" if detail is None else detail
    if detail not in DETAILS:
        where = detail_param or f"{param}.detail"
        raise InvalidRequest(
            f"Invalid value for '{where}': {detail!r}. Supported values are: 'low', 'high', and 'auto'.",
            param=where,
            code="invalid_value",
        )
    if not isinstance(url, str) or not url.strip():  # a JSON body can carry anything here
        raise _invalid(param, "the image URL is empty", "invalid_image_url")
    scheme = url.partition(":")[0].lower()
    if scheme == "data":
        try:
            data = data_url_bytes(url)
        except ValueError as exc:
            raise _invalid(param, str(exc), "invalid_image_url") from None
        try:
            info = read_image(data)
        except ValueError as exc:
            raise _invalid(param, str(exc), "invalid_image_format") from None
        if info.media_type not in SUPPORTED_MEDIA_TYPES:
            reason = f"{_name(info.media_type)} images are not supported; use PNG, JPEG, GIF or WebP"
            raise _invalid(param, reason, "invalid_image_format")
        return image_tokens(info.width, info.height, detail)
    if scheme in ("http", "https"):
        rest = url[len(scheme) + 1 :]
        if not rest.startswith("//") or not rest[2:].split("/", 1)[0].strip():
            raise _invalid(param, f"the URL {_short(url)} has no host", "invalid_image_url")
        return image_tokens(*REMOTE_SIZE, detail)
    raise _invalid(param, f"expected an http(s) URL or a base64 data URL, got {_short(url)}", "invalid_image_url")


def images_tokens(urls: Sequence[str], param: str) -> int:
    """Tokens for the Fireworks completions ``images`` list, each at "auto", blamed as ``param[i]``."""
    return sum(url_tokens(url, None, f"{param}[{i}]") for i, url in enumerate(urls))


def _invalid(param: str, reason: str, code: str) -> InvalidRequest:
    return InvalidRequest(f"Invalid image in {param}: {reason}.", param=param, code=code)


def _short(url: str) -> str:
    """The URL for an error message, cut so a pasted megabyte of base64 does not become the message."""
    return repr(url if len(url) <= 60 else url[:57] + "...")
