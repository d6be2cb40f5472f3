# Push: publish a converted, validated dataset to a Hub dataset repo or an fsspec URL.
# Opt-in: only datasets with a `push:` section, and only for the `push` target (or a
# benchmark scenario whose remote source is the pushed copy).


rule push_dataset:
    input:
        dataset=PUBLISHED_INFO,
        validation=VALIDATION_FILE,
    output:
        PUSH_FILE,
    log:
        LOG_FILE.format(dataset="{dataset}", step="push"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="push/push")
    conda:
        ROBOPIPE_ENV
    resources:
        network=1,
    params:
        push=push_options,
    script:
        "../../scripts/push.py"


rule push:
    default_target: False
    input:
        pushed_datasets(),
