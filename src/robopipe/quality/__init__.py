"""Content quality of a LeRobot dataset: which episodes are bad, and why.

The numeric checks read each episode's columns once; the camera checks decode a sample (or
all) of every camera's frames of every episode. One job per episode batch
(:func:`check_batch`) writes a partial result; one merge (:func:`merge_batches`) runs the
dataset-wide checks and writes ``quality.json`` and ``episodes.parquet``; :func:`verdict`
applies ``fail_on``. :data:`CHECKS` names the checks; :class:`QualityOptions` holds their
thresholds. Readers for the report's figures: :func:`read_episode_columns`,
:func:`read_episode_frames`.
"""

from robopipe.quality.batch import check_batch, merge_batches, verdict
from robopipe.quality.dataset import read_episode_columns, read_episode_frames, v30_batches
from robopipe.quality.options import CHECKS, QualityOptions

__all__ = [
    "CHECKS",
    "QualityOptions",
    "check_batch",
    "merge_batches",
    "read_episode_columns",
    "read_episode_frames",
    "v30_batches",
    "verdict",
]
