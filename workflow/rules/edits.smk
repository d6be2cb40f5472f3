# Edits of v3.0 datasets (robopipe.edits; config `edits:`): a plan from the inputs' meta/,
# one job per output data file and per output video file (stream copy; a kept file is
# linked), then meta, validation and publish into results/<name>/v3.0, as the conversion.
# The edits' outputs are named by EDITS (common.smk), checked at parse time; only these rules
# make them (EDIT_NAMES), and `publish` every other dataset's.
from robopipe.edits.plan import load_edit_plan
from robopipe.layout import (
    EDIT_DATA_REPORT,
    EDIT_PLAN_FILE,
    EDIT_STAGED_DATA_FILE,
    EDIT_STAGED_META_DIR,
    EDIT_STAGED_VIDEO_FILE,
    EDIT_VALIDATION_FILE,
    EDIT_VIDEO_REPORT,
    JOB_STATS_FILE,
    LOG_FILE,
    PUBLISHED_INFO,
)


def edit_plan_of(wildcards):
    """The edit's plan, once its plan checkpoint has run."""
    return load_edit_plan(
        checkpoints.edit_plan.get(dataset=wildcards.dataset).output[0]
    )


def edit_outputs(wildcards):
    """Every staged output file and its job's report: {"files", "data_reports",
    "video_reports"}."""
    plan = edit_plan_of(wildcards)
    name = wildcards.dataset
    out = {"files": [], "data_reports": [], "video_reports": []}
    for f in plan.data_files:
        ids = {"dataset": name, "chunk": f"{f.chunk:03d}", "file": f"{f.file:03d}"}
        out["files"].append(EDIT_STAGED_DATA_FILE.format(**ids))
        out["data_reports"].append(EDIT_DATA_REPORT.format(**ids))
    for key, video_files in plan.video_files.items():
        for f in video_files:
            ids = {
                "dataset": name,
                "video_key": key,
                "chunk": f"{f.chunk:03d}",
                "file": f"{f.file:03d}",
            }
            out["files"].append(EDIT_STAGED_VIDEO_FILE.format(**ids))
            out["video_reports"].append(EDIT_VIDEO_REPORT.format(**ids))
    return out


def edit_files(wildcards):
    """input: every staged output file and its report."""
    out = edit_outputs(wildcards)
    return {
        "files": out["files"],
        "reports": out["data_reports"] + out["video_reports"],
    }


def edit_meta_reports(wildcards):
    """input of edit_meta: the video jobs' reports (where each episode landed in each
    output video file) and, for recompute_stats, the data jobs' (each episode's stats).
    """
    out = edit_outputs(wildcards)
    recomputed = edit_plan_of(wildcards).recomputed
    return {
        "video_reports": out["video_reports"],
        "data_reports": out["data_reports"] if recomputed else [],
    }


checkpoint edit_plan:
    input:
        unpack(lambda w: EDITS.plan_inputs(w.dataset)),
    output:
        EDIT_PLAN_FILE,
    log:
        LOG_FILE.format(dataset="{dataset}", step="edit_plan"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="edit_plan/edit_plan")
    wildcard_constraints:
        dataset=EDIT_NAMES,
    conda:
        ROBOPIPE_ENV
    params:
        operation=lambda w: EDITS.operation(w.dataset),
        sources=lambda w: EDITS.roots(w.dataset),
        source_names=lambda w: EDITS.source_names(w.dataset),
        split=lambda w: EDITS.outputs[w.dataset].split,
    script:
        "../../scripts/edit_plan.py"


rule edit_data:
    input:
        plan=EDIT_PLAN_FILE,
    output:
        data=EDIT_STAGED_DATA_FILE,
        report=EDIT_DATA_REPORT,
    log:
        LOG_FILE.format(dataset="{dataset}", step="edit_data/chunk-{chunk}_file-{file}"),
    benchmark:
        JOB_STATS_FILE.format(
            dataset="{dataset}", step="edit_data/chunk-{chunk}_file-{file}"
        )
    wildcard_constraints:
        dataset=EDIT_NAMES,
    conda:
        ROBOPIPE_ENV
    script:
        "../../scripts/edit_data.py"


rule edit_video:
    input:
        plan=EDIT_PLAN_FILE,
    output:
        video=EDIT_STAGED_VIDEO_FILE,
        report=EDIT_VIDEO_REPORT,
    log:
        LOG_FILE.format(
            dataset="{dataset}",
            step="edit_video/{video_key}_chunk-{chunk}_file-{file}",
        ),
    benchmark:
        JOB_STATS_FILE.format(
            dataset="{dataset}",
            step="edit_video/{video_key}_chunk-{chunk}_file-{file}",
        )
    wildcard_constraints:
        dataset=EDIT_NAMES,
    conda:
        ROBOPIPE_ENV
    script:
        "../../scripts/edit_video.py"


rule edit_meta:
    input:
        unpack(edit_meta_reports),
        plan=EDIT_PLAN_FILE,
    output:
        directory(EDIT_STAGED_META_DIR),
    log:
        LOG_FILE.format(dataset="{dataset}", step="edit_meta"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="edit_meta/edit_meta")
    wildcard_constraints:
        dataset=EDIT_NAMES,
    conda:
        ROBOPIPE_ENV
    script:
        "../../scripts/edit_meta.py"


rule edit_validate:
    input:
        unpack(edit_files),
        plan=EDIT_PLAN_FILE,
        meta=EDIT_STAGED_META_DIR,
    output:
        EDIT_VALIDATION_FILE,
    log:
        LOG_FILE.format(dataset="{dataset}", step="edit_validate"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="edit_validate/edit_validate")
    wildcard_constraints:
        dataset=EDIT_NAMES,
    conda:
        ROBOPIPE_ENV
    script:
        "../../scripts/edit_validate.py"


rule edit_publish:
    input:
        unpack(edit_files),
        validation=EDIT_VALIDATION_FILE,
        plan=EDIT_PLAN_FILE,
        meta=EDIT_STAGED_META_DIR,
    output:
        PUBLISHED_INFO,
    log:
        LOG_FILE.format(dataset="{dataset}", step="edit_publish"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="edit_publish/edit_publish")
    wildcard_constraints:
        dataset=EDIT_NAMES,
    # a rename: where Snakemake runs, not a SLURM job start of its own (it follows the plan
    # checkpoint, so it cannot join validate's group job as the conversion's publish does)
    localrule: True
    conda:
        ROBOPIPE_ENV
    script:
        "../../scripts/edit_publish.py"


rule edit:
    default_target: False
    input:
        [PUBLISHED_INFO.format(dataset=name) for name in EDITS.names()],
