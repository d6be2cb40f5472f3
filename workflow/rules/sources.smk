# Sources that a rule makes: the generated demo dataset and Hub downloads.
from robopipe.layout import (
    DEMO_DIR,
    HUB_DIR,
    JOB_STATS_FILE,
    LOG_FILE,
)


rule demo:
    output:
        directory(DEMO_DIR),
    log:
        LOG_FILE.format(dataset="{dataset}", step="demo"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="demo/demo")
    group:
        slurm_group("demo")
    conda:
        ROBOPIPE_ENV
    params:
        demo=lambda w: DATASETS.demo_options(w.dataset),
    script:
        "../../scripts/demo.py"


rule fetch:
    output:
        directory(HUB_DIR),
    log:
        LOG_FILE.format(dataset="{dataset}", step="fetch"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="fetch/fetch")
    group:
        slurm_group("fetch")
    conda:
        ROBOPIPE_ENV
    resources:
        network=1,
    params:
        repo_id=lambda w: DATASETS.hub(w.dataset)[0],
        revision=lambda w: DATASETS.hub(w.dataset)[1],
    script:
        "../../scripts/fetch.py"
