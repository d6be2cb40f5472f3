"""`episodes=` (LeRobotDataset's): both loaders read the frames of the listed episodes only,
item i being the i-th of them, with its global index and its own frames."""

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from robopipe.conversion.serial import convert_dataset
from robopipe.loading import MapDataset, StreamingDataset

CHOSEN = [5, 1, 6, 1]  # unsorted, repeated: read as [1, 5, 6]


def _frames_of(ds, episodes):
    starts = ds.meta.episodes["dataset_from_index"]
    ends = ds.meta.episodes["dataset_to_index"]
    return np.concatenate([np.arange(starts[e], ends[e]) for e in episodes])


def test_map_dataset_reads_the_chosen_episodes(rollover):
    everything = MapDataset(str(rollover[1]))
    chosen = MapDataset(str(rollover[1]), episodes=CHOSEN)
    expected = _frames_of(everything, [1, 5, 6])
    assert len(chosen) == len(expected) < len(everything)
    for i in (0, len(chosen) // 2, len(chosen) - 1):
        item, same = chosen[i], everything[int(expected[i])]
        assert int(item["index"]) == expected[i]
        assert int(item["episode_index"]) in (1, 5, 6)
        for key in chosen.meta.camera_keys:
            assert torch.equal(item[key], same[key])
    with pytest.raises(IndexError):
        chosen[len(chosen)]


def test_map_dataset_reads_only_the_chosen_episodes_data_files(make_v21, tmp_path):
    root = tmp_path / "small_files"
    convert_dataset(make_v21(episodes=6), root, name="small", data_file_size_in_mb=0.001)
    assert len(list(root.glob("data/*/*.parquet"))) > 2
    everything = MapDataset(str(root))
    chosen = MapDataset(str(root), episodes=[4])
    expected = _frames_of(everything, [4])
    assert len(chosen.columns["index"]) < len(everything.columns["index"])  # fewer files read
    assert [int(chosen[i]["index"]) for i in range(len(chosen))] == expected.tolist()
    last = everything[int(expected[-1])]
    assert torch.equal(chosen[len(chosen) - 1]["observation.state"], last["observation.state"])


def test_streaming_dataset_streams_the_chosen_episodes(rollover):
    ds = StreamingDataset(str(rollover[1]), episodes=CHOSEN, shuffle_buffer=7, seed=3)
    indices = [int(i) for b in DataLoader(ds, batch_size=5, num_workers=2) for i in b["index"]]
    assert sorted(indices) == _frames_of(ds, [1, 5, 6]).tolist()  # each once, no other


def test_an_episode_outside_the_dataset_is_refused(rollover):
    with pytest.raises(ValueError, match="episodes \\[8\\] not in 0..7"):
        MapDataset(str(rollover[1]), episodes=[0, 8])
