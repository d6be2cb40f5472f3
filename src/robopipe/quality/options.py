"""The quality checks' names, their default severities and every threshold, declared once.

The workflow builds :class:`QualityOptions` from a dataset's ``quality:`` config section
(merged over the top-level ``quality:`` defaults) with :meth:`QualityOptions.from_config`, and
passes :meth:`QualityOptions.to_config` as Snakemake params, so that changing an option reruns
the quality jobs. Where a rule follows another tool, the check's docstring in
:mod:`robopipe.quality.numeric` or :mod:`robopipe.quality.video` says which.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

# The content checks, in report order.
CHECKS = (
    "nan_inf",
    "frozen_signal",
    "constant_dimension",
    "clipped_dimension",
    "action_jump",
    "idle_episode",
    "episode_length_outlier",
    "duplicate_episode",
    "stats_mismatch",
    "timestamp_drift",
    "frozen_camera",
    "black_camera",
)
# What a check cannot read gives a finding of one of these instead of a traceback.
STRUCTURAL_CHECKS = ("missing_file", "unreadable_file", "unreadable_video", "unknown_feature")
ALL_CHECKS = CHECKS + STRUCTURAL_CHECKS

SEVERITIES = ("info", "warning", "error")
SEVERITY_RANK = {"": 0, "info": 1, "warning": 2, "error": 3}

# (default severity, one-line description, the option naming its threshold or None)
CHECK_INFO: dict[str, tuple[str, str, str | None]] = {
    "nan_inf": ("error", "NaN or infinite values in a numeric feature", None),
    "frozen_signal": (
        "warning",
        "an observation feature's whole vector repeats exactly for frozen_signal_s or longer",
        "frozen_signal_s",
    ),
    "constant_dimension": (
        "warning",
        "a dimension holds one value through the whole episode while it moves in most others",
        None,
    ),
    "clipped_dimension": (
        "warning",
        "a dimension sits exactly at its episode minimum or maximum for clipped_fraction of "
        "the frames or more, in runs (a saturated sensor or clamped command)",
        "clipped_fraction",
    ),
    "action_jump": (
        "warning",
        "a frame-to-frame action change of action_jump_z robust z-scores or more "
        "(MAD of the dataset's deltas) and action_jump_span of the dimension's range",
        "action_jump_z",
    ),
    "idle_episode": (
        "warning",
        "the episode barely moves: every dimension's range is under idle_ratio of its "
        "typical range",
        "idle_ratio",
    ),
    "episode_length_outlier": (
        "warning",
        "the episode's length is length_z robust z-scores from the median, or under "
        "length_min_s seconds",
        "length_z",
    ),
    "duplicate_episode": (
        "warning",
        "the episode repeats an earlier one exactly, or within duplicate_tolerance of its "
        "typical ranges",
        "duplicate_tolerance",
    ),
    "stats_mismatch": (
        "warning",
        "stored per-episode or global stats differ from the data by more than stats_rtol",
        "stats_rtol",
    ),
    "timestamp_drift": (
        "warning",
        "timestamps run off frame_index / fps: not increasing (error), a rate off 1/fps by "
        "timestamp_rate_tolerance or a drift over timestamp_drift_s (warning), wall-clock "
        "jitter (info)",
        "timestamp_drift_s",
    ),
    "frozen_camera": (
        "warning",
        "a camera's picture does not change for frozen_camera_s or longer",
        "frozen_camera_s",
    ),
    "black_camera": (
        "warning",
        "a camera's picture is black for black_camera_s or longer",
        "black_camera_s",
    ),
    "missing_file": ("error", "a data or video file the metadata names is missing", None),
    "unreadable_file": ("error", "a data file or metadata file cannot be read", None),
    "unreadable_video": ("error", "a video file cannot be decoded", None),
    "unknown_feature": ("info", "a feature of a kind the checks do not read", None),
}


@dataclass(frozen=True)
class QualityOptions:
    """The quality checks' settings: which frames are decoded, and each check's threshold.

    Attributes:
        decode: ``"sample"`` (default): one frame every ``sample_s`` seconds of every camera of
            every episode, plus its last frame; ``"all"``: every frame.
        sample_s: seconds between sampled frames (default 0.5 s: a stretch of 2 s holds at
            least 4 samples, enough to see it frozen or black).
        device: where frames are decoded: ``"auto"`` (a CUDA GPU through torchcodec where one
            is present, else the CPU through PyAV), ``"cpu"`` or ``"cuda"`` (falls back to the
            CPU when no GPU can decode, recorded in quality.json's ``decode`` section).
        fail_on: ``"never"`` (default: findings are data), ``"error"`` or ``"warning"``: the
            quality target fails when a finding is at least that severe (lerobot-doctor's
            ``--fail-on``).
        severity: per check name, a severity that replaces the default (``"info"``,
            ``"warning"``, ``"error"``), or ``"off"`` to skip the check.
        info_dimensions: substrings of dimension names (info.json ``names``) whose constant
            or clipped values are normal (a gripper open or closed through an episode):
            findings on them are ``info``.
        frozen_signal_s: seconds an observation vector must repeat exactly to be frozen
            (at least 3 frames).
        clipped_fraction: share of an episode's frames at its minimum or maximum value.
        action_jump_z: robust z-score (``|delta| / (1.4826 * MAD)``) of an action jump.
        action_jump_span: an action jump is also at least this share of the dimension's
            range over the dataset.
        idle_ratio: an episode is idle when each dimension's range is below this share of its
            median range over episodes.
        length_z: robust z-score of an episode length outlier (Iglewicz and Hoaglin's
            modified z-score cut-off is 3.5).
        length_min_s: an episode shorter than this is an outlier (lerobot-doctor: 1 s).
        duplicate_tolerance: near duplicates differ by at most this share of each
            dimension's typical range at every point of their downsampled signals.
        stats_rtol: relative tolerance of a stored stat against the data (also used as an
            absolute tolerance relative to the feature's range).
        timestamp_drift_s: largest ``|timestamp - frame_index / fps|`` before a warning.
        timestamp_rate_tolerance: largest relative error of the median frame interval
            against ``1 / fps`` (lerobot-doctor's 10 %).
        frozen_camera_s: seconds a camera must not change to be frozen.
        frozen_camera_diff: mean absolute luma difference (0-255) below which two frames
            are the same picture.
        black_camera_s: seconds a camera must be black.
        black_luma: mean luma (0-255) at or below which a frame is black.
    """

    decode: Literal["sample", "all"] = "sample"
    sample_s: float = 0.5
    device: Literal["auto", "cpu", "cuda"] = "auto"
    fail_on: Literal["error", "warning", "never"] = "never"
    severity: Mapping[str, str] = field(default_factory=dict)
    info_dimensions: tuple[str, ...] = ("gripper",)
    frozen_signal_s: float = 1.0
    clipped_fraction: float = 0.1
    action_jump_z: float = 50.0
    action_jump_span: float = 0.75
    idle_ratio: float = 0.05
    length_z: float = 5.0
    length_min_s: float = 1.0
    duplicate_tolerance: float = 0.01
    stats_rtol: float = 1e-3
    timestamp_drift_s: float = 5.0
    timestamp_rate_tolerance: float = 0.1
    frozen_camera_s: float = 2.0
    frozen_camera_diff: float = 0.5
    black_camera_s: float = 1.0
    black_luma: float = 16.0

    def __post_init__(self) -> None:
        choices = {
            "decode": ("sample", "all"),
            "device": ("auto", "cpu", "cuda"),
            "fail_on": ("error", "warning", "never"),
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"quality option {name} must be one of {', '.join(allowed)}, "
                    f"not {getattr(self, name)!r}"
                )
        for check, value in self.severity.items():
            if check not in ALL_CHECKS:
                raise ValueError(f"quality severity: unknown check {check!r}{_hint(check)}")
            if value not in (*SEVERITIES, "off"):
                raise ValueError(
                    f"quality severity of {check}: {value!r} is not info, warning, error or off"
                )
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, float) and not value > 0:
                raise ValueError(f"quality option {f.name} must be > 0, got {value}")
        object.__setattr__(self, "severity", dict(self.severity))
        object.__setattr__(self, "info_dimensions", tuple(self.info_dimensions))

    def severity_of(self, check: str) -> str:
        """The severity of ``check``'s findings: the configured one, else its default
        (``"off"`` when the check is disabled)."""
        return self.severity.get(check, CHECK_INFO[check][0])

    def enabled(self, check: str) -> bool:
        """Whether ``check`` runs (its severity is not ``"off"``)."""
        return self.severity_of(check) != "off"

    def threshold_of(self, check: str) -> float | None:
        """The value of the option that is ``check``'s threshold, or None."""
        name = CHECK_INFO[check][2]
        return None if name is None else getattr(self, name)

    @classmethod
    def from_config(cls, section: Mapping | None) -> QualityOptions:
        """The options of a ``quality:`` config section (None: the defaults).

        Integers are accepted for float options; lists for ``info_dimensions``.

        Raises:
            ValueError: an unknown key (the message names the nearest valid one) or a value
                out of range.
        """
        section = dict(section or {})
        names = [f.name for f in dataclasses.fields(cls)]
        for key in section:
            if key not in names:
                raise ValueError(f"unknown quality option {key!r}{_hint(key, names)}")
        for f in dataclasses.fields(cls):
            if f.name in section and f.type == "float" and isinstance(section[f.name], int):
                section[f.name] = float(section[f.name])
        return cls(**section)

    def to_config(self) -> dict:
        """The options as plain config values (JSON and YAML ready): ``from_config`` of it
        gives these options back."""
        out = dataclasses.asdict(self)
        out["info_dimensions"] = list(self.info_dimensions)
        out["severity"] = dict(self.severity)
        return out


def _hint(key: str, names=ALL_CHECKS) -> str:
    close = difflib.get_close_matches(key, list(names), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""
