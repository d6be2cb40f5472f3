"""Snakemake script of rule report: every dataset's summary.csv merged into one."""

import sys

from robopipe.report import merge_summaries

if __name__ == "__main__":
    with open(snakemake.log[0], "w") as log:
        sys.stderr = log
        merge_summaries(list(snakemake.input.summaries), snakemake.output[0])
