# Wiring only: config loading and checking, the configured datasets, and the input functions
# every rule file shares. What the rules decide is in robopipe.workflow (unit-tested); each
# rule file holds the input functions of its own rules.
import gc
import os
import re
import sys
import threading

import yaml
from snakemake.utils import validate

from robopipe.config_check import config_problems
from robopipe.layout import (
    BENCH_RESULT,
    COPY_FILE,
    LEROBOT_CONVERT_FILE,
    PARSE_TIME_PLAN_FILE,
    PLAN_FILE,
)
from robopipe.workflow import bench as bench_jobs
from robopipe.workflow import groups, targets
from robopipe.edits.plan import load_edit_plan
from robopipe.workflow.edits import Edits, edited_entries
from robopipe.workflow.sources import Datasets


def stop(lines):
    """Print each line (``robopipe: ...``) and end the run with status 1, before any job and
    without a traceback (bad config, or a local source that cannot be planned)."""
    for line in lines:
        print(line, file=sys.stderr)
    sys.exit(1)


CONFIG_SCHEMA = os.path.join(
    workflow.basedir, "workflow", "schemas", "config.schema.yaml"
)


def check_config():
    """Stop on unknown keys (named with the nearest valid key), then on anything else the
    schema rejects, one `robopipe: config: ...` line each; then fill the schema's defaults.
    """
    with open(CONFIG_SCHEMA, encoding="utf-8") as schema_file:
        messages = config_problems(config, yaml.safe_load(schema_file))
    if messages:
        stop(f"robopipe: {message}" for message in messages)
    validate(config, schema=CONFIG_SCHEMA)


check_config()
if not config.get("datasets"):
    config["datasets"] = config.get("default_datasets", {})
# Each dataset's source (robopipe.sources), built once; a remote source whose version cannot
# be read, or a local one that cannot be planned, stops the run with one line per problem.
# The edits' outputs are datasets too (quality, benchmark, report, push), after the
# configured ones; their files are listed from the edit's plan.
DATASETS = Datasets(
    config,
    checkpoint_plan=lambda name: checkpoints.plan.get(dataset=name).output.plan,
    refuse=stop,
    in_job=workflow.remote_exec,
    saved_plans=PARSE_TIME_PLAN_FILE,
    edited=edited_entries(config),
    edited_files=lambda name: targets.plan_files(
        load_edit_plan(checkpoints.edit_plan.get(dataset=name).output[0])
    ),
)
if DATASETS.problems:
    stop(DATASETS.problems)
# The edits (robopipe.workflow.edits): each output a dataset of its own, made by the rules of
# edits.smk only (EDIT_NAMES), every other one by the conversion's (NOT_EDIT_NAMES).
EDITS = Edits(
    config,
    dataset_info=lambda name: DATASETS[name].dataset_info(),
    dataset_ready=lambda name: DATASETS[name].ready(),
    dataset_plan=lambda name: (
        PLAN_FILE.format(dataset=name) if DATASETS[name].converted else None
    ),
)
if EDITS.problems:
    stop(EDITS.problems)
EDIT_NAMES = "|".join(re.escape(n) for n in EDITS.names()) or "(?!)"
# (the name is followed by the rest of the path: no `$` in the lookahead, only no more name)
NOT_EDIT_NAMES = f"(?!(?:{EDIT_NAMES})(?![A-Za-z0-9_.-]))[A-Za-z0-9][A-Za-z0-9_.-]*"

# Every script rule's conda environment (`--sdm conda`), relative to workflow/rules/.
ROBOPIPE_ENV = "../../envs/robopipe.yaml"


def exit_promptly():
    """Let snakemake exit as soon as its last job ends (about 1.4 s sooner).

    Snakemake's job rate limiter (``--max-jobs-per-timespan``, default 100/1s) re-arms a
    non-daemon ``threading.Timer`` of one timespan after each scheduling round, and the
    interpreter waits for it at exit: cancel it. The interpreter's last garbage collection
    then walks every object of the DAG (0.4 s at 500 episodes): ``gc.freeze()`` leaves them to
    the operating system. Called from ``onsuccess`` and ``onerror``, when nothing is left to run.
    """
    for thread in threading.enumerate():
        if isinstance(thread, threading.Timer):
            thread.cancel()
    gc.freeze()


wildcard_constraints:
    dataset="[A-Za-z0-9][A-Za-z0-9_.-]*",
    shard=r"shard-\d+",
    chunk=r"\d{3}",
    file=r"\d{3}",
    video_key="[^/]+",
    batch=r"batch-\d+",


def dataset_names():
    """Every dataset: the configured ones in config order, then the edits' outputs."""
    return DATASETS.names()


def config_path(name):
    """Where a dataset's entry is in the config: `datasets.<name>`, or `edits.<edit>` for
    an edit's output."""
    if name in EDITS.outputs:
        return f"edits.{EDITS.outputs[name].edit}"
    return f"datasets.{name}"


def plan_of(name):
    """The conversion Plan of a dataset (Datasets.plan): made while the DAG is built for a
    local source, so that `snakemake -n` lists every shard and aggregate job; read back from
    the `plan` checkpoint for a source a rule makes or a job lists."""
    return DATASETS.plan(name)


def slurm_group(rule_name):
    """group: of a conversion or source rule (robopipe.workflow.groups.slurm_group)."""
    return lambda w: groups.slurm_group(
        rule_name,
        w.dataset,
        DATASETS[w.dataset].plan_stage,
        DATASETS.known_episodes(w.dataset),
        config.get("slurm", {}).get("one_job_episodes", groups.ONE_JOB_EPISODES),
    )


def converted_datasets():
    """Every configured dataset (not the edits' outputs: rule edit makes those) as a loader
    may read it: published (a v2.1 source), or checked (a v3.0 source)."""
    return [path for name in DATASETS.configured() for path in DATASETS[name].ready()]


def dataset_input(wildcards):
    """input: the dataset's v3.0 info.json (Source.dataset_info)."""
    return DATASETS[wildcards.dataset].dataset_info()


def ready_input(wildcards):
    """input: what must exist before the dataset is read (Source.ready)."""
    return DATASETS[wildcards.dataset].ready()


def report_inputs(wildcards):
    """Inputs of rule report_dataset (report.smk) for one dataset: every stage's results.
    tests/report/Snakefile stands in for it with fixture files."""
    name = wildcards.dataset
    scenarios = bench_scenarios(name)
    lerobot = LEROBOT_CONVERT_FILE.format(dataset=name)
    return {
        "bench": [BENCH_RESULT.format(dataset=name, scenario=s) for s in scenarios],
        "ceilings": bench_jobs.ceilings(name, scenarios) if scenarios else [],
        "copies": [
            COPY_FILE.format(dataset=name, encoding=e)
            for e in bench_jobs.encodings(scenarios)
        ],
        # a remote v3.0 dataset's mp4 sizes come from its local copy, made only for copies
        "converted": DATASETS.sizes_info(name, bool(bench_jobs.encodings(scenarios))),
        "conversion": DATASETS.conversion_benchmarks(name),
        "lerobot": [lerobot] if os.path.exists(lerobot) else [],
    }
