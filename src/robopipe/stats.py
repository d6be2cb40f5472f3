"""Episode and dataset statistics, computed as lerobot computes them.

One episode (v2.1 ``meta/episodes_stats.jsonl``, v3.0 ``stats/*`` episodes columns): lerobot
0.3.x ``datasets/compute_stats.py`` (line numbers below are lerobot 0.3.3's).
:func:`compute_episode_stats` gives, per feature, ``min``, ``max``, ``mean``, ``std``
(population, ``ddof=0``) and ``count``:

- numeric features over the episode's frames (axis 0), in the dtype numpy gives: float32
  data gives float32 mean/std, integer data float64;
- camera features per channel over about 100 sampled frames (:func:`sample_indices`),
  channel-first, downsampled (:func:`auto_downsample_height_width`), scaled by 1/255: float64
  arrays of shape ``(3, 1, 1)``, ``count`` the number of sampled frames.

Many episodes (v3.0 ``meta/stats.json``): lerobot 0.6.1 ``datasets/compute_stats.py:582``
``aggregate_feature_stats`` and ``:622`` ``aggregate_stats`` (:func:`aggregate_stats`).

NaN and inf are kept, as lerobot keeps them: its reductions are numpy's plain ones, not the
``nan*`` ones (0.3.3 ``compute_stats.py:75``: ``np.min``, ``np.max``, ``np.mean``, ``np.std``;
0.6.1's episode stats, ``RunningQuantileStats`` at ``compute_stats.py:30``, and its
aggregation at ``:582``: the same, ``np.minimum``/``np.maximum`` and weighted sums). So a NaN
in a dimension makes that dimension's min, max, mean and std NaN, and an inf makes its min or
max ``±inf``, its mean ``±inf`` (NaN where both signs meet) and its std NaN, in an episode's
stats and in the dataset's alike; JSON holds them as Python's ``json`` writes them (``NaN``,
``Infinity``, ``-Infinity``), as lerobot's files do. Nothing is skipped or replaced: finding
such values is the quality stage's job.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # imported where used: only the compute_missing_stats repair reads files
    import pyarrow as pa

STAT_KEYS = ("min", "max", "mean", "std", "count")


# ---------------------------------------------------------------------------- one episode
def estimate_num_samples(
    dataset_len: int,
    min_num_samples: int = 100,
    max_num_samples: int = 10_000,
    power: float = 0.75,
) -> int:
    """Number of frames sampled for image stats (lerobot 0.3.3 ``compute_stats.py:21``).

    ``max(min(n, 100), min(int(n ** 0.75), 10_000))`` for ``n = dataset_len`` frames: every
    frame up to 100, then 100 up to ~500, 177 at 1000.
    """
    return max(min(min_num_samples, dataset_len), min(int(dataset_len**power), max_num_samples))


def sample_indices(data_len: int) -> np.ndarray:
    """Frame indices sampled for image stats (lerobot 0.3.3 ``compute_stats.py:41``).

    Returns int64 indices ``round(linspace(0, data_len - 1, estimate_num_samples(data_len)))``,
    shape ``(estimate_num_samples(data_len),)``, strictly increasing.
    """
    num_samples = estimate_num_samples(data_len)
    return np.round(np.linspace(0, data_len - 1, num_samples)).astype(int)


def auto_downsample_height_width(
    img: np.ndarray, target_size: int = 150, max_size_threshold: int = 300
) -> np.ndarray:
    """Stride-subsample a channel-first image (lerobot 0.3.3 ``compute_stats.py:46``).

    ``img`` has shape ``(..., H, W)`` (pixels). Returned unchanged when
    ``max(H, W) < max_size_threshold``, otherwise a view keeping every
    ``int(max(H, W) / target_size)``-th row and column.
    """
    height, width = img.shape[-2:]
    if max(width, height) < max_size_threshold:
        return img
    factor = int(width / target_size) if width > height else int(height / target_size)
    return img[..., ::factor, ::factor]


def _feature_stats(array: np.ndarray, axis, keepdims: bool) -> dict[str, np.ndarray]:
    # lerobot 0.3.3 compute_stats.py:75 get_feature_stats
    return {
        "min": np.min(array, axis=axis, keepdims=keepdims),
        "max": np.max(array, axis=axis, keepdims=keepdims),
        "mean": np.mean(array, axis=axis, keepdims=keepdims),
        "std": np.std(array, axis=axis, keepdims=keepdims),
        "count": np.array([len(array)]),
    }


def sample_frames(frames: np.ndarray) -> np.ndarray:
    """A camera's frames as lerobot 0.3.3 ``compute_stats.py:57`` ``sample_images`` gives them
    to the image stats.

    ``frames``: the episode's uint8 RGB frames ``(T, H, W, 3)``. Returns the ``N =``
    ``estimate_num_samples(T)`` frames at :func:`sample_indices`, channel-first and downsampled
    (:func:`auto_downsample_height_width`): a C-contiguous uint8 ``(N, 3, h, w)`` array, the
    memory layout lerobot's has (it decides the summation order of :func:`image_stats`).
    """
    sampled = frames[sample_indices(len(frames))].transpose(0, 3, 1, 2)
    return np.ascontiguousarray(auto_downsample_height_width(sampled))


def image_stats(sampled: np.ndarray) -> dict[str, np.ndarray]:
    """Per-channel stats of a camera's sampled frames (lerobot 0.3.3 ``compute_stats.py:85``
    ``compute_episode_stats``, image branch).

    ``sampled``: uint8 ``(N, 3, h, w)``, channel-first and downsampled (:func:`sample_frames`).
    min/max/mean/std over axes (0, 2, 3), divided by 255: float64 arrays of shape ``(3, 1, 1)``
    in [0, 1]; ``count`` = ``[N]`` (int64, shape ``(1,)``). The std's last bits depend on
    ``sampled``'s memory layout (numpy sums in memory order).
    """
    stats = _feature_stats(sampled, axis=(0, 2, 3), keepdims=True)
    return {k: v if k == "count" else np.squeeze(v / 255.0, axis=0) for k, v in stats.items()}


def numeric_stats(data: np.ndarray) -> dict[str, np.ndarray]:
    """Stats of a numeric feature over its frames (lerobot 0.3.3 ``compute_stats.py:85``
    ``compute_episode_stats``, numeric branch).

    ``data``: ``(T,)`` or ``(T, D)``, in the feature's units. min/max/mean/std over axis 0, with
    ``keepdims`` for 1-D data so that a scalar feature gives arrays of shape ``(1,)``, else
    ``(D,)``; ``count`` = ``[T]`` (int64). The dtype follows numpy: min/max keep ``data``'s,
    float32 data gives float32 mean/std, integer data float64.
    """
    return _feature_stats(data, axis=0, keepdims=data.ndim == 1)


# lerobot 0.6.1 compute_stats.py:27 DEFAULT_QUANTILES, as its stats keys name them, and the
# bins of the histogram its quantiles are read from (RunningQuantileStats, :30)
QUANTILES = {"q01": 0.01, "q10": 0.10, "q50": 0.50, "q90": 0.90, "q99": 0.99}
QUANTILE_BINS = 5000


def quantile_stats(data: np.ndarray) -> dict[str, np.ndarray]:
    """Stats of a numeric feature over one episode's frames with quantiles, as lerobot 0.6.1
    computes them (``compute_stats.py:434`` ``get_feature_stats`` with axis 0: one
    ``RunningQuantileStats`` update; ``:404`` ``_compute_basic_stats`` below 2 frames).

    ``data``: ``(T,)`` or ``(T, D)``. Returns ``min``, ``max``, ``mean``, ``std``, ``count``
    (``[T]``, int64) and ``q01`` ... ``q99`` (:data:`QUANTILES`), each of shape ``(1,)`` for
    1-D data, else ``(D,)``. From 2 frames on the values are cast to at least float32 first;
    ``std`` is ``sqrt(max(0, mean(x**2) - mean(x)**2))`` (not ``np.std``), and each quantile
    is read from a :data:`QUANTILE_BINS`-bin histogram between min and max, interpolated
    linearly inside its bin. Below 2 frames: numpy's min/max/mean/std, each quantile the mean.
    """
    values = data.reshape(-1, 1) if data.ndim == 1 else data
    count = np.array([len(values)])
    if len(values) < 2:
        stats = {
            "min": np.min(values, axis=0),
            "max": np.max(values, axis=0),
            "mean": np.mean(values, axis=0),
            "std": np.std(values, axis=0),
        }
        stats.update({q: stats["mean"].copy() for q in QUANTILES})
    else:
        batch = values.astype(np.result_type(values.dtype, np.float32), copy=False)
        with np.errstate(invalid="ignore"):  # NaN and inf are kept (module docstring)
            mean, squares = np.mean(batch, axis=0), np.mean(batch**2, axis=0)
            # RunningQuantileStats.update adds (batch mean - mean) * 1 to each on its first
            # batch: nothing, but an inf mean becomes NaN, as in lerobot's files
            mean += (mean - mean) * 1.0
            squares += (squares - squares) * 1.0
            low, high = np.min(batch, axis=0), np.max(batch, axis=0)
            variance = squares - mean**2
            quantiles = [
                _histogram_quantiles(batch[:, i], low[i], high[i]) for i in range(mean.size)
            ]
        stats = {"min": low, "max": high, "mean": mean, "std": np.sqrt(np.maximum(0, variance))}
        for position, key in enumerate(QUANTILES):
            stats[key] = np.array([column[position] for column in quantiles])
    stats = {k: v.reshape(1) if data.ndim == 1 else v for k, v in stats.items()}
    return {**stats, "count": count}


def _histogram_quantiles(column: np.ndarray, low, high) -> list:
    """:data:`QUANTILES` of one dimension's values from a histogram of :data:`QUANTILE_BINS`
    bins from ``low - 1e-10`` to ``high + 1e-10`` (lerobot 0.6.1 ``compute_stats.py``
    ``RunningQuantileStats._compute_single_quantile``): the first bin edge where the
    cumulative count reaches ``q * count``, interpolated linearly inside that bin."""
    edges = np.linspace(low - 1e-10, high + 1e-10, QUANTILE_BINS + 1)
    cumulative = np.cumsum(np.histogram(column, bins=edges)[0].astype(np.float64))
    found = []
    for q in QUANTILES.values():
        target = q * len(column)
        i = int(np.searchsorted(cumulative, target))
        if i == 0 or i >= len(cumulative):
            found.append(edges[0] if i == 0 else edges[-1])
            continue
        before, inside = cumulative[i - 1], cumulative[i] - cumulative[i - 1]
        width = edges[i + 1] - edges[i]
        found.append(edges[i] if inside == 0 else edges[i] + (target - before) / inside * width)
    return found


def _to_lists(stats: Mapping[str, np.ndarray]) -> dict[str, list]:
    # lerobot 0.3.3 datasets/utils.py:121 serialize_dict: arrays become nested lists
    return {key: value.tolist() for key, value in stats.items()}


def compute_episode_stats(
    episode_data: Mapping[str, np.ndarray], video_keys: Collection[str]
) -> dict[str, dict[str, list]]:
    """One episode's stats as ``episodes_stats.jsonl`` holds them (lerobot 0.3.3
    ``compute_stats.py:85`` ``compute_episode_stats``, then ``utils.py:121``
    ``serialize_dict``).

    Args:
        episode_data: per feature, in the order the stats should have: a camera (a key in
            ``video_keys``) maps to its sampled frames, uint8 ``(N, 3, h, w)`` (see
            :func:`sample_frames` and :func:`image_stats`); any other feature to its ``(T,)``
            or ``(T, D)`` values (see :func:`numeric_stats`).
        video_keys: the camera features.

    Returns:
        ``{feature: {"min", "max", "mean", "std", "count"}}``, each a (nested) list of Python
        numbers: shape ``(3, 1, 1)`` for cameras, ``(D,)`` (``(1,)`` for scalars) otherwise,
        ``count`` ``[frames]`` (``[sampled frames]`` for cameras).
    """
    return {
        key: _to_lists(image_stats(data) if key in video_keys else numeric_stats(data))
        for key, data in episode_data.items()
    }


def quantile_episode_stats(episode_data: Mapping[str, np.ndarray]) -> dict[str, dict[str, list]]:
    """One episode's stats of numeric features with quantiles, as lerobot 0.6.1's
    ``compute_stats.py:486`` ``compute_episode_stats`` gives them (what its
    ``recompute_stats`` aggregates): per feature of ``episode_data`` (``(T,)`` or ``(T, D)``
    values), :func:`quantile_stats` as nested lists of Python numbers."""
    return {key: _to_lists(quantile_stats(data)) for key, data in episode_data.items()}


def episode_stats_from_files(
    table: pa.Table, features: Mapping[str, dict], video_files: Mapping[str, Path]
) -> dict[str, dict[str, list]]:
    """One stored v2.1 episode's stats, as :func:`compute_episode_stats` gives them (the
    ``compute_missing_stats`` repair).

    Args:
        table: the episode's rows (``T`` of them) as the shard job holds them.
        features: ``info.json``'s features; stats follow their order.
        video_files: camera key -> the episode's mp4.

    Numeric features are every non-string, non-image feature that has a column in ``table``
    (vectors as ``(T, D)``, the column's dtype); cameras are the frames at
    ``sample_indices(T)`` decoded as RGB (:func:`_decoded_samples`). lerobot sampled the frames
    it encoded, so decoded frames differ from them by the codec's loss; an mp4 shorter than
    ``T`` frames gives fewer samples.
    """
    import pyarrow as pa

    episode_data = {}
    for key, feature in features.items():
        if key in video_files:
            episode_data[key] = _decoded_samples(video_files[key], table.num_rows)
        elif key in table.schema.names and feature.get("dtype") not in ("string", "image"):
            column = table.column(key).combine_chunks()
            if pa.types.is_nested(column.type):
                flat = column.flatten().to_numpy(zero_copy_only=False)
                episode_data[key] = flat.reshape(table.num_rows, -1)
            else:
                episode_data[key] = column.to_numpy(zero_copy_only=False)
    return compute_episode_stats(episode_data, video_files)


def _decoded_samples(path: Path, length: int) -> np.ndarray:
    """The frames at ``sample_indices(length)`` of the mp4's first video stream, decoded as
    RGB, channel-first and downsampled: uint8 ``(N, 3, h, w)``.

    Unlike :func:`sample_frames`' array, this one is a stack of per-frame views, so its
    memory holds each pixel's 3 channels together (``(N, h, w, 3)`` order); the std sums run
    in that order, as they always have for this repair (last-bit differences from lerobot's).
    """
    import av

    from robopipe.remux import MP4

    wanted = set(sample_indices(length).tolist())
    frames = []
    with av.open(str(path), format=MP4) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        for position, frame in enumerate(container.decode(stream)):
            if position in wanted:
                frames.append(frame.to_ndarray(format="rgb24"))
    return np.stack([auto_downsample_height_width(frame.transpose(2, 0, 1)) for frame in frames])


def restamped_timestamp_stats(length: int, fps: float, dtype: str = "float32") -> dict[str, list]:
    """``timestamp`` stats of an episode of ``length`` frames whose timestamps were rewritten
    as ``frame_index / fps`` seconds (``restamp_timestamps``): :func:`numeric_stats` of those
    values cast to ``dtype`` (the column's: lerobot's float32, or an export's float64), as
    the column holds them. Lists of shape ``(1,)``; ``count`` is ``[length]``.
    """
    return _to_lists(numeric_stats((np.arange(length) / fps).astype(dtype)))


# ---------------------------------------------------------------------------- v2.0 episodes
V20_TOLERANCE_S = 1e-4  # lerobot 0.3.3 LeRobotDataset(tolerance_s=1e-4)


def v20_episode_stats(
    root: Path,
    info: Mapping,
    episode_index: int,
    length: int,
    table: pa.Table,
    video_files: Mapping[str, Path],
    *,
    restamped: bool = False,
    tolerance_s: float = V20_TOLERANCE_S,
) -> dict[str, dict[str, list]]:
    """One episode's ``episodes_stats.jsonl`` ``"stats"`` for a LeRobot v2.0 dataset, as lerobot
    0.3.3's v2.0 -> v2.1 script computes it (``datasets/v21/convert_stats.py:34``
    ``convert_episode_stats``, then ``utils.py:121`` ``serialize_dict``).

    Unlike a v2.1 writer's stats (:func:`compute_episode_stats`), these come from the files,
    through ``LeRobotDataset``:

    - Every feature of ``info["features"]``, in that order (a ``string`` feature makes
      lerobot's script fail; so does this function, with ValueError).
    - Numeric features: the episode's rows of the column as ``hf_transform_to_torch``
      (``utils.py:257``) gives them, ``torch.tensor`` of the Python values: floats become
      float32, integers int64, booleans stay bool; then min/max/mean/std over axis 0, with
      ``keepdims`` for a ``(T,)`` column (min/max in that dtype, float32 data gives float32
      mean/std, integer or bool data float64).
    - Cameras (``video``): ``sample_episode_video_frames`` (``convert_stats.py:25``). The
      ``N = estimate_num_samples(length)`` indices of :func:`sample_indices` are passed to
      ``_get_query_timestamps`` (``lerobot_dataset.py:661``), which reads them as indices
      into the WHOLE dataset, not the episode (a quirk: they are not offset by the episode's
      start). So the query times are the ``timestamp`` values of the dataset's rows
      ``sample_indices(length)``, rows counted over the data files in sorted path order
      (``load_dataset("parquet", data_dir=root / "data")``); for an episode longer than
      episode 0, the later samples fall in episode 1 and its times restart at 0 s. The frames
      of THIS episode's video at those times are decoded (``decode_video_frames_torchcodec``,
      ``video_utils.py:173``: the frame nearest in time; a query farther than ``tolerance_s``
      from every frame raises ValueError where lerobot raises AssertionError) as float32
      ``uint8 / 255`` in [0, 1], full resolution (no downsampling), C-contiguous
      ``(N, 3, H, W)`` as torchcodec 0.5's stacked frames are (numpy sums in memory order,
      so the layout fixes the last bits). min/max/mean/std over axes (0, 2, 3)
      with ``keepdims`` (``get_feature_stats``, ``compute_stats.py:75``), then the batch
      axis squeezed: float32 arrays of shape ``(3, 1, 1)``, NOT divided by 255 again;
      ``count`` is ``[N]``.
    - Stored images (``image``): every row of the episode, not a sample, decoded as
      ``datasets`` and torchvision's ``ToTensor`` do (:func:`_stored_frames`): float32
      ``(T, C, H, W)`` in [0, 1]; the same reductions, ``count`` ``[T]``.
    - Sums in numpy 2.2's order (:func:`_sum_numpy22`; the numpy of lerobot 0.3.3 on its
      Python 3.10): numpy 2.3 and later sum long float runs in another order, which moves
      the last bits of a camera's mean and std (by up to 1e-6 on cr5).
    - No quantiles (0.3.3 has none). Values serialised with ``tolist()``: float32 numbers
      become the Python floats they equal.

    Args:
        root: the dataset's root (its ``data/`` folder gives the query times).
        info: ``meta/info.json`` as a dict.
        episode_index: the episode (named in errors).
        length: its number of frames (``episodes.jsonl``'s ``length``).
        table: its rows, as the conversion's repairs leave them (the shard job's table: the
            dataset lerobot's script would have been given had it been exported right).
        video_files: camera key -> its mp4, one per ``video`` feature.
        restamped: the timestamps are rewritten as ``frame_index / fps``
            (``restamp_timestamps``): the query times are the leading rows' rewritten ones
            (``float32(frame_index / fps)``), not those their files hold.

    Raises:
        ValueError: a string feature (lerobot's script fails on it), a one-frame episode
            with a video (lerobot's ``squeeze(0)`` then fails), a column missing, an image
            that is not 8-bit, or a video frame too far from its query time.
    """
    query_times = None
    stats = {}
    for key, feature in info["features"].items():
        dtype = feature.get("dtype")
        if dtype == "string":
            raise ValueError(f"episode {episode_index}: string feature {key!r} (lerobot 0.3 fails)")
        if dtype != "video" and key not in table.schema.names:
            raise ValueError(f"episode {episode_index}: no column {key!r} in its data file")
        if dtype == "video":
            if length < 2:
                raise ValueError(f"episode {episode_index}: one frame, lerobot 0.3 fails on it")
            if query_times is None:
                fps = info["fps"] if restamped else None
                query_times = _leading_timestamps(root, length, fps)[sample_indices(length)]
            frames = _frames_at(video_files[key], query_times, tolerance_s, episode_index)
        elif dtype == "image":
            frames = _stored_frames(table.column(key), episode_index)
        else:
            values = _torch_values(table.column(key))
            stats[key] = _stats_numpy22(values, axis=0, keepdims=values.ndim == 1)
            continue
        raw = _stats_numpy22(frames, axis=(0, 2, 3), keepdims=True)
        stats[key] = {k: v if k == "count" else np.squeeze(v, axis=0) for k, v in raw.items()}
    return {key: _to_lists(value) for key, value in stats.items()}


def _stored_frames(column: pa.ChunkedArray, episode: int) -> np.ndarray:
    """An image column's frames as lerobot 0.3.3 gives them to the stats: every row, decoded
    by Pillow as ``datasets``' ``Image`` feature does (EXIF orientation applied), then
    torchvision's ``ToTensor`` (float32 ``uint8 / 255``, channel-first), stacked by
    ``np.array``: C-contiguous float32 ``(T, C, H, W)``."""
    import io

    from PIL import Image, ImageOps

    frames = []
    for cell in column.to_pylist():
        with Image.open(io.BytesIO(cell["bytes"])) as image:
            image.load()
            if image.getexif().get(Image.ExifTags.Base.Orientation) is not None:
                image = ImageOps.exif_transpose(image)
            if image.mode in ("I", "I;16", "F"):
                raise ValueError(f"episode {episode}: {image.mode} images are not 8-bit")
            pixels = np.array(image, dtype=np.uint8) * np.uint8(255 if image.mode == "1" else 1)
        if pixels.ndim == 2:
            pixels = pixels[:, :, None]
        frames.append(pixels.transpose(2, 0, 1) / np.float32(255))
    return np.array(frames)


def _stats_numpy22(array: np.ndarray, axis, keepdims: bool) -> dict[str, np.ndarray]:
    """``get_feature_stats`` (lerobot 0.3.3 ``compute_stats.py:75``) with the sums that numpy
    2.2 computes, whatever numpy runs here (see :func:`_sum_numpy22`): min/max/mean/std/count
    of ``array`` over ``axis`` (an int or a tuple), numpy's dtypes (float32 data gives float32,
    integer or bool data float64 mean/std)."""
    reduced = (axis,) if isinstance(axis, int) else tuple(axis)
    count = np.intp(np.prod([array.shape[a] for a in reduced]))  # numpy's _count_reduce_items
    dtype = np.float64 if array.dtype.kind in "biu" else None  # numpy's _mean and _var
    # numpy 2.2 _methods._mean and _var, with umr_sum in numpy 2.2's order
    mean = _sum_numpy22(array, reduced, dtype)
    mean = np.true_divide(mean, count, out=mean, casting="unsafe")
    deviation = np.asanyarray(array - mean)
    deviation = np.multiply(deviation, deviation, out=deviation)
    var = _sum_numpy22(deviation, reduced, dtype)
    var = np.true_divide(var, np.maximum(count, 0), out=var, casting="unsafe")
    std = np.sqrt(var, out=var)
    if not keepdims:
        mean, std = mean.squeeze(reduced), std.squeeze(reduced)
    return {
        "min": np.min(array, axis=axis, keepdims=keepdims),
        "max": np.max(array, axis=axis, keepdims=keepdims),
        "mean": mean,
        "std": std,
        "count": np.array([len(array)]),
    }


NUMPY_BUFSIZE = 8192  # numpy's default ufunc buffer size (np.getbufsize()), in elements


def _sum_numpy22(array: np.ndarray, reduced: tuple[int, ...], dtype) -> np.ndarray:
    """``np.add.reduce(array, axis=reduced, dtype=dtype, keepdims=True)`` summed in numpy
    2.2's order, which numpy 2.3 changed (its iterator no longer cuts inner loops at the
    buffer size), so float sums differ in the last bits between the two.

    numpy 2.2, for a C-contiguous array: the reduced axes at the end of the shape form runs
    of contiguous elements; each run is cut into chunks of :data:`NUMPY_BUFSIZE` elements,
    each chunk is summed pairwise (numpy's ``pairwise_sum``, as ``np.add.reduce`` of that
    chunk alone sums it in any numpy version), and each output element adds its chunks one
    after the other, in memory order (the earlier reduced axes, then the chunks). Runs of one
    element (the last axis kept) make a plain running sum; axes of length 1 do not count.
    Checked bit for bit against numpy 2.2.6 (the one lerobot 0.3.3's Python 3.10 gets) on
    camera frames ``(N, 3, H, W)`` over ``(0, 2, 3)``, and on ``(T,)``, ``(T, 1)`` and
    ``(T, D)`` columns (float32, int64, bool) over axis 0.
    """
    keepdims_shape = [1 if a in reduced else n for a, n in enumerate(array.shape)]
    # numpy's iterator drops axes of length 1
    axes = [a for a, n in enumerate(array.shape) if n != 1]
    reduced = tuple(i for i, a in enumerate(axes) if a in reduced)
    array = np.ascontiguousarray(array).reshape([array.shape[a] for a in axes])
    split = array.ndim
    while split and split - 1 in reduced:
        split -= 1
    run = int(np.prod(array.shape[split:]))
    runs = array.reshape(*array.shape[:split], run)
    chunks = np.stack(
        [
            np.add.reduce(runs[..., start : start + NUMPY_BUFSIZE], axis=-1, dtype=dtype)
            for start in range(0, run, NUMPY_BUFSIZE)
        ],
        axis=-1,
    )  # (*outer, chunks)
    outer_reduced = [a for a in range(split) if a in reduced]
    kept = [a for a in range(split) if a not in reduced]
    steps = chunks.transpose(*outer_reduced, split, *kept)
    steps = steps.reshape(-1, *[array.shape[a] for a in kept])
    total = np.add.accumulate(steps, axis=0)[-1]
    return total.reshape(keepdims_shape)


def _torch_values(column: pa.ChunkedArray) -> np.ndarray:
    # lerobot 0.3.3 utils.py:257 hf_transform_to_torch: torch.tensor of each row's Python value
    # (float -> float32, int -> int64), stacked by np.array
    import pyarrow as pa

    leaf = column.type
    while (
        pa.types.is_list(leaf) or pa.types.is_fixed_size_list(leaf) or pa.types.is_large_list(leaf)
    ):
        leaf = leaf.value_type
    if pa.types.is_floating(leaf):
        dtype = np.float32
    elif pa.types.is_integer(leaf):
        dtype = np.int64
    elif pa.types.is_boolean(leaf):
        dtype = np.bool_
    else:
        raise ValueError(f"column of type {column.type}: not a numeric feature")
    return np.array(column.to_pylist(), dtype=dtype)


def _leading_timestamps(root: Path, count: int, fps: float | None = None) -> np.ndarray:
    """The ``timestamp`` values of the dataset's first ``count`` rows, the data files read in
    sorted path order (``load_dataset``'s order): float32 ``(count,)``; with ``fps``, the
    timestamps as ``restamp_timestamps`` rewrites them, each row's ``frame_index / fps``."""
    import pyarrow.parquet as pq

    values, held = [], 0
    for path in sorted((Path(root) / "data").rglob("*.parquet")):
        if held >= count:
            break
        if fps is None:
            column = pq.read_table(path, columns=["timestamp"]).column("timestamp").to_numpy()
        else:
            column = pq.read_table(path, columns=["frame_index"]).column("frame_index")
            column = column.to_numpy() / fps
        values.append(column.astype(np.float32))
        held += len(values[-1])
    if held < count:
        raise ValueError(f"{root}: {held} rows in data/, fewer than an episode's {count}")
    return np.concatenate(values)[:count]


def _frames_at(path: Path, times: np.ndarray, tolerance_s: float, episode: int) -> np.ndarray:
    """The mp4's frames nearest to ``times`` (seconds), as lerobot 0.3.3 gives them to the
    stats: float32 ``uint8 / 255``, C-contiguous ``(N, 3, H, W)``."""
    import av

    from robopipe.remux import MP4

    times = times.astype(np.float64)
    last = times.max() + tolerance_s
    kept_times, kept = [], []  # only frames within tolerance_s of a query time
    with av.open(str(path), format=MP4) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        for frame in container.decode(stream):
            if frame.time > last:
                break
            if np.any(np.abs(times - frame.time) < tolerance_s):
                kept_times.append(frame.time)
                kept.append(frame.to_ndarray(format="rgb24"))
    found = np.array(kept_times)
    nearest = [int(np.abs(found - t).argmin()) if kept else -1 for t in times]
    far = [
        t for t, j in zip(times, nearest, strict=True) if j < 0 or abs(found[j] - t) >= tolerance_s
    ]
    if far:
        raise ValueError(
            f"episode {episode}: no frame of {path} within {tolerance_s} s of "
            f"{far[:5]} s (lerobot 0.3's video tolerance)"
        )
    height, width, _ = kept[0].shape
    frames = np.empty((len(times), 3, height, width), dtype=np.float32)
    for i, position in enumerate(nearest):
        np.divide(kept[position].transpose(2, 0, 1), np.float32(255), out=frames[i])
    return frames


# ---------------------------------------------------------------------------- many episodes
def aggregate_feature_stats(stats: list[dict]) -> dict[str, np.ndarray]:
    """Aggregate one feature's stats over episodes (lerobot 0.6.1 ``compute_stats.py:582``).

    Elementwise min and max; ``count = Σ count``; ``mean = Σ mean_i·count_i / Σ count``;
    population std by parallel variance,
    ``std = sqrt(Σ (std_i² + (mean_i − mean)²)·count_i / Σ count)``; quantiles ``qNN`` are
    count-weighted means, kept only when every episode has them. Sums run over episodes in
    the given order, in float64.

    Args:
        stats: per episode ``{"min","max","mean","std","count"[, "qNN"...]}`` of array-likes;
            vectors have shape ``(D,)``, images ``(3, 1, 1)``, ``count`` shape ``(1,)``.

    Returns:
        The same keys as numpy arrays of the same shapes (float64 for mean/std/quantiles;
        min/max in numpy's dtype of the inputs; ``count`` integer).
    """
    quantiles = [k for k in stats[0] if k.startswith("q") and all(k in s for s in stats)]
    return _aggregate_arrays(
        np.stack([np.asarray(s["mean"], dtype=np.float64) for s in stats]),
        np.stack([np.asarray(s["std"], dtype=np.float64) ** 2 for s in stats]),
        np.stack([np.asarray(s["count"]) for s in stats]),
        np.stack([np.asarray(s["min"]) for s in stats]),
        np.stack([np.asarray(s["max"]) for s in stats]),
        {k: np.stack([np.asarray(s[k], dtype=np.float64) for s in stats]) for k in quantiles},
    )


def _aggregate_arrays(means, variances, counts, mins, maxs, quantiles) -> dict[str, np.ndarray]:
    # aggregate_feature_stats' arithmetic on the episodes' stats stacked (one row each)
    total_count = counts.sum(axis=0)
    weights = counts.astype(np.float64)
    while weights.ndim < means.ndim:
        weights = np.expand_dims(weights, axis=-1)
    mean = (means * weights).sum(axis=0) / total_count
    variance = ((variances + (means - mean) ** 2) * weights).sum(axis=0) / total_count
    result = {
        "min": np.min(mins, axis=0),
        "max": np.max(maxs, axis=0),
        "mean": mean,
        "std": np.sqrt(variance),
        "count": total_count,
    }
    for key, values in quantiles.items():
        result[key] = (values * weights).sum(axis=0) / total_count
    return result


def aggregate_stats(episodes_stats: list[dict[str, dict]]) -> dict[str, dict[str, list]]:
    """Dataset stats from per-episode stats (lerobot 0.6.1 ``compute_stats.py:622``).

    ``episodes_stats``: per episode ``{feature: {stat: array-like}}`` (see
    :func:`aggregate_feature_stats`). Returns ``{feature: {stat: nested list}}``, JSON-ready;
    features appear in the order of their first appearance, each aggregated over the
    episodes that have it.
    """
    features: dict[str, None] = {}
    for ep in episodes_stats:
        features.update(dict.fromkeys(ep))
    return {
        feature: _to_lists(
            aggregate_feature_stats([ep[feature] for ep in episodes_stats if feature in ep])
        )
        for feature in features
    }


class StatsAggregator:
    """:func:`aggregate_stats` over episodes given one at a time, in memory bounded and flat in
    the number of episodes, to the bit.

    Each stat of each feature is a column of float64 (``mean``, ``std``², quantiles) or numpy
    (``min``, ``max``, ``count``) rows, one per episode (:class:`_StatColumn`): its last
    ``block_rows`` rows in memory, the earlier ones spilled to an unnamed temporary file (the
    parallel-variance formula needs the dataset's mean before any episode's term, so every
    episode's stats are kept until the end). :meth:`result` then runs
    :func:`aggregate_feature_stats`' arithmetic a block of rows at a time, in numpy's order:
    elementwise operations are exact per element, and a reduction over axis 0 of rows of more
    than one number adds (or takes the min/max of) the rows one after the other, which
    :func:`_reduce` continues from block to block; a stat of one number per row is summed
    pairwise by numpy, so that column is reduced whole (8 bytes per episode).

    Args:
        block_rows: rows of each column held in memory, and reduced at a time.
    """

    def __init__(self, block_rows: int = 4096) -> None:
        self._block_rows = max(1, block_rows)
        # feature -> {"n": episodes that have it, "columns": stat -> _StatColumn,
        # "quantiles": the first episode's qNN keys}
        self._features: dict[str, dict] = {}

    def add(self, episode_stats: Mapping[str, Mapping]) -> None:
        """Add one episode's ``{feature: {stat: array-like}}``.

        Raises:
            ValueError: a stat's shape differs from the earlier episodes'.
        """
        for feature, stats in episode_stats.items():
            entry = self._features.get(feature)
            if entry is None:
                quantiles = [k for k in stats if k.startswith("q")]
                entry = self._features[feature] = {"n": 0, "columns": {}, "quantiles": quantiles}
            values = {
                "mean": np.asarray(stats["mean"], dtype=np.float64),
                "var": np.asarray(stats["std"], dtype=np.float64) ** 2,
                "count": np.asarray(stats["count"]),
                "min": np.asarray(stats["min"]),
                "max": np.asarray(stats["max"]),
            }
            for key in entry["quantiles"]:
                if key in stats:
                    values[key] = np.asarray(stats[key], dtype=np.float64)
            for key, value in values.items():
                column = entry["columns"].get(key)
                if column is None:
                    column = entry["columns"][key] = _StatColumn(value, self._block_rows)
                column.append(value)
            entry["n"] += 1

    def result(self) -> dict[str, dict[str, list]]:
        """The dataset stats, as :func:`aggregate_stats` gives them; the spilled rows are
        let go."""
        try:
            return {
                feature: _to_lists(self._aggregate(entry))
                for feature, entry in self._features.items()
            }
        finally:
            self.close()

    def close(self) -> None:
        """Let go of the spilled rows (the temporary files)."""
        for entry in self._features.values():
            for column in entry["columns"].values():
                column.close()

    @staticmethod
    def _aggregate(entry: dict) -> dict[str, np.ndarray]:
        # _aggregate_arrays' arithmetic, a block of rows at a time
        columns = entry["columns"]
        counts = columns["count"]

        def weighted(*names: str):  # blocks of the columns, with the counts as float weights
            for blocks in zip(*(columns[k].blocks() for k in names), counts.blocks(), strict=True):
                weights = blocks[-1].astype(np.float64)
                while weights.ndim < blocks[0].ndim:
                    weights = np.expand_dims(weights, axis=-1)
                yield *blocks[:-1], weights

        total_count = _reduce(np.add, counts.blocks())
        mean = _reduce(np.add, (m * w for m, w in weighted("mean"))) / total_count
        variance = _reduce(
            np.add, ((v + (m - mean) ** 2) * w for v, m, w in weighted("var", "mean"))
        )
        result = {
            "min": _reduce(np.minimum, columns["min"].blocks()),
            "max": _reduce(np.maximum, columns["max"].blocks()),
            "mean": mean,
            "std": np.sqrt(variance / total_count),
            "count": total_count,
        }
        for key in entry["quantiles"]:
            if key in columns and columns[key].rows == entry["n"]:  # every episode has it
                result[key] = _reduce(np.add, (q * w for q, w in weighted(key))) / total_count
        return result


def _reduce(ufunc: np.ufunc, blocks) -> np.ndarray:
    """``ufunc.reduce(np.concatenate(blocks), axis=0)``, to the bit, holding one block at a
    time where numpy's order allows it: over rows of more than one number numpy applies
    ``ufunc`` row after row, so the result so far is put before the next block's rows; rows of
    one number are reduced pairwise, which depends on the whole column, so those blocks are
    joined first (8 bytes per row)."""
    result, whole = None, []
    for block in blocks:
        if block[0].size <= 1:
            whole.append(block)
        else:
            result = ufunc.reduce(
                block if result is None else np.concatenate([result[None], block]), axis=0
            )
    return ufunc.reduce(np.concatenate(whole), axis=0) if whole else result


class _StatColumn:
    """One stat of one feature, a row of a fixed shape per episode: the last ``block_rows``
    rows in memory, the earlier ones appended to an unnamed temporary file. The dtype widens
    as numpy's ``result_type`` does when a row needs it (the rows are rewritten).

    Args:
        first: the first row (its shape and dtype); :meth:`append` adds it.
        block_rows: rows held in memory.
    """

    def __init__(self, first: np.ndarray, block_rows: int) -> None:
        self.shape, self.dtype = first.shape, first.dtype
        self._block = np.empty((block_rows, *first.shape), first.dtype)
        self._held = 0  # rows in _block
        self._spilled = 0  # rows in _file
        self._file = None

    @property
    def rows(self) -> int:
        """Rows appended."""
        return self._spilled + self._held

    def append(self, row: np.ndarray) -> None:
        """Add one row. Raises ValueError: ``row`` has another shape."""
        if row.shape != self.shape:
            raise ValueError(f"stats of shape {row.shape} among stats of shape {self.shape}")
        dtype = np.result_type(self.dtype, row.dtype)
        if dtype != self.dtype:
            self._widen(dtype)
        if self._held == len(self._block):
            self._spill()
        self._block[self._held] = row
        self._held += 1

    def blocks(self) -> Iterator[np.ndarray]:
        """The rows in order, ``block_rows`` at a time (the last block may be shorter), as
        arrays of shape ``(rows, *shape)``."""
        if self._file is not None:
            self._file.seek(0)
            for start in range(0, self._spilled, len(self._block)):
                n = min(len(self._block), self._spilled - start)
                data = self._file.read(n * self._block[0].nbytes)
                yield np.frombuffer(data, self.dtype).reshape(n, *self.shape)
        if self._held:
            yield self._block[: self._held]

    def close(self) -> None:
        """Remove the temporary file."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def _spill(self) -> None:
        if self._file is None:
            self._file = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close())
        self._file.seek(0, os.SEEK_END)
        self._file.write(self._block[: self._held].tobytes())
        self._spilled += self._held
        self._held = 0

    def _widen(self, dtype: np.dtype) -> None:
        widened = _StatColumn(np.empty(self.shape, dtype), len(self._block))
        for rows in self.blocks():
            for row in rows.astype(dtype):
                widened.append(row)
        self.close()
        vars(self).update(vars(widened))
