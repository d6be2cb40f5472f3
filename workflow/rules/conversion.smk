# v2.1 -> v3.0: plan, one job per shard, one per final file, meta, validate, publish.


checkpoint plan:
    input:
        plan_source_input,
    output:
        plan="results/{dataset}/plan.json",
    log:
        "results/logs/{dataset}/plan.log",
    benchmark:
        "results/jobs/{dataset}/plan/plan.tsv"
    conda:
        ROBOPIPE_ENV
    params:
        source=source_of,
        options=conversion_of,
    script:
        "../scripts/plan.py"


rule shard:
    input:
        plan="results/{dataset}/plan.json",
    output:
        directory("results/{dataset}/shards/{shard}"),
    log:
        "results/logs/{dataset}/shard/{shard}.log",
    benchmark:
        "results/jobs/{dataset}/shard/{shard}.tsv"
    conda:
        ROBOPIPE_ENV
    params:
        source=source_of,
        options=conversion_of,
    script:
        "../scripts/shard.py"


rule aggregate_data:
    input:
        data_file_shards,
    output:
        "results/{dataset}/staging/data/chunk-{chunk}/file-{file}.parquet",
    log:
        "results/logs/{dataset}/aggregate_data/chunk-{chunk}_file-{file}.log",
    benchmark:
        "results/jobs/{dataset}/aggregate_data/chunk-{chunk}_file-{file}.tsv"
    conda:
        ROBOPIPE_ENV
    script:
        "../scripts/aggregate_data.py"


rule aggregate_video:
    input:
        plan="results/{dataset}/plan.json",
    output:
        video="results/{dataset}/staging/videos/{video_key}/chunk-{chunk}/file-{file}.mp4",
        episodes="results/{dataset}/video_episodes/{video_key}/chunk-{chunk}/file-{file}.json",
    log:
        "results/logs/{dataset}/aggregate_video/{video_key}_chunk-{chunk}_file-{file}.log",
    benchmark:
        "results/jobs/{dataset}/aggregate_video/{video_key}_chunk-{chunk}_file-{file}.tsv"
    conda:
        ROBOPIPE_ENV
    params:
        source=source_of,
    script:
        "../scripts/aggregate_video.py"


rule meta:
    input:
        plan="results/{dataset}/plan.json",
        video_episodes=all_video_episodes,
    output:
        directory("results/{dataset}/staging/meta"),
    log:
        "results/logs/{dataset}/meta.log",
    benchmark:
        "results/jobs/{dataset}/meta/meta.tsv"
    conda:
        ROBOPIPE_ENV
    params:
        source=source_of,
        options=conversion_of,
    script:
        "../scripts/meta.py"


rule validate:
    input:
        plan="results/{dataset}/plan.json",
        meta="results/{dataset}/staging/meta",
        files=staged_files,
    output:
        "results/{dataset}/validation.json",
    log:
        "results/logs/{dataset}/validate.log",
    benchmark:
        "results/jobs/{dataset}/validate/validate.tsv"
    conda:
        ROBOPIPE_ENV
    threads: 8  # one video file per thread; capped by --cores (the SLURM profile sets 2)
    params:
        source=source_of,
        options=conversion_of,
    script:
        "../scripts/validate.py"


rule publish:
    input:
        validation="results/{dataset}/validation.json",
        plan="results/{dataset}/plan.json",
        meta="results/{dataset}/staging/meta",
        files=staged_files,
    output:
        directory("results/{dataset}/v3.0"),
    log:
        "results/logs/{dataset}/publish.log",
    benchmark:
        "results/jobs/{dataset}/publish/publish.tsv"
    conda:
        ROBOPIPE_ENV
    script:
        "../scripts/publish.py"


rule convert:
    default_target: False
    input:
        converted_datasets(),
