"""Snakemake script of rule ``bench_scenario``: measure one scenario, write JSON + CSV."""

import sys
from pathlib import Path

from robopipe.bench.measure import ZeroSamplesError
from robopipe.bench.runner import Settings, run_multi_node, run_scenario
from robopipe.bench.scenarios import parse_scenario
from robopipe.jobs import logged
from robopipe.scenario_result import write_scenario_result

with logged(snakemake) as log:
    dataset, name = snakemake.wildcards.dataset, snakemake.wildcards.scenario
    root = Path(snakemake.input.dataset).parents[1]  # <dataset>/meta/info.json
    settings = Settings.from_config(snakemake.params.settings)
    try:
        if parse_scenario(name).nodes > 1:
            result = run_multi_node(dataset, root, name, settings, snakemake.output.json)
        else:
            result = run_scenario(dataset, root, name, settings)
    except (ZeroSamplesError, ValueError, RuntimeError) as err:
        log.error("robopipe bench: %s/%s: %s", dataset, name, err)
        sys.exit(1)
    write_scenario_result(result, snakemake.output.json, snakemake.output.csv)
    log.info("%s/%s: %.1f samples/s", dataset, name, result["samples_per_s"])
