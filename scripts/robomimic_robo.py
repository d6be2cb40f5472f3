"""Snakemake job: write the robo archive (one npz per demo in a tar) of a robomimic file."""

from robopipe.jobs import logged
from robopipe.robomimic.robo import write_robo

with logged(snakemake) as log:
    out = write_robo(snakemake.input.hdf5, snakemake.output[0])
    log.info("wrote %s (%.1f MiB)", out, out.stat().st_size / 2**20)
