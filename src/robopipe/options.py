"""The settings of one v2.1 -> v3.0 conversion, with every default declared once."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from robopipe.layout import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_DATA_FILE_SIZE_IN_MB,
    DEFAULT_TOLERANCE_S,
    DEFAULT_VIDEO_FILE_SIZE_IN_MB,
)
from robopipe.retry import DEFAULT_BUDGET, RetryBudget


@dataclass(frozen=True)
class ConversionOptions:
    """How a dataset is converted. The workflow builds it from config with :meth:`from_config`;
    the config keys are these field names (``workflow/schemas/config.schema.yaml``).

    Attributes:
        data_file_size_in_mb: a data file rolls over before an episode that would bring it to
            this size, MiB of the source parquet's uncompressed size (lerobot 0.6.1 default 100).
        video_file_size_in_mb: the same for each camera's video files, MiB on disk (lerobot
            default 200).
        chunks_size: files per ``chunk-XXX`` directory (lerobot's ``DEFAULT_CHUNK_SIZE``, 1000).
        shard_size_in_mb: the work a shard job (robopipe's unit of parallelism for rows) aims
            at, in MiB: its episodes' source parquets, uncompressed (the measure of
            ``data_file_size_in_mb``), plus 0.05 MiB per episode for the per-file cost
            (:func:`robopipe.conversion.plan.make_shards`). Bytes, not frames: a shard job
            reads, checks and rewrites parquet rows, whose width varies 10x between datasets,
            and holds them in memory, so bytes track both its time and its memory; it does
            not read the mp4s (the aggregate_video jobs do). Default 200: about 2 s of work
            (9 ms per MiB, 0.5 ms per episode, measured) against about 1 s of process start-up,
            imports and plan loading, so no job is mostly start-up (20,000 episodes of 4 KB make
            6 shards of 2 s, where 250 episodes per shard made 80 jobs of 0.2 s work); and twice
            the default data file, so with default data files a shard is a whole data file
            (shards never straddle one) and a big dataset still spreads over one shard job per
            100 MiB data file. Lower it for the ``compute_missing_stats`` repair, whose shards
            also decode video.
        episodes_per_shard: most episodes in one shard job, an upper bound on top of
            ``shard_size_in_mb`` (default 10,000: above the 4,000 episodes the default target
            allows, so the target decides; a small value gives small shards for tests).
        check_episodes_per_job: most episode indices one source check job reads (a local
            v2.1 source of more episodes is checked by parallel part jobs over ranges of
            indices, merged into one report; default 10,000: a dataset below it keeps one job,
            and a part's memory and time do not grow with the dataset).
        skip_episodes: source episode indices left out; the kept episodes are renumbered
            ``0..N-1`` in source order (v3.0 requires contiguous episode indices).
        restamp_timestamps: rewrite ``timestamp`` as ``frame_index / fps``, seconds.
        tolerance_s: allowed ``|timestamp - frame_index / fps|``, seconds (lerobot 0.6.1
            ``LeRobotDataset`` default 1e-4).
        validate_frames: ``"sample"``: compare the first, middle and last frame of every episode
            and camera with the source; ``"all"``: every frame.
        compute_missing_stats, derive_missing_columns, template_placeholders, cast_float64:
            the opt-in repairs of non-standard v2.1 exports
            (:data:`robopipe.formats.v21_repairs.REPAIRS` says what each does).
        undeclared_columns: the repair of data columns that info.json does not declare:
            ``"drop"`` or ``"declare"`` (None, the default: refused by the check).
        retry_attempts, retry_seconds, read_timeout_s: the retry budget of each remote read
            of a remote source (:class:`robopipe.retry.RetryBudget`: attempts, seconds, a
            client's read timeout); they change no output.
    """

    data_file_size_in_mb: float = DEFAULT_DATA_FILE_SIZE_IN_MB
    video_file_size_in_mb: float = DEFAULT_VIDEO_FILE_SIZE_IN_MB
    chunks_size: int = DEFAULT_CHUNK_SIZE
    shard_size_in_mb: float = 200.0
    episodes_per_shard: int = 10_000
    check_episodes_per_job: int = 10_000
    skip_episodes: tuple[int, ...] = ()
    restamp_timestamps: bool = False
    tolerance_s: float = DEFAULT_TOLERANCE_S
    validate_frames: Literal["sample", "all"] = "sample"
    compute_missing_stats: bool = False
    derive_missing_columns: bool = False
    template_placeholders: bool = False
    cast_float64: bool = False
    undeclared_columns: Literal["drop", "declare"] | None = None
    retry_attempts: int = DEFAULT_BUDGET.attempts
    retry_seconds: float = DEFAULT_BUDGET.seconds
    read_timeout_s: float = DEFAULT_BUDGET.read_timeout_s

    @property
    def retry_budget(self) -> RetryBudget:
        """How long each remote read of a remote source is retried (planning, check, shard
        fetches)."""
        return RetryBudget(self.retry_attempts, self.retry_seconds, self.read_timeout_s)

    def __post_init__(self) -> None:
        if self.episodes_per_shard < 1:
            raise ValueError(f"episodes_per_shard must be >= 1, got {self.episodes_per_shard}")
        if self.check_episodes_per_job < 1:
            raise ValueError(
                f"check_episodes_per_job must be >= 1, got {self.check_episodes_per_job}"
            )
        if not self.shard_size_in_mb > 0:
            raise ValueError(f"shard_size_in_mb must be > 0, got {self.shard_size_in_mb}")
        if self.validate_frames not in ("sample", "all"):
            raise ValueError(
                f"validate_frames must be 'sample' or 'all', not {self.validate_frames!r}"
            )
        if self.undeclared_columns not in (None, "drop", "declare"):
            raise ValueError(
                f"undeclared_columns must be 'drop' or 'declare', not {self.undeclared_columns!r}"
            )
        self.retry_budget  # noqa: B018  (raises ValueError for a value out of range)
        object.__setattr__(self, "skip_episodes", tuple(sorted(set(self.skip_episodes))))

    @classmethod
    def from_config(cls, *layers: dict | None) -> ConversionOptions:
        """The options of config ``conversion:`` mappings, later layers overriding earlier ones
        (the workflow passes the top-level ``conversion:`` then the dataset's own).

        Raises:
            ValueError: a key is not a field of this class, or a value is out of range.
        """
        merged: dict = {}
        for layer in layers:
            merged.update(layer or {})
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(merged) - names)
        if unknown:
            raise ValueError(f"unknown conversion option(s): {', '.join(unknown)}")
        if "skip_episodes" in merged:
            merged["skip_episodes"] = tuple(merged["skip_episodes"])
        return cls(**merged)

    def to_dict(self) -> dict:
        """The options as JSON-ready config keys (``skip_episodes`` as a list)."""
        out = dataclasses.asdict(self)
        out["skip_episodes"] = list(self.skip_episodes)
        return out
