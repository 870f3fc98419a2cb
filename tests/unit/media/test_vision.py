"""Image sizes read from real (tiny, hand-built) headers, and priced by OpenAI's tiling rule."""

from __future__ import annotations

import base64
import socket
import struct
import subprocess
import sys
import zlib
from typing import Any

import pytest

from mockserver.errors import InvalidRequest
from mockserver.media.vision import (
    REMOTE_SIZE,
    ImageInfo,
    decode_data_url,
    image_tokens,
    images_tokens,
    read_image,
    url_tokens,
)

PARAM = "messages[0].content[1].image_url"

# ---------------------------------------------------------------- tiny images, built by byte layout


def png(width: int, height: int) -> bytes:
    """A complete, valid black RGB PNG (what any decoder would accept, not just our header reader)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    rows = (b"\x00" + b"\x00" * 3 * width) * height  # filter byte 0 per row
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def jpeg(width: int, height: int, sof: int = 0xC0, fill: bool = False) -> bytes:
    """SOI, a JFIF APP0 and a DQT to skip, the frame header, then SOS and EOI."""
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    dqt = b"\xff\xdb" + struct.pack(">H", 67) + b"\x00" + bytes(range(64))
    frame = struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"  # one component
    sof_segment = (b"\xff\xff\xff" if fill else b"\xff") + bytes([sof]) + frame
    sos = b"\xff\xda" + struct.pack(">HB", 8, 1) + b"\x01\x00\x00\x3f\x00"
    return b"\xff\xd8" + app0 + dqt + sof_segment + sos + b"\x00" * 8 + b"\xff\xd9"


def gif(width: int, height: int, version: bytes = b"89a") -> bytes:
    return b"GIF" + version + struct.pack("<HHBBB", width, height, 0, 0, 0) + b";"


def riff(fourcc: bytes, payload: bytes) -> bytes:
    body = b"WEBP" + fourcc + struct.pack("<I", len(payload)) + payload
    return b"RIFF" + struct.pack("<I", len(body)) + body


def webp_vp8(width: int, height: int) -> bytes:
    # frame tag (keyframe), start code, 14-bit sizes with 2 scale bits set to check they are masked
    return riff(b"VP8 ", b"\x30\x01\x00\x9d\x01\x2a" + struct.pack("<HH", width | 0x4000, height | 0xC000) + bytes(8))


def webp_vp8l(width: int, height: int) -> bytes:
    bits = (width - 1) | ((height - 1) << 14) | (1 << 28)  # alpha hint set; version 0
    return riff(b"VP8L", b"\x2f" + struct.pack("<I", bits) + bytes(5))


def webp_vp8x(width: int, height: int) -> bytes:
    payload = b"\x10\x00\x00\x00" + (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return riff(b"VP8X", payload)


def bmp(width: int, height: int, core: bool = False) -> bytes:
    if core:
        dib = struct.pack("<IHHHH", 12, width, height, 1, 24)
    else:
        dib = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, 0, 2835, 2835, 0, 0)
    return b"BM" + struct.pack("<IHHI", 14 + len(dib), 0, 0, 14 + len(dib)) + dib


def data_url(data: bytes, media_type: str = "image/png") -> str:
    return f"data:{media_type};base64," + base64.b64encode(data).decode()


# ---------------------------------------------------------------- read_image

READS: list[Any] = [
    pytest.param(png(3, 2), ImageInfo(3, 2, "image/png"), id="png"),
    pytest.param(png(1, 300), ImageInfo(1, 300, "image/png"), id="png-tall"),
    pytest.param(jpeg(640, 480), ImageInfo(640, 480, "image/jpeg"), id="jpeg-baseline-sof0"),
    pytest.param(jpeg(1920, 1080, 0xC1), ImageInfo(1920, 1080, "image/jpeg"), id="jpeg-extended-sof1"),
    pytest.param(jpeg(800, 600, 0xC2), ImageInfo(800, 600, "image/jpeg"), id="jpeg-progressive-sof2"),
    pytest.param(jpeg(65535, 1, 0xC2, fill=True), ImageInfo(65535, 1, "image/jpeg"), id="jpeg-fill-bytes"),
    pytest.param(gif(320, 200), ImageInfo(320, 200, "image/gif"), id="gif89a"),
    pytest.param(gif(16, 9, b"87a"), ImageInfo(16, 9, "image/gif"), id="gif87a"),
    pytest.param(webp_vp8(400, 301), ImageInfo(400, 301, "image/webp"), id="webp-vp8"),
    pytest.param(webp_vp8l(16384, 7), ImageInfo(16384, 7, "image/webp"), id="webp-vp8l"),
    pytest.param(webp_vp8x(16777216, 2), ImageInfo(16777216, 2, "image/webp"), id="webp-vp8x"),
    pytest.param(bmp(12, 34), ImageInfo(12, 34, "image/bmp"), id="bmp"),
    pytest.param(bmp(12, -34), ImageInfo(12, 34, "image/bmp"), id="bmp-top-down"),
    pytest.param(bmp(5, 6, core=True), ImageInfo(5, 6, "image/bmp"), id="bmp-core"),
]


@pytest.mark.parametrize(("data", "expected"), READS)
def test_read_image(data: bytes, expected: ImageInfo) -> None:
    assert read_image(data) == expected


def _with_bad_crc(data: bytes) -> bytes:
    return data[:29] + bytes([data[29] ^ 0xFF]) + data[30:]


UNREADABLE: list[Any] = [
    pytest.param(b"", "not a PNG, JPEG, GIF or WebP", id="empty"),
    pytest.param(b"hello, world", "not a PNG, JPEG, GIF or WebP", id="text"),
    pytest.param(b"RIFF\x00\x00\x00\x00WAVEfmt ", "not a PNG, JPEG, GIF or WebP", id="riff-not-webp"),
    pytest.param(png(4, 4)[:20], "PNG image is truncated", id="png-truncated"),
    pytest.param(png(4, 4)[:32], "PNG image is truncated", id="png-truncated-in-crc"),
    pytest.param(_with_bad_crc(png(4, 4)), "bad IHDR checksum", id="png-bad-crc"),
    pytest.param(png(0, 4), "empty size 0x4", id="png-zero-width"),
    pytest.param(b"\xff\xd8", "JPEG image is truncated", id="jpeg-soi-only"),
    pytest.param(jpeg(8, 8)[:30], "JPEG image is truncated", id="jpeg-truncated-in-app0"),
    pytest.param(b"\xff\xd8\xff\xda\x00\x08", "no frame header", id="jpeg-scan-before-frame"),
    pytest.param(b"\xff\xd8\x00\x00", "expected a segment marker", id="jpeg-garbage"),
    pytest.param(jpeg(0, 8), "empty size", id="jpeg-zero-width"),
    pytest.param(gif(5, 5)[:8], "GIF image is truncated", id="gif-truncated"),
    pytest.param(gif(0, 0), "empty size", id="gif-zero"),
    pytest.param(webp_vp8(4, 4)[:28], "WebP image is truncated", id="webp-truncated"),
    pytest.param(riff(b"VP8 ", bytes(18)), "bad VP8 start code", id="webp-bad-start-code"),
    pytest.param(riff(b"VP8L", bytes(10)), "bad VP8L signature", id="webp-bad-vp8l-signature"),
    pytest.param(riff(b"ALPH", bytes(10)), "unknown first chunk", id="webp-unknown-chunk"),
    pytest.param(bmp(4, 4)[:20], "BMP image is truncated", id="bmp-truncated"),
]


@pytest.mark.parametrize(("data", "reason"), UNREADABLE)
def test_read_image_refuses(data: bytes, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        read_image(data)


# ---------------------------------------------------------------- data URLs


def test_decode_data_url() -> None:
    assert decode_data_url(data_url(png(7, 5))) == ImageInfo(7, 5, "image/png")


def test_decode_data_url_trusts_the_bytes_not_the_label() -> None:
    assert decode_data_url(data_url(gif(2, 3), "image/png")).media_type == "image/gif"


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("data:;base64," + base64.b64encode(gif(2, 3)).decode(), id="no-media-type"),
        pytest.param("DATA:IMAGE/GIF;BASE64," + base64.b64encode(gif(2, 3)).decode(), id="upper-case"),
        pytest.param("data:image/gif;name=a.gif;base64," + base64.b64encode(gif(2, 3)).decode(), id="extra-param"),
        pytest.param("data:image/gif;base64," + base64.b64encode(gif(2, 3)).decode().rstrip("="), id="no-padding"),
        pytest.param("data:image/gif;base64,R0lG\nODlh\r\nAgAD AAAA Ozs=", id="line-wrapped"),
    ],
)
def test_decode_data_url_lenient_forms(url: str) -> None:
    assert decode_data_url(url).width == 2


BAD_DATA_URLS: list[Any] = [
    pytest.param("https://example.com/a.png", "not a data URL", id="not-data"),
    pytest.param("data:image/png;base64", "no ','", id="no-comma"),
    pytest.param("data:image/png," + "%89PNG", "not base64-encoded", id="missing-base64"),
    pytest.param("data:text/plain;base64," + base64.b64encode(png(1, 1)).decode(), "not an image type", id="text"),
    pytest.param("data:image/png;base64,", "carries no data", id="empty-data"),
    pytest.param("data:image/png;base64,iVBOR*w0KGgo=", "not valid base64", id="bad-char"),
    pytest.param("data:image/png;base64,iVBORw0KG", "not valid base64", id="bad-length"),
    pytest.param(data_url(b"just some text"), "not a PNG, JPEG, GIF or WebP", id="not-an-image"),
    pytest.param(data_url(png(9, 9)[:16]), "PNG image is truncated", id="truncated-png"),
]


@pytest.mark.parametrize(("url", "reason"), BAD_DATA_URLS)
def test_decode_data_url_refuses(url: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        decode_data_url(url)


# ---------------------------------------------------------------- the tiling rule

TOKENS: list[Any] = [
    # OpenAI's own worked examples
    pytest.param(1024, 1024, "high", 765, id="openai-1024-square-high"),
    pytest.param(2048, 4096, "high", 1105, id="openai-2048x4096-high"),
    pytest.param(4096, 8192, "low", 85, id="openai-4096x8192-low"),
    # more, worked by hand from the same rule
    pytest.param(4096, 8192, "high", 1105, id="fit-2048-then-768"),  # → 1024×2048 → 768×1536: 2×3 tiles
    pytest.param(1024, 1024, "auto", 765, id="auto-is-high"),
    pytest.param(512, 512, "high", 255, id="one-tile"),
    pytest.param(513, 512, "high", 425, id="one-pixel-over"),  # short side ≤768: not enlarged, 2×1 tiles
    pytest.param(100, 100, "high", 255, id="small-not-enlarged"),
    pytest.param(768, 768, "high", 765, id="short-side-exactly-768"),
    pytest.param(1920, 1080, "high", 1105, id="full-hd"),  # → 1365×768: 3×2 tiles
    pytest.param(1, 5000, "high", 765, id="sliver-never-zero"),  # → 1×2048: 1×4 tiles
    pytest.param(1, 1, "low", 85, id="low-tiny"),
]


@pytest.mark.parametrize(("width", "height", "detail", "tokens"), TOKENS)
def test_image_tokens(width: int, height: int, detail: str, tokens: int) -> None:
    assert image_tokens(width, height, detail) == tokens
    assert image_tokens(height, width, detail) == tokens  # orientation does not matter


@pytest.mark.parametrize(("width", "height", "detail"), [(0, 5, "high"), (5, -1, "low"), (5, 5, "medium")])
def test_image_tokens_refuses(width: int, height: int, detail: str) -> None:
    with pytest.raises(ValueError):
        image_tokens(width, height, detail)


# ---------------------------------------------------------------- url_tokens: the request boundary


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("an image URL was fetched")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.mark.parametrize(
    ("detail", "tokens"), [(None, 765), ("auto", 765), ("high", 765), ("low", 85)], ids=["none", "auto", "high", "low"]
)
@pytest.mark.parametrize("url", ["https://example.com/cat.png", "HTTP://127.0.0.1:9/x?y=1"], ids=["https", "http"])
@pytest.mark.usefixtures("no_network")
def test_remote_urls_are_priced_not_fetched(url: str, detail: str | None, tokens: int) -> None:
    assert REMOTE_SIZE == (1024, 1024)
    assert url_tokens(url, detail, PARAM) == tokens


@pytest.mark.parametrize(
    ("data", "detail", "tokens"),
    [
        pytest.param(png(1024, 1024), "high", 765, id="png-1024-high"),
        pytest.param(png(1024, 1024), None, 765, id="png-1024-auto"),
        pytest.param(png(1024, 1024), "low", 85, id="png-1024-low"),
        pytest.param(jpeg(2048, 4096, 0xC2), "high", 1105, id="jpeg-2048x4096-high"),
        pytest.param(webp_vp8l(300, 200), "high", 255, id="webp-small"),
        pytest.param(gif(1920, 1080), "auto", 1105, id="gif-full-hd"),
    ],
)
def test_data_urls_are_measured(data: bytes, detail: str | None, tokens: int) -> None:
    assert url_tokens(data_url(data), detail, PARAM) == tokens


INVALID: list[Any] = [
    pytest.param("", "the image URL is empty", id="empty"),
    pytest.param("   ", "the image URL is empty", id="blank"),
    pytest.param("ftp://example.com/a.png", "expected an http(s) URL or a base64 data URL", id="ftp"),
    pytest.param("file:///etc/passwd", "expected an http(s) URL or a base64 data URL", id="file"),
    pytest.param("cat.png", "expected an http(s) URL or a base64 data URL", id="relative"),
    pytest.param("https://", "has no host", id="no-host"),
    pytest.param("http:/example.com/a.png", "has no host", id="one-slash"),
    pytest.param("data:image/png;base64,@@@@", "the data URL is not valid base64", id="bad-base64"),
    pytest.param("data:image/png,abc", "not base64-encoded", id="missing-base64"),
    pytest.param(data_url(b"GIF89a"), "GIF image is truncated", id="truncated-gif"),
    pytest.param(data_url(b"%PDF-1.7"), "not a PNG, JPEG, GIF or WebP image", id="pdf"),
    pytest.param(data_url(bmp(4, 4), "image/bmp"), "BMP images are not supported", id="bmp-refused-like-openai"),
]


@pytest.mark.parametrize(("url", "reason"), INVALID)
@pytest.mark.usefixtures("no_network")
def test_url_tokens_refuses(url: str, reason: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        url_tokens(url, "high", PARAM)
    exc = caught.value
    assert exc.param == PARAM
    assert exc.status == 400
    assert exc.message.startswith(f"Invalid image in {PARAM}: ")
    assert reason in exc.message
    assert exc.body()["error"]["param"] == PARAM


def test_url_tokens_message_reads_whole() -> None:
    with pytest.raises(InvalidRequest) as caught:
        url_tokens("data:image/png;base64,iVBOR*", None, PARAM)
    assert caught.value.message == f"Invalid image in {PARAM}: the data URL is not valid base64."
    assert caught.value.code == "invalid_image_url"


def test_url_tokens_keeps_megabytes_of_base64_out_of_the_message() -> None:
    with pytest.raises(InvalidRequest) as caught:
        url_tokens("blob:" + "A" * 1_000_000, None, PARAM)
    assert len(caught.value.message) < 200


def test_url_tokens_refuses_a_non_string() -> None:
    with pytest.raises(InvalidRequest) as caught:
        url_tokens(123, None, PARAM)  # type: ignore[arg-type]
    assert caught.value.param == PARAM


@pytest.mark.parametrize("detail", ["medium", "HIGH", ""])
def test_bad_detail_names_the_detail_param(detail: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        url_tokens("https://example.com/a.png", detail, PARAM)
    assert caught.value.param == f"{PARAM}.detail"
    assert repr(detail) in caught.value.message
    assert caught.value.code == "invalid_value"


def test_bad_detail_param_can_be_a_sibling() -> None:
    """Responses' input_image keeps detail beside image_url, not inside it."""
    with pytest.raises(InvalidRequest) as caught:
        url_tokens(
            "https://x.test/a.png", "max", "input[0].content[1].image_url", detail_param="input[0].content[1].detail"
        )
    assert caught.value.param == "input[0].content[1].detail"


# ---------------------------------------------------------------- Fireworks `images`


@pytest.mark.usefixtures("no_network")
def test_images_tokens_sums_each_at_auto() -> None:
    urls = [data_url(png(1024, 1024)), "https://example.com/b.jpg", data_url(gif(10, 10), "image/gif")]
    assert images_tokens(urls, "images") == 765 + 765 + 255
    assert images_tokens([], "images") == 0


def test_images_tokens_blames_the_index() -> None:
    with pytest.raises(InvalidRequest) as caught:
        images_tokens(["https://example.com/a.png", "data:image/jpeg;base64,!!"], "images")
    assert caught.value.param == "images[1]"
    assert caught.value.message.startswith("Invalid image in images[1]: ")


# ---------------------------------------------------------------- import cost


def test_import_is_cheap() -> None:
    code = (
        "import sys, mockserver.media.vision\n"
        "heavy = {'torch', 'numpy', 'pydantic', 'starlette', 'httpx', 'PIL'} & set(sys.modules)\n"
        "print(sorted(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
