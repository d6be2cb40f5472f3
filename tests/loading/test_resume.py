"""Resumable epochs: a run SIGKILLed at a random batch and resumed in a new process from its
saved state yields exactly the rest of the uninterrupted epoch (both loaders, 0 and 2
DataLoader workers, 1 and 2 ranks, local and over nginx)."""

import gc
import random

import psutil
import pytest
from test_prefetch import needs_nginx
from torch.utils.data import DataLoader

from robopipe.bench.servers import serve_http
from robopipe.harness.resume import RunSpec, kill_and_resume, uninterrupted
from robopipe.loading import EpochSampler, StreamingDataset, collate, read_meta
from robopipe.loading.partition import round_robin_taken

TIMEOUT_S = 120  # per process; every test's processes are killed by then


def test_round_robin_taken_follows_the_dataloader_interleave():
    batches = [3, 1, 2]
    interleave = [(w, k) for k in range(3) for w in range(3) if k < batches[w]]
    for consumed in range(len(interleave) + 2):
        taken, first = round_robin_taken(batches, consumed)
        head = interleave[:consumed]
        assert taken == [sum(1 for w, _ in head if w == s) for s in range(3)]
        rest = interleave[consumed:]
        rotated = [(first + j) % 3 for j in range(3)]
        resumed = [
            (s, taken[s] + k) for k in range(3) for s in rotated if taken[s] + k < batches[s]
        ]
        assert resumed == rest


def test_sampler_epochs_from_seed_and_epoch_and_ranks_cover_every_item():
    def epoch(seed, e, rank=0, world_size=1):
        sampler = EpochSampler(10, 3, seed=seed, rank=rank, world_size=world_size)
        sampler.set_epoch(e)
        return [i for batch in sampler for i in batch]

    assert epoch(1, 2) == epoch(1, 2) != epoch(1, 3)
    assert epoch(1, 2) != epoch(2, 2) and sorted(epoch(1, 2)) == list(range(10))
    ranks = epoch(1, 2, 0, 3) + epoch(1, 2, 1, 3) + epoch(1, 2, 2, 3)
    assert len(ranks) == 12 and set(ranks) == set(range(10))  # padded as DistributedSampler


def test_sampler_position_and_set_epoch():
    sampler = EpochSampler(10, 3, seed=4)
    full = list(sampler)
    sampler.advance(2)
    restored = EpochSampler(10, 3)
    restored.load_state_dict(sampler.state_dict())
    restored.set_epoch(0)  # the current epoch: the position stays
    assert list(restored) == full[2:]
    restored.advance(2)
    assert list(restored) == []  # every batch consumed
    restored.set_epoch(1)
    assert len(list(restored)) == 4 and restored.state_dict()["consumed"] == 0


def test_stream_position_in_process(rollover):
    ds = StreamingDataset(rollover[1], shuffle_buffer=10, seed=3, batch_size=4)
    ds.set_epoch(2)
    full = [
        [int(i) for i in b["index"]] for b in DataLoader(ds, batch_size=None, collate_fn=collate)
    ]
    ds.advance(5)
    restored = StreamingDataset(rollover[1], shuffle_buffer=10, batch_size=4)
    restored.load_state_dict(ds.state_dict())
    assert [
        [int(i) for i in b["index"]]
        for b in DataLoader(restored, batch_size=None, collate_fn=collate)
    ] == full[5:]


def test_stream_items_in_workers_cannot_resume(rollover):
    ds = StreamingDataset(rollover[1], shuffle_buffer=10)
    ds.advance(3)
    children = {child.pid for child in psutil.Process().children()}
    batches = iter(DataLoader(ds, batch_size=4, num_workers=1))
    with pytest.raises(ValueError, match="batch_size") as raised:
        next(batches)
    del raised, batches  # the worker ends now: the re-raised error's traceback is a cycle
    gc.collect()
    left = [c for c in psutil.Process().children() if c.pid not in children]
    assert all(c.status() == psutil.STATUS_ZOMBIE for c in left if c.is_running()), left


def check_resume(spec: RunSpec, tmp_path) -> list[int]:
    """Kill ``spec``'s run at a random batch, resume it; assert the batches are those of the
    uninterrupted epoch; return that epoch's indices."""
    full = uninterrupted(spec, tmp_path / "full", TIMEOUT_S)
    assert len(full) > 2
    kill_after = random.randrange(1, len(full))
    resumed, killed_at = kill_and_resume(spec, tmp_path / "killed", kill_after, TIMEOUT_S)
    assert killed_at >= kill_after - 1
    assert resumed == full, f"killed after {killed_at} of {len(full)} batches"
    return [i for batch in full for i in batch["index"]]


CASES = [(0, 1), (2, 1), (2, 2)]  # (DataLoader workers, ranks)


@pytest.mark.timeout(8 * TIMEOUT_S)
@pytest.mark.parametrize("loader", ["map", "stream"])
@pytest.mark.parametrize(("workers", "world_size"), CASES)
def test_kill_and_resume_local(rollover, tmp_path, loader, workers, world_size):
    seen = []
    for rank in range(world_size):
        spec = RunSpec(loader, str(rollover[1]), workers, rank, world_size, seed=7, epoch=1)
        seen += check_resume(spec, tmp_path / f"rank{rank}")
    frames = read_meta(rollover[1]).num_frames
    assert set(seen) == set(range(frames)) and seen != sorted(seen)  # every frame, shuffled
    if loader == "stream":
        assert len(seen) == frames  # the map sampler pads ranks as DistributedSampler


@needs_nginx
@pytest.mark.timeout(4 * TIMEOUT_S)
@pytest.mark.parametrize("loader", ["map", "stream"])
def test_kill_and_resume_over_nginx(rollover, tmp_path, loader):
    with serve_http(rollover[1].parent) as base:
        spec = RunSpec(loader, f"{base}/{rollover[1].name}", workers=2, seed=5)
        seen = check_resume(spec, tmp_path)
    assert sorted(seen) == list(range(read_meta(rollover[1]).num_frames))


def test_an_epoch_sampler_with_look_ahead_names_the_next_batches():
    import pickle

    plain = [list(b) for b in EpochSampler(50, 8, seed=3)]
    ahead = list(EpochSampler(50, 8, seed=3, ahead=2))
    assert [list(b) for b in ahead] == plain  # the same batches
    for n, batch in enumerate(ahead):
        assert batch.ahead == plain[n + 1 : n + 3]
    again = pickle.loads(pickle.dumps(ahead[0]))  # as a DataLoader sends it to a worker
    assert again == ahead[0] and again.ahead == ahead[0].ahead
    with pytest.raises(ValueError, match="ahead"):
        EpochSampler(50, 8, ahead=-1)
