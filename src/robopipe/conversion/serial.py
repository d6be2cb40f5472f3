"""The whole v2.1 -> v3.0 conversion in one process: plan, shards, aggregates, meta, validate,
publish. The Snakemake workflow runs the same steps as separate jobs; this function is for
tests, notebooks and small datasets.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from robopipe.checks.report import SourceCheckError
from robopipe.checks.v21 import check_source
from robopipe.conversion.aggregate import aggregate_data, aggregate_video
from robopipe.conversion.meta import write_meta
from robopipe.conversion.plan import Plan, make_plan
from robopipe.conversion.publish import publish
from robopipe.conversion.shard import build_shard
from robopipe.conversion.validate import validate as validate_dataset
from robopipe.conversion.validate import validate_data_file, validate_video_file
from robopipe.formats.v21_reader import load_source
from robopipe.layout import VIDEO_EPISODES, chunk_file, data_path, video_path
from robopipe.options import ConversionOptions


def convert_dataset(
    source_dir: str | Path,
    output_dir: str | Path,
    *,
    name: str = "dataset",
    validate: bool = True,
    work_dir: str | Path | None = None,
    **options,
) -> Plan:
    """Convert the v2.1 dataset in ``source_dir`` to v3.0 in ``output_dir``; return the plan.

    ``options`` are :class:`robopipe.options.ConversionOptions` fields (e.g.
    ``chunks_size=3``). Intermediate files go to ``work_dir`` (default: a ``.<output name>.work``
    sibling of ``output_dir``), removed on success. ``output_dir`` appears only when everything,
    validation included (unless ``validate=False``), succeeded.

    The source is checked first (:func:`robopipe.checks.v21.check_source`).

    Raises:
        SourceCheckError: the check found problems (its ``report`` has every one).
        DatasetError: bad input found later (see the plan, shard, aggregate and validate
            steps).
        TypeError: an unknown option.
    """
    opts = ConversionOptions(**options)
    output_dir = Path(output_dir)
    work = Path(work_dir) if work_dir else output_dir.with_name(f".{output_dir.name}.work")
    report = check_source(source_dir, name, opts)
    if not report.ok:
        raise SourceCheckError(report)
    source = load_source(source_dir, name, template_placeholders=opts.template_placeholders)
    plan = make_plan(source, opts)
    plan.save(work / "plan.json")
    shard_dirs = {s.id: work / "shards" / s.id for s in plan.shards}
    for shard_id, shard_dir in shard_dirs.items():
        build_shard(
            source,
            plan,
            shard_id,
            shard_dir,
            restamp_timestamps=opts.restamp_timestamps,
            tolerance_s=opts.tolerance_s,
        )
    staging = work / "staging"
    for f in plan.data_files:
        aggregate_data([shard_dirs[s] for s in f.shards], staging / data_path(f.chunk, f.file))
    video_episodes = []
    for key, files in plan.video_files.items():
        for f in files:
            video_episodes.append(
                work / VIDEO_EPISODES.format(video_key=key, **chunk_file(f.chunk, f.file))
            )
            aggregate_video(
                source,
                plan,
                key,
                f.chunk,
                f.file,
                staging / video_path(key, f.chunk, f.file),
                video_episodes[-1],
            )
    write_meta(
        source,
        plan,
        video_episodes,
        staging / "meta",
        restamp_timestamps=opts.restamp_timestamps,
        shard_dirs=list(shard_dirs.values()),
    )
    if validate:
        reports = [
            validate_data_file(source, plan, staging, f.chunk, f.file, tolerance_s=opts.tolerance_s)
            for f in plan.data_files
        ]
        for key, files in plan.video_files.items():
            reports += [
                validate_video_file(
                    source,
                    plan,
                    staging,
                    key,
                    f.chunk,
                    f.file,
                    work / VIDEO_EPISODES.format(video_key=key, **chunk_file(f.chunk, f.file)),
                    frames=opts.validate_frames,
                    tolerance_s=opts.tolerance_s,
                )
                for f in files
            ]
        validate_dataset(source, plan, staging, reports)
    publish(staging, plan, output_dir)
    shutil.rmtree(work)
    return plan
