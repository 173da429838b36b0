"""Checks that a written figure is a real, non-empty image of the expected size."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from the PNG header: signature, then the IHDR chunk first."""
    head = Path(path).read_bytes()[:24]
    assert head[:8] == PNG_SIGNATURE, f"{path} is not a PNG file"
    assert head[12:16] == b"IHDR", f"{path}: first PNG chunk is not IHDR"
    return struct.unpack(">II", head[16:24])


def assert_png(path: Path, size: tuple[int, int] = (960, 630)) -> None:
    """A decodable PNG of ``size`` pixels that is not blank (it has ink and paper); a
    figure whose legend found no free place inside its axes is taller by the legend's
    height (``ewif.plotting.style.finish``), never wider."""
    import matplotlib.image

    width, height = png_size(path)
    assert width == size[0] and size[1] <= height <= 1.6 * size[1], (width, height)
    pixels = matplotlib.image.imread(path)
    assert pixels.shape[:2] == (height, width)
    grey = pixels[..., :3].mean(axis=-1)
    assert (grey < 0.3).mean() > 0.002, f"{path} has (almost) no dark pixels"
    assert (grey > 0.95).mean() > 0.3, f"{path} has (almost) no background"
    assert np.unique(grey).size > 8, f"{path} looks flat"


def assert_image(path: Path, size: tuple[int, int] = (960, 630)) -> None:
    """Check a PNG fully, an SVG or PDF by its header and a plausible length."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".png":
        assert_png(path, size)
        return
    data = path.read_bytes()
    assert len(data) > 2000, f"{path} is suspiciously small ({len(data)} bytes)"
    if suffix == ".pdf":
        assert data.startswith(b"%PDF-") and b"%%EOF" in data[-64:]
    elif suffix == ".svg":
        text = data.decode()
        assert "<svg" in text and text.rstrip().endswith("</svg>")
        width_pt = size[0] / 150 * 72  # pixels at the style's dpi -> points
        assert f'width="{width_pt:g}pt"' in text
    else:
        raise AssertionError(f"unexpected image suffix {suffix}")
