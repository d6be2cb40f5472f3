"""Run one benchmark scenario and write its result (JSON + one-row CSV) per the bench contract.

Usage (one scenario per process; Snakemake's ``bench_scenario`` rule does this)::

    python -m robopipe.bench.runner --dataset demo --root results/demo/v3.0 \\
        --scenario robopipe_map_local_single_cpu_w2_n1 --settings '{"steady_s": 10}' \\
        --json out.json --csv out.csv [--rank 0 --world-size 1 --start-barrier DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import itertools
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader

from robopipe.bench.latency import FAULT_KINDS, Faults, delaying_proxy, is_loopback_http, through
from robopipe.bench.measure import (
    ZeroSamplesError,
    measure_latency,
    measure_throughput,
    random_items,
    wait_for_ranks,
)
from robopipe.bench.peers import check_items, run_peer
from robopipe.bench.registry import get_loader
from robopipe.bench.rss import PeakRss
from robopipe.bench.scenarios import Scenario, parse_scenario
from robopipe.bench.servers import serve_nginx, serve_s3
from robopipe.config_check import key_hint
from robopipe.copies.encodings import LANCE
from robopipe.jobs import slurm_job_start_seconds, startup_seconds
from robopipe.layout import COPY_FILE, DEFAULT_TOLERANCE_S
from robopipe.loading import EpochSampler, collate, mode_delta_timestamps, read_meta
from robopipe.loading.batches import batch_frame_mb, prefetch_factor_within
from robopipe.peer_env import peer_python
from robopipe.ranks import current_node
from robopipe.retry import DEFAULT_BUDGET, RetryBudget, retry_log
from robopipe.scenario_result import write_scenario_result

log = logging.getLogger(__name__)


@dataclass
class Settings:
    """Benchmark settings: ``config["bench"]`` minus the matrix.

    Attributes:
        batch_size: samples per batch.
        image_dtype: ``uint8`` or ``float32``.
        warmup_batches: batches (the first included) before the steady window opens.
        steady_s: length of the steady window, wall-clock seconds.
        probe_samples: samples fetched one by one in this process for latency percentiles and
            single-process samples/s.
        shuffle_buffer: frame indices in the streaming loader's shuffle buffer.
        prefetch_mb: MB of episode bytes each streaming-loader worker fetches ahead from a
            remote source (``StreamingDataset(prefetch_mb=...)``); recorded in the result.
        batches_in_flight_mb: MiB of decoded frame batches robopipe's loaders may hold at
            once: the DataLoader's ``prefetch_factor`` is the largest of 1 and 2 whose
            batches in flight fit it
            (:func:`robopipe.loading.batches.prefetch_factor_within`); recorded in the result
            with ``batch_mb`` and the ``prefetch_factor`` chosen.
        batch_buffer_mb: MiB of shared-memory batch buffers each worker of robopipe's
            loaders keeps for reuse (``MapDataset(batch_buffer_mb=...)``,
            ``StreamingDataset(batch_buffer_mb=...)``; batches beyond it get new shared
            memory); recorded in the result.
        gop_cache_mb: MiB of video GOPs each map-style worker caches from a remote source
            (``MapDataset(gop_cache_mb=...)``, 0: fsspec's readahead file); recorded in the
            result.
        gop_ahead: batches of its own ahead of the current one whose GOPs each map-style
            worker fetches in the background from a remote source (the batch sampler is an
            ``EpochSampler(ahead=gop_ahead x workers)``), within half its GOP cache; 0: none.
            32 of cr5's batches of 32 (about 4 s at 250 samples/s per worker) hide a 429's
            ``Retry-After: 1`` and a retry after it; recorded in the result.
        decoder_cache_size: decoders kept per process.
        seek_mode: torchcodec seek mode.
        tolerance_s: timestamp tolerance of decoded frames.
        seed: shuffling seed.
        windows: extra frame modes, name -> {key (or ``cameras``): deltas in seconds}.
        lerobot_python: the peer interpreter (lerobot 0.6.1, lerobot-lancedb) for the peer
            loaders (``lerobot_*``, ``lancedb_map``), or None; :meth:`from_config` defaults
            it to ``.venv-lerobot/bin/python`` where that exists
            (:func:`robopipe.peer_env.peer_python`).
        robomimic_lru_mb: MiB of demos the ``robopipe_seq_lru`` loader's LRU cache holds.
        sources: remote URL templates per source (``{dataset}`` is replaced), for example
            ``{"s3": "s3://bucket/{dataset}", "hf": "hf://datasets/me/{dataset}"}``; an
            ``http`` or ``s3`` source without one is served from the local copy on 127.0.0.1.
        storage_options: fsspec options per source, e.g. ``{"s3": {"anon": true}}``.
        latency_ms: network round trip added to remote sources, milliseconds: a delaying
            proxy on 127.0.0.1 (:mod:`robopipe.bench.latency`) adds half of it to every chunk
            in each direction. 0: no delay (and no proxy in front of the served ``http``
            source). It needs a plain ``http://`` endpoint on 127.0.0.1 (the served ``http``
            and ``s3`` sources, or a configured ``s3`` ``endpoint_url`` / ``hf`` ``endpoint``
            such as the Hub stand-in).
        episodes: the episodes robopipe's loaders read (a v3.0 dataset's ``episodes:`` less
            its ``skip_episodes``, LeRobotDataset's ``episodes=``); None: all.
        fault_rate: share of a remote source's requests the proxy faults, in [0, 1]
            (:class:`robopipe.bench.latency.Faults`; like ``latency_ms`` it needs a plain
            ``http://`` endpoint on 127.0.0.1); 0: none.
        fault_kinds: the kinds of fault drawn from (``robopipe.bench.latency.FAULT_KINDS``);
            a ``stall`` lasts twice ``read_timeout_s``.
        retry_attempts, retry_seconds, read_timeout_s: robopipe's loaders' retry budget
            (:class:`robopipe.retry.RetryBudget`).
    """

    batch_size: int = 32
    image_dtype: str = "uint8"
    warmup_batches: int = 5
    steady_s: float = 10.0
    probe_samples: int = 64
    shuffle_buffer: int = 1000
    prefetch_mb: float = 64.0
    gop_cache_mb: float = 64.0
    gop_ahead: int = 32
    batches_in_flight_mb: float = 1024.0
    batch_buffer_mb: float = 512.0
    decoder_cache_size: int = 16
    seek_mode: str = "approximate"
    tolerance_s: float = DEFAULT_TOLERANCE_S
    seed: int = 0
    windows: dict = field(default_factory=dict)
    lerobot_python: str | None = None
    robomimic_lru_mb: float = 256.0
    sources: dict = field(default_factory=dict)
    storage_options: dict = field(default_factory=dict)
    latency_ms: float = 0.0
    episodes: list[int] | None = None
    fault_rate: float = 0.0
    fault_kinds: list[str] = field(default_factory=lambda: list(FAULT_KINDS))
    retry_attempts: int = DEFAULT_BUDGET.attempts
    retry_seconds: float = DEFAULT_BUDGET.seconds
    read_timeout_s: float = DEFAULT_BUDGET.read_timeout_s

    @property
    def retry_budget(self) -> RetryBudget:
        """The loaders' :class:`robopipe.retry.RetryBudget`."""
        return RetryBudget(self.retry_attempts, self.retry_seconds, self.read_timeout_s)

    def faults(self) -> Faults:
        """The faults the proxy injects (:class:`robopipe.bench.latency.Faults`)."""
        return Faults(
            self.fault_rate,
            tuple(self.fault_kinds),
            stall_s=2 * self.read_timeout_s,
            seed=self.seed,
        )

    @classmethod
    def from_config(cls, bench: dict) -> Settings:
        """Settings from a mapping of their fields (``config["bench"]`` less the keys that are
        not settings, :func:`robopipe.workflow.bench.settings`; the command's
        ``--settings``); ``lerobot_python`` left out is
        :func:`robopipe.peer_env.peer_python`'s default.

        Raises:
            ValueError: a key that is no field, named with the nearest field as the config
                schema's check names it (:func:`robopipe.config_check.key_hint`): a
                misspelt ``steady_z`` would otherwise measure with the default
                ``steady_s``.
        """
        names = [f.name for f in fields(cls)]
        unknown = [key for key in bench if key not in names]
        if unknown:
            raise ValueError(
                "; ".join(
                    f"unknown setting {key!r}: {key_hint(str(key), names)}" for key in unknown
                )
            )
        return cls(**{**bench, "lerobot_python": peer_python(bench)})


@contextlib.contextmanager
def source_url(
    scenario: Scenario, dataset: str, root: Path, settings: Settings
) -> Iterator[tuple[str, dict | None, object | None]]:
    """(URL, storage options, traffic, proxy) the scenario reads the dataset from.

    ``http`` without a configured URL is served by nginx (:func:`serve_nginx`), ``s3`` by
    moto. With ``settings.latency_ms`` the loader reaches the server through a delaying proxy
    (:func:`robopipe.bench.latency.delaying_proxy`). ``traffic.totals()`` counts
    ``bytes_fetched`` and ``requests``: nginx's access log for the served ``http`` source, the
    proxy for the others (which then always stands in front, without delay at latency 0);
    traffic is None for ``local`` and for endpoints that are not plain http on 127.0.0.1.
    ``settings.fault_rate`` puts the proxy in front too, injecting its faults; proxy (None
    where there is none) counts them (``faults_<kind>`` of ``proxy.totals()``).

    Raises:
        ValueError: an ``hf`` source without a URL template in ``settings.sources``, or a
            ``latency_ms`` or ``fault_rate`` the proxy cannot inject (an endpoint not on
            127.0.0.1 over http).
    """
    options = settings.storage_options.get(scenario.source)
    if scenario.source == "local":
        yield str(root), None, None, None
        return
    with contextlib.ExitStack() as stack:
        server = None
        if scenario.source in settings.sources:
            url = settings.sources[scenario.source].format(dataset=dataset)
        elif scenario.source == "http":
            server = stack.enter_context(serve_nginx(root.parent))
            url = f"{server.url}/{root.name}"
        elif scenario.source == "s3":
            url, options = stack.enter_context(serve_s3(root))
        else:
            raise ValueError(
                f"source {scenario.source!r} needs a URL: set bench.sources.{scenario.source} "
                "(e.g. hf://datasets/<user>/{dataset})"
            )
        proxy = None
        if settings.latency_ms or settings.fault_rate or server is None:
            url, options, proxy = _through_proxy(stack, scenario.source, url, options, settings)
        yield url, options, server or proxy, proxy


def _through_proxy(stack, source: str, url: str, options: dict | None, settings: Settings):
    """(url, options, proxy) with the source's endpoint behind a delaying proxy, where the
    endpoint is plain http on 127.0.0.1; else unchanged, with proxy None."""
    options = dict(options or {})
    client_kwargs = dict(options.get("client_kwargs") or {})
    if source == "s3":
        endpoint = client_kwargs.get("endpoint_url")
    elif source == "hf":
        endpoint = options.get("endpoint") or os.environ.get("HF_ENDPOINT")
    else:
        endpoint = url
    if not is_loopback_http(endpoint):
        if settings.latency_ms or settings.fault_rate:
            raise ValueError(
                f"bench.latency_ms and bench.fault_rate need the {source} source on a plain "
                f"http:// address of 127.0.0.1 (their proxy runs there); it reads "
                f"{endpoint or url}"
            )
        return url, options or None, None
    proxy = stack.enter_context(delaying_proxy(endpoint, settings.latency_ms, settings.faults()))
    if source == "s3":
        options["client_kwargs"] = {**client_kwargs, "endpoint_url": through(proxy, endpoint)}
    elif source == "hf":
        options["endpoint"] = through(proxy, endpoint)
    else:
        url = through(proxy, url)
    return url, options or None, proxy


def run_scenario(
    dataset: str,
    root: str | Path,
    scenario_name: str,
    settings: Settings,
    *,
    rank: int = 0,
    world_size: int = 1,
    start_barrier: str | Path | None = None,
) -> dict:
    """Measure one scenario on one rank; return the contract's result dict.

    With ``world_size > 1`` and a ``start_barrier`` folder (shared by the ranks), the rank
    waits there for the others before its first batch
    (:func:`robopipe.bench.measure.wait_for_ranks`), so that the ranks measure together.
    The result records when measuring started (:func:`start_fields`), top level and per rank.

    Raises:
        ZeroSamplesError: nothing was measured.
        ValueError: an unsupported combination: a source, decode device or node count the
            loader cannot run (:meth:`robopipe.bench.registry.LoaderSpec.check`), a lerobot
            loader without ``settings.lerobot_python``, a robomimic loader on a dataset
            without a robomimic plan (see also
            :func:`robopipe.bench.sequence_loaders.run_sequence` for ``*_seq_*``).
    """
    scenario = parse_scenario(scenario_name)
    spec = get_loader(scenario.loader)
    spec.check(scenario)
    root = Path(root)
    barrier = None
    if start_barrier is not None and world_size > 1:
        barrier = {"folder": str(start_barrier), "rank": rank, "world_size": world_size}
    wait = functools.partial(wait_for_ranks, **barrier) if barrier else None
    with (
        PeakRss() as rss,
        source_url(scenario, dataset, root, settings) as (url, options, traffic, proxy),
        retry_log() as retries,
    ):
        if spec.needs_lerobot_python:
            measured = run_peer(scenario, spec, root, url, options, settings, barrier)
        elif spec.sequence:
            from robopipe.bench.sequence_loaders import run_sequence

            measured = run_sequence(scenario, root, settings)
        elif spec.robomimic_only:
            from robopipe.bench.robomimic_loaders import run_robomimic

            measured = run_robomimic(scenario, root, settings, rank, world_size, wait)
        else:
            measured = _run_robopipe(
                scenario, spec, dataset, url, options, settings, rank, world_size, traffic, wait
            )
        faults = _fault_fields(scenario, settings, proxy, retries, spec)
    started = start_fields(measured["measure_start_unix"])
    per_rank = {
        "rank": rank,
        "node": current_node(),
        "samples": measured["samples"],
        "frames": measured["frames"],
        "steady_wall_s": measured["steady_wall_s"],
        "frames_per_s": measured["frames_per_s"],
        **started,
        "barrier_wait_s": measured.get("barrier_wait_s"),
    }
    return {
        "dataset": dataset,
        "scenario": scenario.name,
        **scenario.as_dict(),
        "peer_version": measured.get("peer_version") or _version(spec.peer_package),
        "peer_check": _peer_check(measured, scenario, root, settings),
        "batch_size": measured.get("batch_size", settings.batch_size),
        "image_dtype": settings.image_dtype,
        "samples": measured["samples"],
        "frames": measured["frames"],
        "steady_wall_s": measured["steady_wall_s"],
        "samples_per_s": measured["samples_per_s"],
        "frames_per_s": measured["frames_per_s"],
        "frames_per_s_per_node": measured["frames_per_s"],
        "single_process_samples_per_s": measured["single_process_samples_per_s"],
        "fetch_share": measured.get("fetch_share"),
        "decode_share": measured.get("decode_share"),
        "first_batch_latency_s": measured["first_batch_latency_s"],
        **started,
        "start_skew_s": None,  # one rank
        "latency_ms": measured["latency_ms"],
        "peak_rss_mb": rss.peak_mb,
        "peak_rss_total_mb": rss.peak_mb,
        "peak_pss_mb": rss.peak_pss_mb,
        "peak_pss_total_mb": rss.peak_pss_mb,
        "shuffle_randomness": measured["shuffle_randomness"],
        "cpu_s_per_sample": measured["cpu_s_per_sample"],
        "decoder_cache": measured.get("decoder_cache"),
        "cpu_fallback": measured.get("cpu_fallback"),
        "device": measured["device"],
        "ranks": [per_rank],
        "network_latency_ms": None if scenario.source == "local" else settings.latency_ms,
        "prefetch_mb": settings.prefetch_mb if spec.stream and scenario.source != "local" else None,
        "gop_cache_mb": (
            settings.gop_cache_mb
            if scenario.loader == "robopipe_map" and scenario.source != "local"
            else None
        ),
        "gop_ahead": (
            settings.gop_ahead
            if scenario.loader == "robopipe_map" and scenario.source != "local"
            else None
        ),
        "batch_buffer_mb": measured.get("batch_buffer_mb"),
        "batches_in_flight_mb": measured.get("batches_in_flight_mb"),
        "batch_mb": measured.get("batch_mb"),
        "prefetch_factor": measured.get("prefetch_factor"),
        "network_wait_share": measured.get("network_wait_share"),
        **_network_fields(
            measured.get("bytes_fetched"), measured.get("requests"), measured["samples"]
        ),
        **faults,
    }


def start_fields(measure_start_unix: float) -> dict:
    """When measuring started, and how long after the job and the process started.

    Returns:
        ``measure_start_unix``: the wall-clock time the first batch was asked for (from
        :func:`robopipe.bench.measure.measure_throughput`); ``dispatch_s``: seconds from the
        start of the SLURM job this process runs in to then, i.e. the Snakemake starts inside
        the job, the interpreter, imports, the dataset's set-up and the ranks' barrier (the
        wait in the queue comes before the job's start);
        :func:`robopipe.jobs.slurm_job_start_seconds`, 1 s resolution, None outside SLURM;
        ``startup_to_measure_s``: seconds from this process's start to then, in or out of
        SLURM (:func:`robopipe.jobs.startup_seconds`; None where ``/proc`` is absent).
    """
    startup = startup_seconds()
    process_start_unix = None if startup is None else time.time() - startup
    return {
        "measure_start_unix": measure_start_unix,
        "dispatch_s": slurm_job_start_seconds(datetime.datetime.fromtimestamp(measure_start_unix)),
        "startup_to_measure_s": None
        if process_start_unix is None
        else round(max(measure_start_unix - process_start_unix, 0.0), 3),
    }


def _fault_fields(scenario, settings: Settings, proxy, retries, spec) -> dict:
    """The result's fault fields, over the whole scenario (warm-up, steady window, probe): the
    setting, the faults the proxy injected by kind, and robopipe's retries (None for a peer
    loader, whose reads robopipe does not make)."""
    if scenario.source == "local":
        return {"fault_rate": None, "fault_kinds": None, "faults": None, "retries": None}
    totals = proxy.totals() if proxy is not None else {}
    return {
        "fault_rate": settings.fault_rate,
        "fault_kinds": list(settings.fault_kinds) if settings.fault_rate else [],
        "faults": {k: totals.get(f"faults_{k}", 0) for k in FAULT_KINDS} if proxy else None,
        "retries": None if spec.needs_lerobot_python else retries.count(),
    }


def _version(package: str | None) -> str | None:
    """``"<package> <version>"`` of a peer installed in this interpreter (robomimic)."""
    if not package:
        return None
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"{package} {version(package)}"
    except PackageNotFoundError:
        return None


def _peer_check(measured: dict, scenario: Scenario, root: Path, settings: Settings):
    """A peer-environment loader's items compared with robopipe's (``check_items``) on the
    local dataset (for the ``lance`` copy: the v3.0 folder it was made from) with the same
    episode selection, or None."""
    if "peer_items" not in measured:
        return None
    reference = root
    if scenario.encoding == LANCE:
        reference = Path(json.loads((root.parent / Path(COPY_FILE).name).read_text())["source"])
    meta = read_meta(reference)
    delta = mode_delta_timestamps(scenario.mode, meta.camera_keys, meta.fps, settings.windows)
    return check_items(
        measured["peer_items"], reference, delta, settings.image_dtype, settings.episodes
    )


def _network_fields(bytes_fetched: int | None, requests: int | None, samples: int) -> dict:
    """The result's traffic fields: totals of the steady window and their per-sample rates."""
    return {
        "bytes_fetched": bytes_fetched,
        "requests": requests,
        "bytes_per_sample": None if bytes_fetched is None else bytes_fetched / samples,
        "requests_per_sample": None if requests is None else requests / samples,
    }


def _run_robopipe(
    scenario, spec, dataset, url, options, settings, rank, world_size, traffic=None, wait=None
) -> dict:
    budget = settings.retry_budget
    meta = read_meta(url, name=dataset, storage_options=options, retry_budget=budget)
    delta_timestamps = mode_delta_timestamps(
        scenario.mode, meta.camera_keys, meta.fps, settings.windows
    )
    batch_mb = batch_frame_mb(meta, delta_timestamps, settings.batch_size, settings.image_dtype)
    prefetch_factor = (
        prefetch_factor_within(settings.batches_in_flight_mb, batch_mb, scenario.workers)
        if scenario.workers
        else None
    )
    kwargs = dict(
        name=dataset,
        delta_timestamps=delta_timestamps,
        image_dtype=settings.image_dtype,
        decode_device=scenario.decode,
        tolerance_s=settings.tolerance_s,
        decoder_cache_size=settings.decoder_cache_size,
        seek_mode=settings.seek_mode,
        storage_options=options,
        retry_budget=budget,
        episodes=settings.episodes,
        batch_buffers=(prefetch_factor or 0) + 2,  # robopipe.loading.batches's rule
        batch_buffer_mb=settings.batch_buffer_mb,
    )
    stream = spec.stream
    if stream:
        kwargs.update(
            rank=rank,
            world_size=world_size,
            shuffle_buffer=settings.shuffle_buffer,
            prefetch_mb=settings.prefetch_mb,
            seed=0,
        )
    else:
        kwargs.update(gop_cache_mb=settings.gop_cache_mb)
    dataset_cls = spec.dataset_class()
    # the streaming loader builds its batches itself (frames copied as decoded), as the
    # map-style loader's __getitems__ does
    ds = dataset_cls(url, **kwargs, **({"batch_size": settings.batch_size} if stream else {}))
    if stream:
        ds.streams(max(scenario.workers, 1))  # fails early if a worker would get no episode
    # the map-style loader's batches name the next ones, whose GOPs its workers fetch ahead
    sampler = None
    if not stream:
        ahead = settings.gop_ahead * max(scenario.workers, 1)
        sampler = EpochSampler(
            len(ds),
            settings.batch_size,
            seed=settings.seed,
            rank=rank,
            world_size=world_size,
            ahead=ahead,
        )
    loader = DataLoader(
        ds,
        **({"batch_size": None} if stream else {"batch_sampler": sampler}),
        num_workers=scenario.workers,
        persistent_workers=scenario.workers > 0,
        multiprocessing_context="spawn" if scenario.decode == "cuda" and scenario.workers else None,
        collate_fn=collate,
        prefetch_factor=prefetch_factor,
    )
    epochs = itertools.count()

    def next_epoch(loader=loader) -> DataLoader:
        if sampler is not None:
            sampler.set_epoch(next(epochs))
        return loader

    measured = measure_throughput(
        next_epoch,
        video_keys=meta.camera_keys,
        warmup_batches=settings.warmup_batches,
        steady_s=settings.steady_s,
        snapshot=ds.counters.totals if traffic is None else _with_traffic(ds.counters, traffic),
        start_barrier=wait,
    )
    totals = measured["counters_end"]
    window = {k: totals[k] - measured["counters_start"][k] for k in totals}
    # the workers end here, not whenever the collector reaches a cycle that holds this frame
    # (an exception caught while the dataset opened, e.g. fsspec's FileNotFoundError, keeps
    # its traceback's callers' frames): nothing else holds the loader
    del loader, next_epoch
    busy = window["fetch_s"] + window["decode_s"]
    probe = dataset_cls(url, **kwargs)
    items = iter(probe) if stream else random_items(probe, settings.seed)
    try:
        measured.update(measure_latency(items, settings.probe_samples))
    finally:
        items.close()  # a stream's fetches ahead end now, while its server is up
    measured.update(
        fetch_share=window["fetch_s"] / busy if busy else None,
        decode_share=window["decode_s"] / busy if busy else None,
        decoder_cache={k: int(totals[k]) for k in ("hits", "misses", "evictions")},
        cpu_fallback=bool(totals["cpu_fallback"]) if scenario.decode == "cuda" else None,
        device=torch.cuda.get_device_name(0) if scenario.decode == "cuda" else "cpu",
        batch_buffer_mb=settings.batch_buffer_mb,
        batches_in_flight_mb=settings.batches_in_flight_mb,
        batch_mb=batch_mb,
        prefetch_factor=prefetch_factor,
    )
    if traffic is not None:
        measured.update(
            bytes_fetched=window["bytes_fetched"],
            requests=window["requests"],
            network_wait_share=None
            if not (stream or kwargs["gop_cache_mb"])  # fsspec's readahead file: not counted
            else window["wait_s"] / (measured["steady_wall_s"] * max(scenario.workers, 1)),
        )
    return measured


def _with_traffic(counters, traffic):
    """A snapshot of the loader's counters and the network's ``bytes_fetched``/``requests``."""
    return lambda: {**counters.totals(), **traffic.totals()}


def run_multi_node(
    dataset: str, root: str | Path, scenario_name: str, settings: Settings, final_json: str | Path
) -> dict:
    """Run an ``n{nodes}`` scenario as one rank per node (``robopipe.ranks.run_ranks``: srun
    under SLURM, local processes otherwise) and combine the ranks' results.

    Counts add up; rates divide them by the longest rank window
    (``robopipe.ranks.combine_rank_results``); ``frames_per_s_per_node`` is the total over
    nodes; peak RSS and first-batch latency are the worst rank's; latency percentiles and
    single-process samples/s are rank 0's. Rank files go to a folder next to ``final_json``
    (shared between nodes), where the ranks also wait for each other before measuring
    (:func:`robopipe.bench.measure.wait_for_ranks`). ``start_skew_s`` is how far apart the
    ranks started measuring (their ``measure_start_unix``, each by its node's clock);
    ``measure_start_unix``, ``dispatch_s`` and ``startup_to_measure_s`` are the last rank's
    start, as seen from this process (:func:`start_fields`): when every rank was measuring.

    Raises:
        ValueError: the loader cannot run the scenario
            (:meth:`robopipe.bench.registry.LoaderSpec.check`).
        RuntimeError: a rank failed.
    """
    from robopipe.ranks import combine_rank_results, run_ranks

    scenario = parse_scenario(scenario_name)
    get_loader(scenario.loader).check(scenario)
    Path(final_json).parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".ranks-", dir=Path(final_json).parent) as tmp:
        argv = [
            sys.executable, "-m", "robopipe.bench.runner", "--dataset", dataset,
            "--root", str(Path(root).resolve()), "--scenario", scenario_name,
            "--settings", json.dumps(asdict(settings)),
            "--json", f"{tmp}/rank-{{rank}}.json", "--csv", f"{tmp}/rank-{{rank}}.csv",
            "--start-barrier", tmp,
        ]  # fmt: skip
        run_ranks(argv, scenario.nodes)
        paths = [Path(tmp) / f"rank-{r}.json" for r in range(scenario.nodes)]
        results = [json.loads(p.read_text()) for p in paths]
        combined = combine_rank_results(paths)
    caches = [r["decoder_cache"] for r in results if r["decoder_cache"]]
    counted = all(r.get("bytes_fetched") is not None for r in results)
    network = _network_fields(
        sum(r["bytes_fetched"] for r in results) if counted else None,
        sum(r["requests"] for r in results) if counted else None,
        combined["samples"],
    )
    fallbacks = [r["cpu_fallback"] for r in results if r["cpu_fallback"] is not None]
    return {
        **results[0],
        "samples": combined["samples"],
        "frames": combined["frames"],
        "steady_wall_s": combined["wall_s"],
        "samples_per_s": combined["samples_per_s"],
        "frames_per_s": combined["frames_per_s"],
        "frames_per_s_per_node": combined["frames_per_s"] / scenario.nodes,
        "first_batch_latency_s": max(r["first_batch_latency_s"] for r in results),
        **start_fields(max(r["measure_start_unix"] for r in results)),
        "start_skew_s": combined["start_skew_s"],
        "peak_rss_mb": max(r["peak_rss_mb"] for r in results),
        "peak_rss_total_mb": sum(r["peak_rss_mb"] for r in results),
        "peak_pss_mb": max(r["peak_pss_mb"] for r in results),
        "peak_pss_total_mb": sum(r["peak_pss_mb"] for r in results),
        "shuffle_randomness": float(np.mean([r["shuffle_randomness"] for r in results])),
        "decoder_cache": {k: sum(c[k] for c in caches) for k in caches[0]} if caches else None,
        "cpu_fallback": any(fallbacks) if fallbacks else None,
        "ranks": [r["ranks"][0] for r in results],
        **network,
    }


