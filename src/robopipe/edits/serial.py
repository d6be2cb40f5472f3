"""A whole edit in one process: plan, data and video files, meta, validate, publish. The
Snakemake workflow runs the same steps as separate jobs; this is for tests, notebooks and
small datasets."""

from __future__ import annotations

import shutil
from pathlib import Path

from robopipe.atomic import write_json
from robopipe.conversion.publish import publish
from robopipe.edits.files import write_data_file, write_video_file
from robopipe.edits.meta import write_edit_meta
from robopipe.edits.plan import EditPlan, make_edit_plan
from robopipe.edits.validate import validate_edit
from robopipe.layout import data_path, video_path


def edit_dataset(
    operation: dict,
    sources: list[str | Path],
    output_dir: str | Path,
    *,
    name: str = "edit",
    split: str | None = None,
    source_names: list[str] | None = None,
    work_dir: str | Path | None = None,
) -> EditPlan:
    """Run ``operation`` on the v3.0 datasets ``sources``, writing the v3.0 dataset
    ``output_dir``; return the plan (:func:`robopipe.edits.plan.make_edit_plan`).

    Intermediate files go to ``work_dir`` (default: a ``.<output name>.work`` sibling of
    ``output_dir``), removed on success; ``output_dir`` appears only when everything,
    validation included, succeeded. The sources are only read.

    Raises:
        DatasetError: bad input (before anything is written) or a failed proof.
    """
    plan = make_edit_plan(name, operation, sources, source_names=source_names, split=split)
    output_dir = Path(output_dir)
    work = Path(work_dir) if work_dir else output_dir.with_name(f".{output_dir.name}.work")
    staging = work / "staging"
    reports, data_reports = [], []
    for f in plan.data_files:
        rel = data_path(f.chunk, f.file)
        data_reports.append(work / "reports" / f"{rel}.json")
        reports.append(write_data_file(plan, f.chunk, f.file, staging / rel, data_reports[-1]))
    video_reports = []
    for key, files in plan.video_files.items():
        for f in files:
            rel = video_path(key, f.chunk, f.file)
            video_reports.append(work / "reports" / f"{rel}.json")
            reports.append(
                write_video_file(plan, key, f.chunk, f.file, staging / rel, video_reports[-1])
            )
    write_edit_meta(plan, video_reports, staging / "meta", data_reports)
    write_json(work / "validation.json", validate_edit(plan, staging, reports))
    publish(staging, plan, output_dir)
    shutil.rmtree(work)
    return plan
