"""Snakemake job: push the validated v3.0 dataset to the Hub or an fsspec URL; push.json."""

import json
import os
from pathlib import Path

# huggingface_hub otherwise contacts huggingface.co for its user agent, whatever HF_ENDPOINT says
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

from robopipe.atomic import write_json  # noqa: E402
from robopipe.conversion.push import PushTarget, push_dataset  # noqa: E402
from robopipe.jobs import logged  # noqa: E402

with logged(snakemake) as log:
    target = PushTarget.from_config(snakemake.params.push)
    record = push_dataset(
        Path(snakemake.input.dataset).parents[1],  # <dataset>/meta/info.json
        target,
        name=snakemake.wildcards.dataset,
        validation=json.loads(Path(snakemake.input.validation).read_text()),
    )
    write_json(snakemake.output[0], record)
    log.info(
        "pushed %s to %s%s: %d of %d files uploaded, %d deleted",
        snakemake.wildcards.dataset,
        target.name,
        f" @ {record['revision']}" if record["revision"] else "",
        record["uploaded_files"],
        record["files"],
        record["deleted_files"],
    )
