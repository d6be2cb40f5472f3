"""Snakemake script of rule report_dataset: one dataset's figures, tables and summary.csv."""

import sys
from pathlib import Path

from robopipe.report import build_dataset_report


def _paths(item) -> list[str]:
    """A named input as a list: a function may give one path (str) or several."""
    return [item] if isinstance(item, str) else list(item)


def main(smk) -> None:
    inputs = smk.input
    build_dataset_report(
        smk.wildcards.dataset,
        Path(smk.output.summary).parent,
        bench=_paths(inputs.get("bench", [])),
        ceilings=_paths(inputs.get("ceilings", [])),
        conversion_tsvs=_paths(inputs.get("conversion", [])),
        lerobot=_paths(inputs.get("lerobot", [])),
        copy_results=_paths(inputs.get("copies", [])),
        converted=Path(inputs.converted).parents[1] if inputs.get("converted") else None,
        # written by every job of the dataset as it ends (robopipe.jobs), not rule outputs
        job_rss=sorted(Path(smk.params.logs).rglob("*.rss.json")),
        skipped_peers=smk.params.get("skipped_peers"),
    )


if __name__ == "__main__":
    with open(snakemake.log[0], "w") as log:
        sys.stderr = log
        main(snakemake)
