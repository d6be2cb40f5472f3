# Push: publish a converted, validated dataset to a Hub dataset repo or an fsspec URL.
# Opt-in: only datasets with a `push:` section, and only for the `push` target (or a
# benchmark scenario whose remote source is the pushed copy).
from robopipe.layout import (
    JOB_STATS_FILE,
    LOG_FILE,
    PUSH_FILE,
)


rule push_dataset:
    input:
        dataset=dataset_input,
        ready=ready_input,
        validation=lambda w: DATASETS[w.dataset].validation(),
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
        push=lambda w: DATASETS[w.dataset].push_options(),
    script:
        "../../scripts/push_dataset.py"


rule push:
    default_target: False
    input:
        [
            PUSH_FILE.format(dataset=name)
            for name in dataset_names()
            if "push" in config["datasets"][name]
        ],
