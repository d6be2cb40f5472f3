"""robomimic HDF5 -> LeRobot v2.1, sharded: a plan, one job per batch of demos, one assembly.

- :func:`make_plan`: the demos (numeric order), their lengths and the batches of at most
  ``demos_per_batch`` demos, each with its first episode and first global frame index.
- :func:`write_batch`: one batch's episodes as v2.1 files under their final names (global
  episode and frame indices), videos encoded per camera, plus ``part.json`` (their
  ``episodes.jsonl`` and ``episodes_stats.jsonl`` lines, see ``V21Writer.part``).
- :func:`assemble`: hard-links every batch's files into the v2.1 folder (no bytes copied)
  and writes its ``meta/`` (``write_parts_meta``).

The v2.1 folder is then converted to v3.0 by the standard pipeline. Each ``episodes.jsonl``
line carries two extra keys, which that conversion copies into the v3.0 episodes metadata as
columns: ``robomimic/demo`` (the demo's name, e.g. ``"demo_10"``) and, when the file has
``mask/<filter>`` lists, ``robomimic/masks`` (the filters listing the demo, e.g.
``["train"]``); so the train/valid split survives as episode metadata.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import h5py

from robopipe.atomic import atomic_path, link_or_copy, write_json
from robopipe.errors import DatasetError
from robopipe.formats.v21_writer import V21Writer, write_parts_meta
from robopipe.layout import DEFAULT_CHUNK_SIZE
from robopipe.robomimic.hdf5 import RobomimicFile

PART_FILE = "part.json"
DEMO_COLUMN = "robomimic/demo"


@dataclass(frozen=True)
class RobomimicOptions:
    """How a robomimic file becomes a LeRobot dataset (the config's ``robomimic:`` keys).

    Attributes:
        state: ``"concat"`` (low-dimensional observations -> ``observation.state``) or
            ``"per_key"`` (one ``observation.<key>`` each).
        task: the task of every episode; default the file's ``env_args`` ``env_name``.
        fps: frames per second; default ``env_args`` ``control_freq``, else 20.
        codec: ``libsvtav1`` (lerobot's default), ``h264`` or ``h264_lossless`` (frames
            decode bit-identical; see ``V21Writer``).
        demos_per_batch: most demos in one batch job.
        chunks_size: episodes per v2.1 ``chunk-XXX`` folder.
    """

    state: str = "concat"
    task: str | None = None
    fps: int | None = None
    codec: str = "libsvtav1"
    demos_per_batch: int = 50
    chunks_size: int = DEFAULT_CHUNK_SIZE

    def open(self, hdf5: str | Path, name: str) -> RobomimicFile:
        """The file, read and checked with these options."""
        return RobomimicFile(hdf5, name=name, state=self.state, task=self.task, fps=self.fps)


def make_plan(hdf5: str | Path, name: str, options: RobomimicOptions) -> dict:
    """The conversion plan of a robomimic file (JSON-ready).

    Keys: ``dataset``, ``hdf5`` (the path as given), ``options``, ``demos`` (numeric order),
    ``lengths``, ``total_frames``, ``batches``: ``[{"id": "batch-000", "first_episode",
    "stop_episode", "first_index"}]`` (episodes ``first_episode <= i < stop_episode``).

    Raises:
        DatasetError: see :class:`RobomimicFile`; ``demos_per_batch < 1``.
    """
    if options.demos_per_batch < 1:
        raise DatasetError(name, "demos_per_batch must be >= 1")
    source = options.open(hdf5, name)
    lengths = [int(n) for n in source.lengths]
    batches = []
    for b, start in enumerate(range(0, len(lengths), options.demos_per_batch)):
        stop = min(start + options.demos_per_batch, len(lengths))
        batches.append(
            {
                "id": f"batch-{b:03d}",
                "first_episode": start,
                "stop_episode": stop,
                "first_index": sum(lengths[:start]),
            }
        )
    return {
        "dataset": name,
        "hdf5": str(hdf5),
        "options": asdict(options),
        "demos": source.demos,
        "lengths": lengths,
        "total_frames": sum(lengths),
        "batches": batches,
    }


def load_plan(path: str | Path) -> dict:
    """Read a plan written from :func:`make_plan` (``results/{dataset}/robomimic/plan.json``)."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def write_batch(plan: dict, batch_id: str, out_dir: str | Path) -> Path:
    """Write one batch's episodes (parquet, mp4 per camera, ``part.json``) to ``out_dir``.

    Files have their final v2.1 names (global episode indices), so :func:`assemble` only
    links them. ``out_dir`` appears complete or not at all.

    Raises:
        DatasetError: bad demo data (named by episode and file), or an unknown batch id.
    """
    name = plan["dataset"]
    batch = next((b for b in plan["batches"] if b["id"] == batch_id), None)
    if batch is None:
        raise DatasetError(name, f"the plan has no batch {batch_id!r}")
    options = RobomimicOptions(**plan["options"])
    source = options.open(plan["hdf5"], name)
    if source.demos != plan["demos"] or [int(n) for n in source.lengths] != plan["lengths"]:
        raise source.error("the file's demos changed since the plan was made")
    with atomic_path(out_dir) as tmp:
        writer = V21Writer(
            tmp,
            fps=source.fps,
            features=source.features(),
            robot_type=source.robot_type,
            codec=options.codec,
            chunks_size=options.chunks_size,
            name=name,
            first_episode=batch["first_episode"],
            first_index=batch["first_index"],
            tasks=[source.task],
        )
        with h5py.File(source.path, "r") as h5:
            for ep in range(batch["first_episode"], batch["stop_episode"]):
                group = h5["data"][source.demos[ep]]
                values = {s.feature: s.read(group) for s in source.sources}
                frames = {key: values.pop(key) for key in source.video_keys}
                writer.add_episode(frames, values, source.task)
        part = writer.part()
        for line in part["episodes"]:
            ep = line["episode_index"]
            line[DEMO_COLUMN] = source.demos[ep]
            line.update(source.episode_masks(ep))
        write_json(tmp / PART_FILE, part, indent=None)
    return Path(out_dir)


def assemble(plan: dict, batch_dirs: list[str | Path], out_dir: str | Path) -> Path:
    """Hard-link the batches' files into the v2.1 folder ``out_dir`` and write its meta.

    ``batch_dirs`` in plan order. ``out_dir`` appears complete or not at all.

    Raises:
        DatasetError: a batch is missing or does not follow the previous one.
    """
    name = plan["dataset"]
    if len(batch_dirs) != len(plan["batches"]):
        raise DatasetError(name, f"{len(batch_dirs)} batches for {len(plan['batches'])} planned")
    parts = []
    with atomic_path(out_dir) as tmp:
        for batch_dir in map(Path, batch_dirs):
            part_file = batch_dir / PART_FILE
            if not part_file.is_file():
                raise DatasetError(name, "batch is incomplete", file=part_file)
            parts.append(json.loads(part_file.read_text(encoding="utf-8")))
            # the episodes' files only: not part.json, nor Snakemake's .snakemake_timestamp
            for file in sorted(
                f for top in ("data", "videos") for f in (batch_dir / top).rglob("*")
            ):
                if file.is_file():
                    target = tmp / file.relative_to(batch_dir)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    link_or_copy(file, target)
        write_parts_meta(tmp, parts, name)
    return Path(out_dir)


def convert_robomimic(
    hdf5: str | Path,
    v21_dir: str | Path,
    *,
    name: str = "dataset",
    options: RobomimicOptions | None = None,
    work_dir: str | Path | None = None,
) -> Path:
    """The whole robomimic -> v2.1 conversion in one process (what the Snakemake jobs do).

    Batches go to ``work_dir`` (default: a ``.<v21 name>.batches`` sibling of ``v21_dir``) and
    stay there (hard links to the same files as ``v21_dir``). Returns ``v21_dir``; convert it
    to v3.0 with :func:`robopipe.conversion.serial.convert_dataset`.
    """
    v21_dir = Path(v21_dir)
    work = Path(work_dir) if work_dir else v21_dir.with_name(f".{v21_dir.name}.batches")
    plan = make_plan(hdf5, name, options or RobomimicOptions())
    dirs = [write_batch(plan, b["id"], work / b["id"]) for b in plan["batches"]]
    return assemble(plan, dirs, v21_dir)
