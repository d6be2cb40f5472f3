"""The peer loaders: lerobot 0.6.1 and lerobot-lancedb, run in the peer environment's own
Python 3.12 interpreter (:mod:`robopipe.peer_env` finds it).

:func:`run_peer` measures a peer loader there (``lerobot_driver.py``) and
:func:`check_items` compares the items it returned with robopipe's ``MapDataset``.

Importing this module imports nothing heavy (the workflow imports :data:`CANNOT_SELECT` at
parse time).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

from robopipe.peer_env import NO_PEERS, peer_version

LEROBOT_DRIVER = Path(__file__).with_name("lerobot_driver.py")
CHECK_ITEMS = 8  # items of each peer scenario compared with robopipe's
# why a loader that ignores episodes= (LoaderSpec.selects_episodes) does not run on a selection
CANNOT_SELECT = (
    "cannot select episodes (lerobot 0.6.1's StreamingLeRobotDataset keeps episodes= but "
    "streams every data file), so it would read episodes the check left out"
)


def run_peer(
    scenario,
    spec,
    root: Path,
    url: str,
    options: dict | None,
    settings,
    start_barrier: dict | None = None,
) -> dict:
    """Measure peer loader ``spec`` on ``scenario`` in ``settings.lerobot_python``
    (``lerobot_driver.py``), reading ``url`` (``root`` itself, an ``s3://`` Lance layout, or
    ``hf://datasets/<repo>[@<revision>]`` through ``HF_ENDPOINT``), on the episodes
    ``settings.episodes`` selects (the peer's ``episodes=``; None: all). ``start_barrier``
    (``{"folder", "rank", "world_size"}``): the driver waits there for the other ranks before
    measuring (:func:`robopipe.bench.measure.wait_for_ranks`).

    Returns:
        the driver's measurements, ``device`` (cpu), ``peer_version`` and the kept items
        under ``peer_items`` (a list of dicts, for :func:`check_items`).

    Raises:
        ValueError: no peer interpreter, or it lacks ``spec.peer_package``; or episodes are
            selected and the loader cannot select them (``spec.selects_episodes``).
        RuntimeError: the driver failed (its stderr's tail in the message).
    """
    import torch

    from robopipe.bench.measure import ZeroSamplesError
    from robopipe.loading import mode_delta_timestamps, read_meta

    version = peer_version(settings.lerobot_python, spec.peer_package)
    if not version:
        raise ValueError(
            f"{scenario.name}: {spec.name} needs {spec.peer_package} in the peer environment "
            f"({settings.lerobot_python or NO_PEERS})"
        )
    if settings.episodes is not None and not spec.selects_episodes:
        raise ValueError(f"{scenario.name}: {spec.name} {CANNOT_SELECT}")
    meta = read_meta(root)
    delta = mode_delta_timestamps(scenario.mode, meta.camera_keys, meta.fps, settings.windows)
    with tempfile.TemporaryDirectory(prefix="robopipe-peer-") as tmp:
        out, items_out = Path(tmp) / "result.json", Path(tmp) / "items.pt"
        args = {
            "root": str(root.resolve()),
            "url": str(root.resolve()) if scenario.source == "local" else url,
            "storage_options": _lance_options(options) if scenario.source == "s3" else None,
            "revision": url.partition("@")[2] or None if scenario.source == "hf" else None,
            "dataset": spec.dataset,
            "stream": spec.stream,
            "delta_timestamps": delta,
            "video_keys": meta.camera_keys,
            "batch_size": settings.batch_size,
            "workers": scenario.workers,
            "image_dtype": settings.image_dtype,
            "warmup_batches": settings.warmup_batches,
            "steady_s": settings.steady_s,
            "probe_samples": settings.probe_samples,
            "tolerance_s": settings.tolerance_s,
            "seed": settings.seed,
            "episodes": settings.episodes,
            "check_items": CHECK_ITEMS,
            "start_barrier": start_barrier,
            "out": str(out),
            "items_out": str(items_out),
        }
        env = {**os.environ, "HF_HOME": str(Path(tmp) / "hf"), "HF_HUB_DISABLE_XET": "1"}
        env.pop("PYTHONPATH", None)
        if scenario.source == "hf":
            if endpoint := (options or {}).get("endpoint"):
                env["HF_ENDPOINT"] = endpoint
        else:
            env["HF_HUB_OFFLINE"] = "1"
        done = subprocess.run(
            [settings.lerobot_python, str(LEROBOT_DRIVER), json.dumps(args)],
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0 or not out.exists():
            raise RuntimeError(
                f"{scenario.name}: peer driver failed (exit {done.returncode}):\n"
                f"{done.stderr[-4000:]}"
            )
        measured = json.loads(out.read_text())
        items = torch.load(items_out, weights_only=True)
    if measured.get("error"):
        raise ZeroSamplesError(f"{scenario.name}: {measured['error']}")
    return {**measured, "device": "cpu", "peer_version": version, "peer_items": items}


def _lance_options(options: dict | None) -> dict:
    """LanceDB's (object_store's) options for an s3 source given fsspec's s3fs options:
    endpoint, keys, region, plain http allowed."""
    options = options or {}
    client = options.get("client_kwargs") or {}
    lance = {
        "aws_endpoint": client.get("endpoint_url") or options.get("endpoint_url"),
        "aws_access_key_id": options.get("key"),
        "aws_secret_access_key": options.get("secret"),
        "aws_region": client.get("region_name") or "us-east-1",
        "allow_http": "true",
    }
    return {k: v for k, v in lance.items() if v}


def check_items(
    items: list[dict],
    reference_root: str | Path,
    delta,
    image_dtype: str,
    episodes: list[int] | None = None,
) -> dict:
    """Compare a peer's items with robopipe's ``MapDataset`` items of the same ``index`` on the
    local dataset ``reference_root`` (same ``delta_timestamps``, ``image_dtype`` and
    ``episodes`` selection). A peer item whose ``index`` is not a frame of the selected
    episodes is a mismatch (key ``index``).

    Every key both return is compared: tensors by dtype, shape and values (exactly), other
    values by equality. Keys only one side returns are listed, not counted as a mismatch.

    Returns:
        ``indices`` (frame indices compared), ``image_dtype``, ``episodes``, ``dtypes`` (the
        peer's dtype per tensor key), ``only_peer_keys``, ``only_robopipe_keys``, ``keys_compared``,
        ``mismatches`` (up to 10: index, key, what differs, and for values the largest
        absolute difference), ``equal`` (no mismatch in any compared key, and at least one
        item compared).
    """
    import torch

    from robopipe.loading import MapDataset

    reference = MapDataset(
        reference_root, delta_timestamps=delta, image_dtype=image_dtype, episodes=episodes
    )
    mismatches, dtypes, only_peer, only_ours, compared = [], {}, set(), set(), set()
    for item in items:
        index = int(item["index"])
        position = _position(reference.frames, index)
        if position is None:
            why = f"frame {index} is not in the selected episodes {episodes}"
            mismatches.append({"index": index, "key": "index", "difference": why})
            continue
        ours = reference[position]
        only_peer |= set(item) - set(ours)
        only_ours |= set(ours) - set(item)
        for key in sorted(set(item) & set(ours)):
            compared.add(key)
            theirs, mine = item[key], ours[key]
            if isinstance(theirs, torch.Tensor):
                dtypes[key] = str(theirs.dtype).removeprefix("torch.")
                why = _tensor_difference(theirs, torch.as_tensor(mine))
            else:
                why = None if theirs == mine else f"{theirs!r} != {mine!r}"
            if why:
                mismatches.append({"index": index, "key": key, "difference": why})
    return {
        "indices": [int(i["index"]) for i in items],
        "image_dtype": image_dtype,
        "episodes": episodes,
        "dtypes": dtypes,
        "keys_compared": sorted(compared),
        "only_peer_keys": sorted(only_peer),
        "only_robopipe_keys": sorted(only_ours),
        "mismatches": mismatches[:10],
        "equal": bool(items) and not mismatches,
    }


def _position(frames, index: int) -> int | None:
    """The item position of global frame ``index`` in a selection's ``frames`` (ascending;
    None: every frame, position = index), or None when it is not selected."""
    if frames is None:
        return index
    import numpy as np

    position = int(np.searchsorted(frames, index))
    return position if position < len(frames) and frames[position] == index else None


def _tensor_difference(theirs, mine) -> str | None:
    """What differs between two tensors (dtype, shape, values), or None."""
    if theirs.dtype != mine.dtype:
        return f"dtype {theirs.dtype} != {mine.dtype}"
    if tuple(theirs.shape) != tuple(mine.shape):
        return f"shape {tuple(theirs.shape)} != {tuple(mine.shape)}"
    if not bool((theirs == mine).all()):
        diff = (theirs.double() - mine.double()).abs().max().item()
        return f"values differ, max abs difference {diff:g}"
    return None
