"""The dataloading benchmark's jobs: which scenarios run for a dataset, what each reads, and
the resources each asks for.

A scenario is named ``{loader}_{source}_{mode}[_e{encoding}]_{decode}_w{workers}_n{nodes}``
(:mod:`robopipe.bench.scenarios`); ``bench`` is the config's ``bench:`` section.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from robopipe.bench.peers import CANNOT_SELECT
from robopipe.bench.registry import get_loader
from robopipe.bench.scenarios import expand_matrix, parse_scenario
from robopipe.copies.encodings import LANCE
from robopipe.layout import BENCH_RESULT, CEILING_FILE, COPY_INFO, PUSH_FILE, ROBO_FILE
from robopipe.peer_env import NO_PEERS, peer_packages, peer_python
from robopipe.sources import Source

# NVDEC cannot decode AV1: a cuda scenario without an encoding reads this copy
CUDA_ENCODING = "h264g2"
# keys of the bench: section that are not robopipe.bench.runner.Settings
NOT_SETTINGS = ("matrix", "ceiling_frames")


def scenarios(bench: dict, robomimic_source: bool, episodes_selected: bool = False) -> list[str]:
    """The scenario names of the configured matrix that apply to a dataset, in matrix order:
    each loader's (robopipe.bench.registry) rule, given whether the dataset's source is a
    robomimic file, whether its episodes are selected (``LoaderSpec.selects_episodes``) and
    which peer packages the peer interpreter has
    (:func:`robopipe.peer_env.peer_python`); combinations of a loader and a copy it does
    not read (``LoaderSpec.reads``: the ``lance`` copy and the other loaders) are left out."""
    peers = peer_packages(peer_python(bench))
    chosen = []
    for name in expand_matrix(bench["matrix"]):
        scenario = parse_scenario(name)
        spec = get_loader(scenario.loader)
        if spec.applies(
            robomimic_source=robomimic_source, peers=peers, episodes_selected=episodes_selected
        ) and spec.reads(scenario.encoding):
            chosen.append(name)
    return chosen


def skipped_peers(bench: dict, episodes_selected: bool = False) -> dict[str, str]:
    """{loader: why its scenarios do not run} for the matrix's peer loaders that the peer
    interpreter cannot run (none, or without the loader's package), or that cannot select
    the episodes a dataset selects (``episodes_selected``; ``LoaderSpec.selects_episodes``)."""
    python = peer_python(bench)
    peers = peer_packages(python)
    skipped = {}
    for name in bench.get("matrix", {}).get("loader", []):
        spec = get_loader(name)
        if spec.needs_lerobot_python and spec.peer_package not in peers:
            skipped[name] = NO_PEERS if not python else f"{python} has no {spec.peer_package}"
        elif episodes_selected and not spec.selects_episodes:
            skipped[name] = f"episodes are selected and {name} {CANNOT_SELECT}"
    return skipped


def scenario_encoding(name: str) -> str | None:
    """The copy a scenario reads: its encoding, :data:`CUDA_ENCODING` for a cuda scenario
    without one, or None (the converted dataset)."""
    scenario = parse_scenario(name)
    if scenario.encoding is None and scenario.decode == "cuda":
        return CUDA_ENCODING
    return scenario.encoding


def source_scenarios(bench: dict, source: Source) -> list[str]:
    """:func:`scenarios` of the dataset of ``source``: the robomimic loaders where it is
    made from an HDF5 file, those that select episodes where it is read in part."""
    return scenarios(
        bench,
        robomimic_source=source.made_from_hdf5,
        episodes_selected=source.read_episodes() is not None,
    )


def encodings(names: list[str]) -> list[str]:
    """The copies that scenarios ``names`` read, sorted."""
    return sorted({e for e in map(scenario_encoding, names) if e})


def scenario_dataset(dataset: str, name: str, info: str) -> str:
    """The info.json of what scenario ``name`` reads: its copy, else the dataset itself
    (``info``: the dataset's own info.json, Source.dataset_info)."""
    encoding = scenario_encoding(name)
    if encoding:
        return COPY_INFO.format(dataset=dataset, encoding=encoding)
    return info


def scenario_input(source: Source, name: str) -> str:
    """input of scenario ``name``'s job: what a job that reads the dataset where it is waits
    for (Source.dataset_location_input: a remote v3.0 dataset's check) where the scenario
    reads it at its URL (:func:`reads_url`: its settings name the URL, no folder is read),
    else the info.json of what it reads (:func:`scenario_dataset`)."""
    if reads_url(name, source.bench_urls()):
        return source.dataset_location_input()
    return scenario_dataset(source.name, name, source.dataset_info())


def ceiling_input(source: Source, suffix: str) -> str:
    """input of a decode-ceiling job: the info.json of the copy its ``suffix`` names, else
    what a job that reads the dataset where it is waits for (Source.dataset_location_input:
    the info.json, or only the check of a remote v3.0 dataset, whose first video files
    measure_ceiling fetches)."""
    if suffix:
        return ceiling_dataset(source.name, suffix, source.dataset_info())
    return source.dataset_location_input()


def ceiling_root(source: Source, suffix: str) -> str:
    """Where a decode-ceiling job reads: the v3.0 folder of the copy its ``suffix`` names,
    else the dataset where it is (Source.dataset_location: a folder or a remote URL)."""
    if suffix:
        return os.path.dirname(os.path.dirname(ceiling_input(source, suffix)))
    return source.dataset_location()


def ceiling_storage_options(source: Source, suffix: str) -> dict:
    """The fsspec options of :func:`ceiling_root`: none for a copy (Source.
    dataset_storage_options of the dataset itself)."""
    return {} if suffix else source.dataset_storage_options()


def ceiling_suffix(encoding: str | None) -> str:
    """The ``{suffix}`` of a decode-ceiling file: ``_e<encoding>`` for a copy, else empty."""
    return f"_e{encoding}" if encoding else ""


def ceiling_dataset(dataset: str, suffix: str, info: str) -> str:
    """The info.json of what a ceiling job decodes: the copy its ``suffix`` names, else the
    dataset itself (``info``, as for :func:`scenario_dataset`)."""
    if suffix:
        return COPY_INFO.format(dataset=dataset, encoding=suffix.removeprefix("_e"))
    return info


def ceilings(dataset: str, names: list[str]) -> list[str]:
    """The decode-ceiling JSONs of the dataset and of each copy that scenarios ``names``
    read (not ``lance``: its mp4s are the dataset's own)."""
    return [
        CEILING_FILE.format(dataset=dataset, suffix=ceiling_suffix(e))
        for e in [None, *encodings(names)]
        if e != LANCE
    ]


def results(dataset: str, names: list[str]) -> list[str]:
    """A dataset's benchmark outputs: each scenario's JSON, then the ceiling JSONs."""
    return [BENCH_RESULT.format(dataset=dataset, scenario=n) for n in names] + ceilings(
        dataset, names
    )


def settings(bench: dict) -> dict:
    """The bench: section without the keys that are not runner settings
    (robopipe.bench.runner.Settings keywords)."""
    return {k: v for k, v in bench.items() if k not in NOT_SETTINGS}


def reads_url(name: str, urls: Mapping[str, str]) -> bool:
    """Whether scenario ``name`` reads a remote v3.0 dataset at its own URL and nothing
    local: its source is one of ``urls`` (the one the URL's scheme names,
    Source.bench_urls; none for any other dataset), it reads no training copy, and its
    loader is robopipe's (a peer's scenario reads the URL too, but needs the local copy:
    its items are compared with robopipe's on local files). Every other scenario of such a
    dataset reads local files: its local copy (``local``, and ``http``/``s3`` served from it
    on 127.0.0.1 where ``bench.sources`` names no URL) or a training copy."""
    if scenario_encoding(name) is not None:
        return False
    scenario = parse_scenario(name)
    return scenario.source in urls and not get_loader(scenario.loader).peer


def dataset_settings(bench: dict, source: Source) -> dict:
    """:func:`settings` for the dataset of ``source``: the episodes its loaders read
    (Source.read_episodes), and for a remote v3.0 dataset, the benchmark source that reads
    it where it is reads its URL (Source.bench_urls), with its fsspec options (whatever
    ``bench.sources`` says for that source)."""
    chosen = settings(bench)
    episodes = source.read_episodes()
    if episodes is not None:
        chosen["episodes"] = list(episodes)
    for bench_source, url in source.bench_urls().items():
        chosen["sources"] = {**chosen.get("sources", {}), bench_source: url}
        chosen["storage_options"] = {
            **chosen.get("storage_options", {}),
            bench_source: source.dataset_storage_options(),
        }
    return chosen


def ceiling_options(bench: dict) -> dict:
    """The robopipe.bench.ceiling.measure_ceiling keywords the bench: section sets
    (``ceiling_frames`` as ``frames``); the function's defaults hold the rest."""
    return {"frames": bench["ceiling_frames"]} if "ceiling_frames" in bench else {}


def pushed_first(bench: dict, source: Source, name: str) -> bool:
    """Whether scenario ``name`` waits for the push of the dataset of ``source``: its
    benchmark source's URL (``bench["sources"]``, a template of ``{dataset}``) is where the
    source's ``push: url`` publishes it (Source.pushed, Source.push_options)."""
    template = bench.get("sources", {}).get(parse_scenario(name).source)
    return (
        bool(template)
        and source.pushed()
        and template.format(dataset=source.name) == source.push_options().get("url")
    )


def pushed_input(bench: dict, source: Source, name: str) -> list[str]:
    """The push scenario ``name`` waits for: ``[push.json]`` where :func:`pushed_first`,
    else ``[]``."""
    pushed = pushed_first(bench, source, name)
    return [PUSH_FILE.format(dataset=source.name)] if pushed else []


def robo_input(dataset: str, name: str) -> list[str]:
    """The robo archive scenario ``name`` reads (rule ``robomimic_robo``): ``[robo file]``
    where its loader reads one (``robopipe_seq_tar``), else ``[]``."""
    reads = get_loader(parse_scenario(name).loader).robo_archive
    return [ROBO_FILE.format(dataset=dataset)] if reads else []


def resources(name: str) -> dict:
    """What scenario ``name``'s job asks for.

    Returns:
        ``threads``: the DataLoader workers plus the main process; ``nodes``: one rank per
        node (also its SLURM ``tasks``); ``mem_mb``: 2,000 MB for the main process plus 1,000
        MB per worker; ``network``: 1 for a remote source, so network-bound scenarios never
        overlap; ``mpi``: ``"srun"`` for a multi-node scenario (the job runs its own
        ``srun -N {nodes}``, robopipe.ranks.run_ranks), else empty; ``gres``: one GPU per node
        for cuda decoding, else empty.
    """
    scenario = parse_scenario(name)
    return {
        "threads": scenario.workers + 1,
        "nodes": scenario.nodes,
        "mem_mb": 2000 + 1000 * scenario.workers,
        "network": int(scenario.remote),
        "mpi": "srun" if scenario.nodes > 1 else "",
        "gres": "gpu:1" if scenario.decode == "cuda" else "",
    }
