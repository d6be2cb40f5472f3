"""Snakemake script of rule ``copy_file``: one output file of a training copy, measured."""

from pathlib import Path

from robopipe.atomic import write_json
from robopipe.copies.encodings import parse_encoding
from robopipe.copies.make import copy_file
from robopipe.jobs import logged

with logged(snakemake) as log:
    w = snakemake.wildcards
    result = copy_file(
        Path(snakemake.input.dataset).parents[1],  # <dataset>/meta/info.json
        w.part,
        Path(snakemake.output.part),
        parse_encoding(w.encoding),
        **snakemake.params.options,
    )
    write_json(snakemake.output.json, result, indent=None)
    log.info(
        "%s %s: %d frames, %.1f s, %d bytes",
        w.encoding,
        w.part,
        result["frames"],
        result["encode_s"],
        result["bytes"],
    )
