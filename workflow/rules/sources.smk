# Sources that a rule makes: the generated demo dataset.
from robopipe.layout import (
    DEMO_DIR,
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

