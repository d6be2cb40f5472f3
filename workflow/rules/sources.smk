# Sources that a rule makes: the generated demo dataset and the local copy of
# a remote v3.0 dataset (made only where a job needs local files: a `local` scenario, a
# training copy, a served http/s3 scenario, a push).
from robopipe.peer_env import peer_python
from robopipe.layout import (
    CHECK_FILE,
    DEMO_DIR,
    INFO_PATH,
    JOB_STATS_FILE,
    LOCAL_COPY_DIR,
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
        demo=lambda w: DATASETS[w.dataset].demo_options(),
    script:
        "../../scripts/demo.py"


rule local_copy:
    input:
        # the remote dataset passed its check first
        CHECK_FILE,
    output:
        # the folder's info.json: what the jobs that read it take as input
        f"{LOCAL_COPY_DIR}/{INFO_PATH}",
    log:
        LOG_FILE.format(dataset="{dataset}", step="local_copy"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="local_copy/local_copy")
    conda:
        ROBOPIPE_ENV
    resources:
        network=1,
    params:
        url=lambda w: DATASETS[w.dataset].remote_url(),
        storage_options=lambda w: DATASETS[w.dataset].storage_options(),
        tolerance_s=lambda w: DATASETS[w.dataset].options.tolerance_s,
        skip_episodes=lambda w: DATASETS[w.dataset].options.skip_episodes,
        episodes=lambda w: DATASETS[w.dataset].read_episodes(),
        retry=lambda w: DATASETS[w.dataset].options.retry_budget.to_config(),
        peer_python=peer_python(config.get("bench", {})),  # lerobot-lance-doctor's
    script:
        "../../scripts/local_copy.py"
