"""PyTorch loaders of LeRobot v3.0 datasets: map-style (random access, with a resumable
``EpochSampler``) and streaming.

Items have LeRobotDataset's keys and shapes; see ``robopipe.loading.items``.
``LeRobotDataset`` is a read-only drop-in for lerobot 0.6.1's
(``robopipe.loading.lerobot_dataset``).
"""

from robopipe.formats.v30_reader import DatasetMeta, read_meta
from robopipe.loading.batches import collate
from robopipe.loading.lerobot_dataset import LeRobotDataset
from robopipe.loading.lerobot_meta import LeRobotDatasetMetadata
from robopipe.loading.map_dataset import MapDataset
from robopipe.loading.sampler import EpochSampler
from robopipe.loading.streaming import StreamingDataset
from robopipe.loading.windows import mode_delta_timestamps

__all__ = [
    "DatasetMeta",
    "EpochSampler",
    "LeRobotDataset",
    "LeRobotDatasetMetadata",
    "MapDataset",
    "StreamingDataset",
    "collate",
    "mode_delta_timestamps",
    "read_meta",
]
