"""robomimic HDF5 files: reading (hdf5), generation, conversion to v2.1 (to_v21), loading
(``SequenceDataset``, robomimic's drop-in; ``dataset.RobomimicDataset``, LeRobot-style items).

``SequenceDataset`` is imported on first use, so conversion jobs do not import torch.
"""


def __getattr__(name: str):
    if name == "SequenceDataset":
        from robopipe.robomimic.sequence import SequenceDataset

        return SequenceDataset
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
