"""Kill a training loop at a batch, resume it in a new process, and compare the batches.

A *run* (``python -m robopipe.harness.resume run ...``, :func:`run_epoch`) is a minimal training
loop over one epoch of a loader: ``map`` (``MapDataset`` with an ``EpochSampler``) or
``stream`` (``StreamingDataset`` with its own batches), in a DataLoader with ``workers``
workers, as rank ``rank`` of ``world_size``. For each batch it consumes it writes
``batch-<k>.json`` (the batch's ``index`` values and the SHA-256 of every value's bytes), then
calls ``advance()`` and writes the loader's ``state_dict()`` to ``state.json``, each file
atomically (a temporary name, then a rename). A run started in a folder that holds a
``state.json`` loads it first, so it continues the epoch.

:func:`kill_and_resume` starts a run in its own process group, SIGKILLs the whole group (the
DataLoader's workers with it) once it has written ``kill_after`` batches, starts a new run in
the same folder, and returns the batches of the two together; :func:`uninterrupted` returns
those of one run from the start. Every wait has a timeout, after which the process group is
killed and ``TimeoutError`` raised. ``benchmarks/resume_check.py`` and
``tests/loading/test_resume.py`` use these.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

STATE = "state.json"


@dataclass(frozen=True)
class RunSpec:
    """One loader set-up: what :func:`run_epoch` builds and iterates."""

    loader: str  # "map" or "stream"
    url: str
    workers: int = 0
    rank: int = 0
    world_size: int = 1
    batch_size: int = 4
    seed: int = 0
    epoch: int = 1
    shuffle_buffer: int = 100  # StreamingDataset's

    def argv(self, folder: Path) -> list[str]:
        """The command line of a run of this spec writing into ``folder``."""
        args = [sys.executable, "-m", "robopipe.harness.resume", "run", str(folder)]
        for key, value in asdict(self).items():
            args += [f"--{key.replace('_', '-')}", str(value)]
        return args


def batch_record(batch: dict) -> dict:
    """{"index": [int], "sha256": {key: hex digest of the value's bytes, shape and dtype}}
    of a collated batch (tensors hashed in C-contiguous order; other values as JSON)."""
    digests = {}
    for key, value in batch.items():
        if hasattr(value, "numpy"):
            array = value.contiguous().numpy()
            data = f"{array.shape}{array.dtype}".encode() + array.tobytes()
        else:
            data = json.dumps(value).encode()
        digests[key] = hashlib.sha256(data).hexdigest()
    return {"index": [int(i) for i in batch["index"]], "sha256": digests}


def _write_json(path: Path, value) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(value))
    os.replace(temporary, path)


def run_epoch(spec: RunSpec, folder: Path) -> None:
    """Iterate the rest of ``spec.epoch`` (all of it without ``folder/state.json``), writing
    each consumed batch and the state after it into ``folder`` (module docstring)."""
    from torch.utils.data import DataLoader

    from robopipe.loading import EpochSampler, MapDataset, StreamingDataset, collate

    workers = {"num_workers": spec.workers, "collate_fn": collate}
    if spec.loader == "map":
        dataset = MapDataset(spec.url)
        position = EpochSampler(
            len(dataset),
            spec.batch_size,
            seed=spec.seed,
            rank=spec.rank,
            world_size=spec.world_size,
        )
        loader = DataLoader(dataset, batch_sampler=position, **workers)
    elif spec.loader == "stream":
        position = StreamingDataset(
            spec.url,
            rank=spec.rank,
            world_size=spec.world_size,
            seed=spec.seed,
            batch_size=spec.batch_size,
            shuffle_buffer=spec.shuffle_buffer,
        )
        loader = DataLoader(position, batch_size=None, **workers)
    else:
        raise ValueError(f"unknown loader {spec.loader!r}: map or stream")
    state = folder / STATE
    if state.exists():
        position.load_state_dict(json.loads(state.read_text()))
    position.set_epoch(spec.epoch)
    for batch in loader:
        _write_json(folder / f"batch-{position.consumed:06d}.json", batch_record(batch))
        position.advance()
        _write_json(state, position.state_dict())


def _start(spec: RunSpec, folder: Path) -> subprocess.Popen:
    folder.mkdir(parents=True, exist_ok=True)
    log = open(folder / "run.log", "ab")  # noqa: SIM115 - the child holds it
    with log:
        return subprocess.Popen(spec.argv(folder), stdout=log, stderr=log, start_new_session=True)


def _kill_group(process: subprocess.Popen) -> None:
    """SIGKILL the process group of ``process`` (its DataLoader workers too) and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


def _finish(process: subprocess.Popen, folder: Path, timeout_s: float) -> None:
    """Wait for a run to end by itself; kill its group and raise on a timeout or failure."""
    try:
        code = process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        raise TimeoutError(f"run in {folder} did not end within {timeout_s} s") from None
    finally:
        _kill_group(process)  # workers the run left behind, if any
    if code != 0:
        log = (folder / "run.log").read_text(errors="replace")[-3000:]
        raise RuntimeError(f"run in {folder} exited with {code}:\n{log}")


def _consumed(folder: Path) -> int:
    """Batches consumed by the runs in ``folder`` (from its ``state.json``; 0 without)."""
    state = folder / STATE
    return json.loads(state.read_text())["consumed"] if state.exists() else 0


def _batches(folder: Path) -> list[dict]:
    return [
        json.loads((folder / f"batch-{k:06d}.json").read_text()) for k in range(_consumed(folder))
    ]


def uninterrupted(spec: RunSpec, folder: Path, timeout_s: float = 600.0) -> list[dict]:
    """The batch records of one whole run of ``spec`` in a new ``folder``."""
    _finish(_start(spec, folder), folder, timeout_s)
    return _batches(folder)


def kill_and_resume(
    spec: RunSpec, folder: Path, kill_after: int, timeout_s: float = 600.0
) -> tuple[list[dict], int]:
    """Run ``spec`` in a new ``folder``, SIGKILL it (its process group) once it has written
    ``kill_after`` batches, resume in a new process from its ``state.json``, and return
    (the batch records of both runs in order, batches consumed when it was killed).

    Raises:
        RuntimeError: the first run ended before it was killed, or a run failed.
        TimeoutError: a run took longer than ``timeout_s``.
    """
    process = _start(spec, folder)
    deadline = time.monotonic() + timeout_s
    try:
        while not (folder / f"batch-{kill_after - 1:06d}.json").exists():
            if process.poll() is not None:
                raise RuntimeError(f"run in {folder} ended before batch {kill_after}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"run in {folder} wrote no batch {kill_after} in {timeout_s} s")
            time.sleep(0.01)
    finally:
        _kill_group(process)
    killed_at = _consumed(folder)
    _finish(_start(spec, folder), folder, timeout_s)
    return _batches(folder), killed_at


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["run"])
    parser.add_argument("folder", type=Path)
    for key, value in asdict(RunSpec("map", "")).items():
        parser.add_argument(f"--{key.replace('_', '-')}", type=type(value), required=True)
    args = vars(parser.parse_args(argv))
    folder = args.pop("folder")
    args.pop("command")
    run_epoch(RunSpec(**args), folder)


if __name__ == "__main__":
    main()
