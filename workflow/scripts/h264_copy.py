"""Snakemake script of rule ``h264_copy``: an H.264 copy of a v3.0 dataset, for NVDEC."""

from pathlib import Path

from robopipe.bench.h264 import make_h264_copy
from robopipe.jobs import logged

with logged(snakemake) as log:
    root = Path(snakemake.input.dataset).parents[1]  # <dataset>/meta/info.json
    copy = Path(snakemake.output.dataset).parents[1]
    make_h264_copy(root, copy, **snakemake.params.options)
    log.info("H.264 copy of %s in %s", root, copy)
