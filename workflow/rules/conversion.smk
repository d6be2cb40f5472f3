# v2.1 -> v3.0: plan, one job per shard, one per final file, meta, validate, publish.
# Every path is a template of robopipe.layout, shared with the code.


checkpoint plan:
    input:
        plan_source_input,
    output:
        plan=PLAN_FILE,
    log:
        LOG_FILE.format(dataset="{dataset}", step="plan"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="plan/plan")
    conda:
        ROBOPIPE_ENV
    params:
        source=source_of,
        options=conversion_of,
    script:
        "../scripts/plan.py"


rule shard:
    input:
        plan=PLAN_FILE,
    output:
        directory(SHARD_DIR),
    log:
        LOG_FILE.format(dataset="{dataset}", step="shard/{shard}"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="shard/{shard}")
    conda:
        ROBOPIPE_ENV
    script:
        "../scripts/shard.py"


rule aggregate_data:
    input:
        data_file_shards,
    output:
        STAGED_DATA_FILE,
    log:
        LOG_FILE.format(
            dataset="{dataset}", step="aggregate_data/chunk-{chunk}_file-{file}"
        ),
    benchmark:
        JOB_STATS_FILE.format(
            dataset="{dataset}", step="aggregate_data/chunk-{chunk}_file-{file}"
        )
    conda:
        ROBOPIPE_ENV
    script:
        "../scripts/aggregate_data.py"


rule aggregate_video:
    input:
        plan=PLAN_FILE,
    output:
        video=STAGED_VIDEO_FILE,
        episodes=VIDEO_EPISODES_FILE,
    log:
        LOG_FILE.format(
            dataset="{dataset}",
            step="aggregate_video/{video_key}_chunk-{chunk}_file-{file}",
        ),
    benchmark:
        JOB_STATS_FILE.format(
            dataset="{dataset}",
            step="aggregate_video/{video_key}_chunk-{chunk}_file-{file}",
        )
    conda:
        ROBOPIPE_ENV
    script:
        "../scripts/aggregate_video.py"


rule meta:
    input:
        plan=PLAN_FILE,
        video_episodes=all_video_episodes,
    output:
        directory(STAGED_META_DIR),
    log:
        LOG_FILE.format(dataset="{dataset}", step="meta"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="meta/meta")
    conda:
        ROBOPIPE_ENV
    script:
        "../scripts/meta.py"


# Each final file is validated by a job of its own as soon as it exists; `validate` then checks
# the staged dataset as a whole (meta rows, and robopipe's loader reads every video file).
rule validate_data:
    input:
        plan=PLAN_FILE,
        data=STAGED_DATA_FILE,
    output:
        VALIDATED_DATA_FILE,
    log:
        LOG_FILE.format(
            dataset="{dataset}", step="validate_data/chunk-{chunk}_file-{file}"
        ),
    benchmark:
        JOB_STATS_FILE.format(
            dataset="{dataset}", step="validate_data/chunk-{chunk}_file-{file}"
        )
    conda:
        ROBOPIPE_ENV
    script:
        "../scripts/validate_data.py"


rule validate_video:
    input:
        plan=PLAN_FILE,
        video=STAGED_VIDEO_FILE,
        episodes=VIDEO_EPISODES_FILE,
    output:
        VALIDATED_VIDEO_FILE,
    log:
        LOG_FILE.format(
            dataset="{dataset}",
            step="validate_video/{video_key}_chunk-{chunk}_file-{file}",
        ),
    benchmark:
        JOB_STATS_FILE.format(
            dataset="{dataset}",
            step="validate_video/{video_key}_chunk-{chunk}_file-{file}",
        )
    conda:
        ROBOPIPE_ENV
    script:
        "../scripts/validate_video.py"


rule validate:
    input:
        plan=PLAN_FILE,
        meta=STAGED_META_DIR,
        files=staged_files,
        reports=validation_reports,
    output:
        VALIDATION_FILE,
    log:
        LOG_FILE.format(dataset="{dataset}", step="validate"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="validate/validate")
    conda:
        ROBOPIPE_ENV
    script:
        "../scripts/validate.py"


# The declared output is the dataset's meta/info.json, not the folder: a directory() output
# would get Snakemake's hidden .snakemake_timestamp, and a published dataset holds only
# meta/, data/ and videos/. The script moves the whole folder into place at once.
rule publish:
    input:
        validation=VALIDATION_FILE,
        plan=PLAN_FILE,
        meta=STAGED_META_DIR,
        files=staged_files,
    output:
        PUBLISHED_INFO,
    log:
        LOG_FILE.format(dataset="{dataset}", step="publish"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="publish/publish")
    conda:
        ROBOPIPE_ENV
    script:
        "../scripts/publish.py"


rule convert:
    default_target: False
    input:
        converted_datasets(),
