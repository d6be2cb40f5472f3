# The quality stage's peer: lerobot-doctor 0.2.0's `check` of the dataset the quality checks
# read, run in the peer environment (.venv-lerobot) beside robopipe's checks, its verdicts
# compared with quality.json's findings (robopipe.bench.quality_peer). Without the peer
# environment, or for a remote source, doctor.json records why it was skipped.
from robopipe.bench.quality_peer import DOCTOR_TIMEOUT_S, doctor_root
from robopipe.layout import JOB_STATS_FILE, LOG_FILE, QUALITY_DOCTOR_FILE, QUALITY_FILE
from robopipe.peer_env import peer_python


rule quality_peer:
    input:
        quality=QUALITY_FILE,
    output:
        QUALITY_DOCTOR_FILE,
    log:
        LOG_FILE.format(dataset="{dataset}", step="quality_peer"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="quality_peer/quality_peer")
    conda:
        ROBOPIPE_ENV
    params:
        root=lambda w: doctor_root(DATASETS[w.dataset]),
        python=peer_python(config.get("bench", {})),
        timeout_s=DOCTOR_TIMEOUT_S,
    script:
        "../../scripts/quality_peer.py"
