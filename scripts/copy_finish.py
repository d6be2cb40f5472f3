"""Snakemake script of rule ``copy_finish``: assemble, measure and publish a training copy."""

from pathlib import Path

from robopipe.copies.encodings import parse_encoding
from robopipe.copies.finish import finish_copy
from robopipe.jobs import logged

with logged(snakemake) as log:
    encoding = snakemake.wildcards.encoding
    output = Path(snakemake.output.dataset).parents[1]  # <copy>/meta/info.json
    measured = finish_copy(
        Path(snakemake.input.dataset).parents[1],
        output.parent / "staging",
        list(snakemake.input.results),
        output,
        snakemake.output.measurements,
        parse_encoding(encoding),
    )
    log.info("%s: %s", encoding, measured)
