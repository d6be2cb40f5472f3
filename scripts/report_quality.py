"""Snakemake script of rule report_quality: one dataset's quality figures
(robopipe.report.quality)."""

import sys
from pathlib import Path

from robopipe.report.quality import quality_figures

if __name__ == "__main__":
    with open(snakemake.log[0], "w") as log:
        sys.stderr = log
        quality_figures(
            snakemake.input.report,
            snakemake.input.episodes,
            Path(snakemake.output.png[0]).parent,
            dataset=snakemake.wildcards.dataset,
            root=snakemake.params.root,
            storage_options=snakemake.params.storage_options or None,
        )
