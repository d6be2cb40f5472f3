"""Fidelity of a copy's frames against the source's: PSNR and SSIM per frame, summarised.

PSNR is over all RGB samples, ``10 log10(255^2 / MSE)`` dB (infinite for identical frames).
SSIM is Wang et al. (2004) on the luma (BT.601 weights) with a 7x7 uniform window and
K1 = 0.01, K2 = 0.03 (scikit-image's ``structural_similarity`` defaults without
``gaussian_weights``), the mean over the frame's windows.
"""

from __future__ import annotations

import math

import numpy as np

WINDOW = 7
C1, C2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)


def psnr(reference: np.ndarray, frame: np.ndarray) -> float:
    """PSNR in dB of ``frame`` against ``reference``, both (H, W, 3) uint8; inf when equal."""
    diff = reference.astype(np.int16) - frame.astype(np.int16)
    mse = float(np.mean(np.square(diff, dtype=np.int32)))
    return math.inf if mse == 0 else 10 * math.log10(255**2 / mse)


def _box_mean(x: np.ndarray) -> np.ndarray:
    """Mean over every WINDOW x WINDOW window fully inside ``x`` (valid positions only)."""
    c = np.pad(x, ((1, 0), (1, 0))).cumsum(0).cumsum(1)
    w = WINDOW
    return (c[w:, w:] - c[:-w, w:] - c[w:, :-w] + c[:-w, :-w]) / (w * w)


def ssim(reference: np.ndarray, frame: np.ndarray) -> float:
    """SSIM of the luma of ``frame`` against ``reference``, both (H, W, 3) uint8, in [-1, 1]
    (1 for identical frames). Frames smaller than 7x7 give 1.0 when equal, else 0.0."""
    if min(reference.shape[:2]) < WINDOW:
        return 1.0 if np.array_equal(reference, frame) else 0.0
    x = reference.astype(np.float64) @ LUMA
    y = frame.astype(np.float64) @ LUMA
    mx, my = _box_mean(x), _box_mean(y)
    n = WINDOW * WINDOW
    cov = n / (n - 1)  # sample covariance, as scikit-image
    vx = (_box_mean(x * x) - mx * mx) * cov
    vy = (_box_mean(y * y) - my * my) * cov
    vxy = (_box_mean(x * y) - mx * my) * cov
    s = ((2 * mx * my + C1) * (2 * vxy + C2)) / ((mx * mx + my * my + C1) * (vx + vy + C2))
    return float(s.mean())


class Fidelity:
    """Accumulates per-frame PSNR and SSIM; ``summary()`` gives means and worst frames.

    Args:
        stride: compare every ``stride``-th frame offered (1: every frame).
    """

    def __init__(self, stride: int = 1) -> None:
        self.stride = max(1, int(stride))
        self.offered = 0
        self.psnr: list[float] = []
        self.ssim: list[float] = []
        self.identical = True

    def add(self, reference, frame) -> None:
        """Compare one frame (H, W, 3) uint8 with its reference, if it falls on the stride.

        Either may be a zero-argument callable returning the array, called only when the
        frame is compared (so skipped frames cost no pixel-format conversion).

        Raises:
            ValueError: the shapes differ.
        """
        self.offered += 1
        if (self.offered - 1) % self.stride:
            return
        reference = reference() if callable(reference) else reference
        frame = frame() if callable(frame) else frame
        if reference.shape != frame.shape:
            raise ValueError(f"frame shape {frame.shape} differs from reference {reference.shape}")
        p = psnr(reference, frame)
        self.identical &= math.isinf(p)
        self.psnr.append(p)
        self.ssim.append(1.0 if math.isinf(p) else ssim(reference, frame))

    def summary(self) -> dict:
        """``frames_compared``, ``lossless`` (every compared frame bit-identical),
        ``psnr_mean_db`` (mean of the per-frame PSNRs; None when lossless), ``psnr_worst_db``,
        ``ssim_mean``, ``ssim_worst``."""
        return summarise([self.summary_parts()])

    def summary_parts(self) -> dict:
        """The raw per-frame lists, to combine several files' measurements (``summarise``)."""
        return {"psnr": self.psnr, "ssim": self.ssim}


def summarise(parts: list[dict]) -> dict:
    """Combine per-frame lists (``Fidelity.summary_parts``) into the summary fields."""
    psnrs = [p for part in parts for p in part["psnr"]]
    ssims = [s for part in parts for s in part["ssim"]]
    finite = [p for p in psnrs if not math.isinf(p)]
    lossless = bool(psnrs) and not finite
    return {
        "frames_compared": len(psnrs),
        "lossless": lossless,
        # identical frames count as 100 dB in the mean, so a near-lossless copy is not
        # reported worse than it is
        "psnr_mean_db": None
        if lossless or not psnrs
        else float(np.mean([min(p, 100.0) for p in psnrs])),
        "psnr_worst_db": None if lossless or not finite else float(min(finite)),
        "ssim_mean": float(np.mean(ssims)) if ssims else None,
        "ssim_worst": float(min(ssims)) if ssims else None,
    }
