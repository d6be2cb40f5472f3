# Push: publish a converted, validated dataset to a Hub dataset repo or an fsspec URL.
# Opt-in: only datasets with a `push:` section, and only for the `push` target (or a
# benchmark scenario whose remote source is the pushed copy).


rule push_dataset:
    input:
        dataset="results/{dataset}/v3.0",
        validation="results/{dataset}/validation.json",
    output:
        "results/{dataset}/push.json",
    log:
        "results/logs/{dataset}/push.log",
    benchmark:
        "results/jobs/{dataset}/push/push.tsv"
    conda:
        ROBOPIPE_ENV
    resources:
        network=1,
    params:
        push=push_options,
    script:
        "../scripts/push.py"


rule push:
    default_target: False
    input:
        pushed_datasets(),
