"""Image observations of robomimic files: which keys are images, and downscaling them (the
seed paper's proposal of lower resolutions, e.g. 84x84 -> 28x28)."""

from __future__ import annotations

import numpy as np
import torch


def is_image(dtype, step_shape) -> bool:
    """True for an image observation: uint8 with a per-step shape of 3 dimensions
    (H, W, C), as robomimic stores RGB and depth images."""
    return np.dtype(dtype) == np.uint8 and len(step_shape) == 3


def downscale(images: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``images`` (..., H, W, C) uint8 resized to (..., h, w, C) uint8 for ``size`` = (h, w),
    by area averaging (``torch.nn.functional.interpolate(mode="area")``: the mean of each
    output pixel's input pixels, e.g. of 3x3 blocks from 84x84 to 28x28), rounded to the
    nearest integer. Images already of that size are returned as they are.

    Raises:
        ValueError: not uint8 with at least 3 dimensions, or a size that is not two
            positive integers.
    """
    h, w = size
    if images.dtype != np.uint8 or images.ndim < 3:
        raise ValueError(f"images must be (..., H, W, C) uint8, not {images.dtype} {images.shape}")
    if h < 1 or w < 1:
        raise ValueError(f"image size must be two positive integers, not {size}")
    if images.shape[-3:-1] == (h, w):
        return images
    lead, (height, width, channels) = images.shape[:-3], images.shape[-3:]
    x = torch.from_numpy(np.ascontiguousarray(images)).reshape(-1, height, width, channels)
    x = x.permute(0, 3, 1, 2).float()  # N, C, H, W
    x = torch.nn.functional.interpolate(x, size=(h, w), mode="area")
    out = x.round_().to(torch.uint8).permute(0, 2, 3, 1).contiguous()
    return out.reshape(*lead, h, w, channels).numpy()
