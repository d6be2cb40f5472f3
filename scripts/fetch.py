"""Snakemake job: download a v2.1 dataset from the Hugging Face Hub."""

import os

from robopipe.hub import fetch_dataset
from robopipe.jobs import logged

# huggingface_hub otherwise contacts huggingface.co for its user agent, whatever HF_ENDPOINT says
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

with logged(snakemake) as log:
    params = snakemake.params
    fetch_dataset(
        params.repo_id, params.revision, snakemake.output[0], name=snakemake.wildcards.dataset
    )
    log.info("fetched %s@%s", params.repo_id, params.revision)
