"""Snakemake script of rule ``local_copy``: fetch a remote v3.0 dataset into
results/{dataset}/local_copy, check it, move it into place (robopipe.local_copy); every remote
read retried within the dataset's retry budget."""

from pathlib import Path

from robopipe.jobs import logged
from robopipe.local_copy import make_local_copy
from robopipe.retry import RetryBudget

with logged(snakemake) as log:
    report = make_local_copy(
        snakemake.params.url,
        snakemake.wildcards.dataset,
        Path(snakemake.output[0]).parents[1],  # <copy>/meta/info.json
        storage_options=snakemake.params.storage_options,
        tolerance_s=snakemake.params.tolerance_s,
        skip_episodes=snakemake.params.skip_episodes,
        episodes=snakemake.params.episodes,
        doctor_python=snakemake.params.peer_python,
        retry_budget=RetryBudget.from_config(snakemake.params.retry),
    )
    log.info("%s: %d files copied and checked", snakemake.params.url, len(report.files))
    doctor = report.doctor or {}
    log.info("lerobot-lance-doctor: %s", doctor.get("skipped") or doctor.get("passed"))