def main(argv: list[str] | None = None) -> int:
    """Command line: run one scenario (one rank) and write JSON + CSV; exit 1 on failure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--root", required=True, help="local v3.0 dataset folder")
    parser.add_argument("--scenario", required=True)
    parser.add_argument("--settings", default="{}", help="JSON object of Settings fields")
    parser.add_argument("--json", required=True)
    parser.add_argument("--csv", required=True)
    parser.add_argument("--rank", type=int, default=int(os.environ.get("RANK", 0)))
    parser.add_argument("--world-size", type=int, default=int(os.environ.get("WORLD_SIZE", 1)))
    parser.add_argument(
        "--start-barrier",
        help="a folder all ranks see: each waits there for the others before measuring",
    )
    args = parser.parse_args(argv)
    try:
        settings = json.loads(args.settings)
        if not isinstance(settings, dict):
            raise ValueError(f"a JSON object of Settings fields, not {args.settings}")
        settings = Settings.from_config(settings)
    except ValueError as err:  # json.JSONDecodeError is one
        parser.error(f"--settings: {err}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        result = run_scenario(
            args.dataset,
            args.root,
            args.scenario,
            settings,
            rank=args.rank,
            world_size=args.world_size,
            start_barrier=args.start_barrier,
        )
    except (ZeroSamplesError, ValueError, RuntimeError) as err:
        print(f"robopipe bench: {args.dataset}/{args.scenario}: {err}", file=sys.stderr)
        return 1
    write_scenario_result(result, args.json, args.csv)
    log.info("%s: %.1f samples/s", args.scenario, result["samples_per_s"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
