"""The painter and the PNG encoder, without HTTP (the images endpoints: tests/server/test_images.py)."""

from __future__ import annotations

import pytest

from mockserver.media.painting import paint, png_has_alpha
from tests.support.images import read_png, solid_png

PROMPT = "a red fox under a golden sky"


@pytest.mark.parametrize("size", [(256, 256), (1024, 1024), (48, 16)], ids=str)
def test_paint_is_a_valid_png_of_the_size(size: tuple[int, int]) -> None:
    assert read_png(paint(*size, key=b"k", theme=PROMPT)) == (*size, 2)
    assert read_png(paint(*size, key=b"k", theme=PROMPT, transparent=True)) == (*size, 6)


def test_paint_depends_on_key_and_theme_only() -> None:
    one = paint(64, 64, key=b"a", theme="x")
    assert one == paint(64, 64, key=b"a", theme="x")
    assert one != paint(64, 64, key=b"b", theme="x")
    assert one != paint(64, 64, key=b"a", theme="y")


def test_png_has_alpha() -> None:
    assert png_has_alpha(solid_png(4, 4, alpha=True))
    assert not png_has_alpha(solid_png(4, 4))
