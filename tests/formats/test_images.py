"""decode_image: the same RGB arrays as Pillow (what lerobot's datasets.Image gives), faster."""

import io

import numpy as np
import pytest
from PIL import Image

from robopipe.formats.images import decode_image


def _encoded(array: np.ndarray, mode: str, fmt: str, **options) -> bytes:
    out = io.BytesIO()
    Image.fromarray(array, mode).save(out, fmt, **options)
    return out.getvalue()


def _pillow(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as image:
        return np.array(image.convert("RGB"))


def _photo(shape) -> np.ndarray:
    """Smooth gradients plus noise: a JPEG with real chroma subsampling work to do."""
    y, x = np.mgrid[: shape[0], : shape[1]]
    base = np.stack([x * 255 // shape[1], y * 255 // shape[0], (x + y) % 256, x ^ y], -1)
    noise = np.random.default_rng(0).integers(0, 40, shape)
    return ((base[..., : shape[2]] + noise) % 256).astype(np.uint8)


@pytest.mark.parametrize(
    ("mode", "fmt", "options"),
    [
        ("RGB", "JPEG", {"quality": 90}),  # 4:2:0, as robopipe's jpeg copies
        ("RGB", "JPEG", {"quality": 95, "subsampling": 0}),  # 4:4:4
        ("RGB", "JPEG", {"quality": 75, "progressive": True}),
        ("L", "JPEG", {"quality": 90}),
        ("CMYK", "JPEG", {"quality": 90}),  # not libjpeg-turbo's RGB path: Pillow's
        ("RGB", "PNG", {}),
        ("RGB", "PPM", {}),
    ],
)
def test_decode_image_equals_pillow(mode, fmt, options):
    channels = {"L": 1, "RGB": 3, "CMYK": 4}[mode]
    array = _photo((48, 64, channels))
    data = _encoded(array[..., 0] if mode == "L" else array, mode, fmt, **options)
    decoded = decode_image(data)
    assert decoded.shape == (48, 64, 3) and decoded.dtype == np.uint8 and decoded.flags.writeable
    assert np.array_equal(decoded, _pillow(data))
