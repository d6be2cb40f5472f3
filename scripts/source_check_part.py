"""Snakemake job: check the files of one range of a v2.1 source's episodes
(results/{dataset}/check_parts/part-{part}.json): the part of the source check that rule
source_check merges, with the metadata's checks, into the one report (check.json)."""

from robopipe.checks.parts import write_part
from robopipe.checks.v21 import check_part
from robopipe.jobs import logged
from robopipe.options import ConversionOptions

with logged(snakemake, pandas=False) as log:
    first, stop = snakemake.params.episodes
    part = check_part(
        snakemake.params.source,
        snakemake.wildcards.dataset,
        ConversionOptions.from_config(snakemake.params.options),
        first=first,
        stop=stop,
        threads=snakemake.threads,
    )
    write_part(part, snakemake.output[0])
    log.info(
        "episodes %s-%s: %d files, %d problem(s)",
        first,
        "" if stop is None else stop - 1,
        len(part.files),
        len(part.problems),
    )
