"""robopipe's ``LeRobotDataset`` reads a Hub repo in place (the stand-in Hub on 127.0.0.1):
by ``repo_id`` alone (lerobot's default revision ``v3.0``, nothing in ``$HF_LEROBOT_HOME``)
and by an ``hf://`` URL as ``root``; its items, lengths and metadata equal those of the local
folder, and nothing but the stand-in is contacted."""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import DataLoader

from robopipe.loading import LeRobotDataset

DELTAS = {"action": [0.0, 0.1, 0.2]}


def _same(remote: LeRobotDataset, local: LeRobotDataset, indices: list[int]) -> None:
    assert len(remote) == len(local) and remote.num_episodes == local.num_episodes
    assert remote.meta.episodes["dataset_to_index"] == local.meta.episodes["dataset_to_index"]
    assert list(remote.meta.stats) == list(local.meta.stats)
    for key, stats in local.meta.stats.items():
        assert all(np.array_equal(stats[s], remote.meta.stats[key][s]) for s in stats), key
    for i in indices:
        a, b = remote[i], local[i]
        assert list(a) == list(b)
        for key, value in b.items():
            assert torch.equal(a[key], value) if torch.is_tensor(value) else a[key] == value


def test_repo_id_reads_the_hub_in_place(
    v30, hub_standin, net_log, hf_client, tmp_path, monkeypatch
):
    monkeypatch.setenv("HF_LEROBOT_HOME", str(tmp_path / "empty"))
    hub = hub_standin({"local/demo": {"v3.0": v30}})
    remote = LeRobotDataset(
        "local/demo", delta_timestamps=DELTAS, storage_options={"endpoint": hub.endpoint}
    )
    assert remote.root == "hf://datasets/local/demo@v3.0"
    local = LeRobotDataset("local/demo", root=v30, delta_timestamps=DELTAS)
    _same(remote, local, [0, 1, len(local) // 2, len(local) - 1])
    batch = next(iter(DataLoader(remote, batch_size=4, shuffle=True, num_workers=2)))
    assert batch[remote.meta.camera_keys[0]].shape[0] == 4
    assert any(r.status == 206 for r in hub.requests if r.path.endswith(".mp4"))
    net_log.assert_only_local()


def test_an_hf_url_as_root(v30, hub_standin, net_log, hf_client):
    hub = hub_standin({"local/demo": {"main": v30}})
    episodes = [5, 2]
    remote = LeRobotDataset(
        "local/demo",
        root=hub.url("local/demo", "main"),
        episodes=episodes,
        storage_options={"endpoint": hub.endpoint},
    )
    local = LeRobotDataset("local/demo", root=v30, episodes=episodes)
    _same(remote, local, [0, len(local) - 1])
    net_log.assert_only_local()
