"""Snakemake job: merge a dataset's batch results and run the dataset-wide checks into
results/{dataset}/quality/quality.json and episodes.parquet (robopipe.quality.merge_batches)."""

from pathlib import Path

from robopipe.jobs import logged
from robopipe.quality import QualityOptions, merge_batches

with logged(snakemake) as log:
    report = merge_batches(
        [Path(p) for p in snakemake.input.batches],
        Path(snakemake.output.report).parent,
        dataset=snakemake.wildcards.dataset,
        source=snakemake.params.root,
        options=QualityOptions.from_config(snakemake.params.options),
    )
    log.info(
        "%d episodes, %d findings: wrote %s", report["episodes"], len(report["findings"]),
        snakemake.output.report,
    )  # fmt: skip
