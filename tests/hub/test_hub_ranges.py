"""Range reads over hf:// (huggingface_hub's HfFileSystem, a synchronous filesystem) ask the
Hub stand-in for exactly the bytes needed: no fsspec readahead block on top of a GOP."""

import fsspec
import torch

from robopipe.formats.v30_reader import read_ranges
from robopipe.loading import MapDataset


def _mp4_bytes_served(requests) -> int:
    total = 0
    for r in requests:
        if r.method == "GET" and r.path.endswith(".mp4") and r.range:
            start, end = r.range.removeprefix("bytes=").split("-")
            total += int(end) - int(start) + 1
    return total


def test_read_ranges_on_hf_requests_exactly_each_range(v30, hub_standin, hf_client):
    hub = hub_standin({"local/demo": {"v3.0": v30}})
    fs, root = fsspec.core.url_to_fs(hub.url("local/demo", "v3.0"), endpoint=hub.endpoint)
    mp4 = sorted(v30.glob("videos/*/*/*.mp4"))[0]
    local = mp4.read_bytes()
    path = f"{root}/{mp4.relative_to(v30).as_posix()}"
    starts, ends = [0, 5000, len(local) - 50], [100, 7000, len(local)]
    fs.info(path)  # the listing, before counting
    before = len(hub.requests)
    assert read_ranges(fs, [path] * 3, starts, ends) == [
        local[s:e] for s, e in zip(starts, ends, strict=True)
    ]
    asked = sorted(r.range for r in hub.requests[before:] if r.method == "GET")
    assert asked == sorted(f"bytes={s}-{e - 1}" for s, e in zip(starts, ends, strict=True))


def test_map_style_over_hf_fetches_only_its_gops(shared_datasets, hub_standin, net_log, hf_client):
    """On a real recording (lerobot's v3.0 cr5, 20 episodes in one 44 MB mp4), a batch over hf
    costs its GOPs, the mp4's head and index and at most a fallback block, not a readahead
    block per GOP."""
    root = shared_datasets / "cr5_20ep_v30_lerobot"
    hub = hub_standin({"local/cr5": {"main": root}})
    remote = MapDataset(hub.url("local/cr5", "main"), storage_options={"endpoint": hub.endpoint})
    local = MapDataset(root)
    indices = list(range(3, len(local), len(local) // 6))
    for a, b in zip(local.__getitems__(indices), remote.__getitems__(indices), strict=True):
        assert all(torch.equal(a[k], b[k]) for k in a if isinstance(a[k], torch.Tensor))
    stats = remote.gops.stats
    assert stats["gop_fetches"] >= 2
    needed = stats["gop_bytes"] + stats["index_bytes"] + stats["fallback_bytes"]
    assert _mp4_bytes_served(hub.requests) <= needed
    net_log.assert_only_local()
