import functools
import gc
import hashlib
import json
import os
import sys
import threading

import yaml
from snakemake.utils import validate

from robopipe.bench.scenarios import WILDCARD_CONSTRAINTS, expand_matrix, parse_scenario
from robopipe.copies.encodings import ENCODING_PATTERN, parse_encoding
from robopipe.demo import demo_cameras
from robopipe.config_check import config_problems
from robopipe.conversion.check import check_source
from robopipe.conversion.options import ConversionOptions
from robopipe.conversion.plan import load_plan, make_plan
from robopipe.errors import DatasetError
from robopipe.layout import (
    CHECK_FILE,
    COPY_FILE,
    COPY_INFO,
    COPY_PART,
    COPY_PART_RESULT,
    JOB_STATS_FILE,
    LOG_FILE,
    PLAN_FILE,
    PUBLISHED_INFO,
    PUSH_FILE,
    ROBO_FILE,
    SHARD_DIR,
    STAGED_DATA_FILE,
    STAGED_META_DIR,
    STAGED_VIDEO_FILE,
    VALIDATED_DATA_FILE,
    VALIDATED_VIDEO_FILE,
    VALIDATION_FILE,
    V21_EPISODES_PATH,
    V21_EPISODES_STATS_PATH,
    V21_INFO_PATH,
    V21_TASKS_PATH,
    VIDEO_EPISODES_FILE,
    chunk_file,
    data_path,
    video_path,
)
from robopipe.formats.v21_reader import load_source


def stop(lines):
    """Print each line (``robopipe: ...``) and end the run with status 1, before any job and
    without a traceback (bad config, or a local source that cannot be planned)."""
    for line in lines:
        print(line, file=sys.stderr)
    sys.exit(1)


CONFIG_SCHEMA = os.path.join(workflow.basedir, "workflow", "schemas", "config.schema.yaml")


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

# Every script rule's conda environment (`--sdm conda`), relative to workflow/rules/.
ROBOPIPE_ENV = "../../envs/robopipe.yaml"

SOURCE_KINDS = ("path", "repo_id", "demo", "robomimic")


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
    """Every configured dataset, in config order."""
    return list(config["datasets"])


def source_kind(name):
    """Which kind of source a dataset has: path, repo_id, demo or robomimic."""
    return next(k for k in SOURCE_KINDS if k in config["datasets"][name])


def source_dir(name):
    """The v2.1 folder a dataset is converted from (made by a rule unless local)."""
    entry = config["datasets"][name]
    kind = source_kind(name)
    if kind == "path":
        return entry["path"]
    return {
        "repo_id": f"results/{name}/hub",
        "demo": f"results/{name}/demo",
        "robomimic": f"results/{name}/robomimic_v21",
    }[kind]


def conversion_options(name):
    """The dataset's ConversionOptions: defaults < config `conversion` < the dataset's own."""
    return ConversionOptions.from_config(
        config.get("conversion"), config["datasets"][name].get("conversion")
    )


@functools.cache
def _local_plan(name):
    """The parse-time plan of a local source. A source that cannot be planned stops the
    run, naming every problem the check finds (one line each), not with a traceback."""
    options = conversion_options(name)
    try:
        # the plan job reads episodes_stats.jsonl (check_stats); the DAG needs no stats
        return make_plan(local_source(name), options, check_stats=False)
    except DatasetError as exc:
        checked = check_source(source_dir(name), name, options)
        stop(
            [checked.summary()]
            if checked.problems
            else [
                f"robopipe: {exc}",
                "robopipe: run `snakemake check` for every problem",
            ]
        )


@functools.cache
def local_source(name):
    """The V21Source of a local source (metadata only), loaded once per run."""
    options = conversion_options(name)
    return load_source(
        source_dir(name), name, template_placeholders=options.template_placeholders
    )


@functools.cache
def source_signatures(name):
    """Every file of a local source: ``{relative path: [size, mtime_ns]}`` (scanned once per
    run), so that a changed, added or removed file reruns the jobs that read it."""
    root = source_dir(name)
    files = {}
    for folder, dirs, names in os.walk(root):
        for file_name in names:
            path = os.path.join(folder, file_name)
            stat = os.stat(path)
            files[os.path.relpath(path, root)] = [stat.st_size, stat.st_mtime_ns]
    return files


def plan_of(name):
    """The conversion Plan of a dataset.

    A local source is planned while the DAG is built (metadata and file sizes only), so
    `snakemake -n` lists every shard and aggregate job; other sources are made by a rule
    first, and their plan is read back from the `plan` checkpoint.
    """
    if source_kind(name) == "path":
        return _local_plan(name)
    return load_plan(checkpoints.plan.get(dataset=name).output.plan)


# SLURM job groups (local runs ignore groups): a job's fixed cost on a cluster (scheduling,
# and Snakemake starting inside the job) is paid once per group job. A small dataset's jobs
# form one group job per stage; a stage ends at a checkpoint whose result the next stage's jobs
# need (robomimic_plan: the batches; plan, for a source made by a rule: the shards).
SMALL_DATASET_STAGES = {
    "demo": "source",
    "fetch": "source",
    "robomimic_generate": "source",
    "robomimic_plan": "source",
    "robomimic_batch": "robomimic",
    "robomimic_v21": "robomimic",
    "robomimic_robo": "robomimic",
}
# A large one spreads over the cluster: shards, and final files (each checked by its own job),
# in group jobs of the profile's `group-components`; then meta, validate and publish as jobs
# of their own (in one "finish" group, a source fetched or generated by a rule broke
# Snakemake 9's dry run after the plan checkpoint: KeyError in DAG.update_ready).
LARGE_DATASET_GROUPS = {
    "shard": "shards",
    "aggregate_data": "aggregates",
    "aggregate_video": "aggregates",
}


def source_episodes(name):
    """The dataset's episode count where the config or the parse-time plan tells it, else None."""
    entry = config["datasets"][name]
    kind = source_kind(name)
    if kind == "path":
        return len(_local_plan(name).episodes)
    if kind == "demo":
        return entry["demo"].get("episodes")
    if kind == "robomimic":
        return entry["robomimic"].get("generate", {}).get("demos")
    return None


def slurm_group(rule_name):
    """group: of a conversion or source rule.

    A dataset of at most `slurm.one_job_episodes` episodes (config) runs as one group job per
    stage, `<stage>_<dataset>`: `convert` (plan when the source is a local folder, shards,
    final files, meta, validate, publish), and before it `source` (generating or fetching the
    source, and its plan) and `robomimic` (a robomimic file's batches). A larger one, or one
    whose size is unknown before it is fetched, goes in groups `shards` and `aggregates`; its
    plan, source, meta, validate and publish rules run as jobs of their own.
    """

    def group(wildcards):
        name = wildcards.dataset
        episodes = source_episodes(name)
        if episodes is None or episodes > config["slurm"]["one_job_episodes"]:
            return LARGE_DATASET_GROUPS.get(rule_name)
        if rule_name == "plan":
            stage = {"path": "convert", "robomimic": "robomimic"}.get(
                source_kind(name), "source"
            )
        else:
            stage = SMALL_DATASET_STAGES.get(rule_name, "convert")
        return f"{stage}_{name}"

    return group


def plan_source_input(wildcards):
    """input of plan: a local source's meta files but the stats (a change replans), else
    the folder a rule makes."""
    return [
        path
        for path in source_meta_files(wildcards)
        if not path.endswith(V21_EPISODES_STATS_PATH)
    ] or [source_dir(wildcards.dataset)]


def check_source_input(wildcards):
    """input of source_check: a local source's info.json (its other files are in the
    params), or the folder a rule makes."""
    if source_kind(wildcards.dataset) == "path":
        return [f"{source_dir(wildcards.dataset)}/{V21_INFO_PATH}"]
    return [source_dir(wildcards.dataset)]


def source_meta_files(wildcards):
    """The meta files of a local source that exist (none for other sources)."""
    name = wildcards.dataset
    if source_kind(name) != "path":
        return []
    return [
        f"{source_dir(name)}/{rel}"
        for rel in (
            V21_INFO_PATH,
            V21_EPISODES_PATH,
            V21_TASKS_PATH,
            V21_EPISODES_STATS_PATH,
        )
        if rel in source_signatures(name)
    ]


def all_source_signatures(wildcards):
    """params of source_check: a digest of every file's path, size and mtime in a local
    source (a digest, not the list: Snakemake keeps params in its metadata)."""
    if source_kind(wildcards.dataset) != "path":
        return ""
    files = json.dumps(source_signatures(wildcards.dataset), sort_keys=True)
    return hashlib.sha256(files.encode()).hexdigest()


def parse_time_layout(wildcards):
    """params of plan: a digest of what the parse-time plan of a local source decided
    (episodes, files, shards), so that a source change that moves an episode replans."""
    if source_kind(wildcards.dataset) != "path":
        return ""
    plan = plan_of(wildcards.dataset).to_json()
    layout = json.dumps([plan["episodes"], plan["shards"]], sort_keys=True)
    return hashlib.sha256(layout.encode()).hexdigest()


def _signatures(name, paths):
    root = source_dir(name)
    signatures = source_signatures(name)
    relative = (os.path.relpath(p, root) for p in paths)
    return {rel: signatures.get(rel) for rel in relative}


def shard_source_files(wildcards):
    """The parquets of the shard's episodes (a local source)."""
    name = wildcards.dataset
    if source_kind(name) != "path":
        return []
    source = local_source(name)
    episodes = plan_of(name).shard_episodes(wildcards.shard)
    return [str(source.data_file(e.source_episode_index)) for e in episodes]


def shard_signatures(wildcards):
    """params of shard: size and mtime of each of its parquets."""
    return _signatures(wildcards.dataset, shard_source_files(wildcards))


def video_source_files(wildcards):
    """The mp4s of the episodes of an aggregate_video job's file (a local source)."""
    if source_kind(wildcards.dataset) != "path":
        return []
    by_file = _source_videos_by_file(wildcards.dataset, wildcards.video_key)
    return by_file[(int(wildcards.chunk), int(wildcards.file))]


@functools.cache
def _source_videos_by_file(name, key):
    """Camera `key`'s source mp4s by the (chunk, file) of the output file they go to."""
    source = local_source(name)
    by_file = {}
    for e in plan_of(name).episodes:
        path = str(source.video_file(e.source_episode_index, key))
        by_file.setdefault(e.videos[key], []).append(path)
    return by_file


def video_signatures(wildcards):
    """params of aggregate_video: size and mtime of each of its mp4s."""
    return _signatures(wildcards.dataset, video_source_files(wildcards))


def stats_shards(wildcards):
    """input of meta: the shard folders, where the compute_missing_stats repair is on."""
    if not conversion_options(wildcards.dataset).compute_missing_stats:
        return []
    return [
        SHARD_DIR.format(dataset=wildcards.dataset, shard=s.id)
        for s in plan_of(wildcards.dataset).shards
    ]


def checked_datasets():
    """The check reports of every configured dataset."""
    return expand(CHECK_FILE, dataset=dataset_names())


def all_video_episodes(wildcards):
    """Where each episode landed in each video file: the aggregate_video jobs' JSON."""
    return [
        VIDEO_EPISODES_FILE.format(
            dataset=wildcards.dataset, video_key=key, **chunk_file(f.chunk, f.file)
        )
        for key, files in plan_of(wildcards.dataset).video_files.items()
        for f in files
    ]


def data_file_shards(wildcards):
    """The shard folders a data file is made of, in order."""
    planned = plan_of(wildcards.dataset).data_file(
        int(wildcards.chunk), int(wildcards.file)
    )
    return [
        SHARD_DIR.format(dataset=wildcards.dataset, shard=s) for s in planned.shards
    ]


def staged_files(wildcards):
    """Every data and video file of the dataset, in its staging folder."""
    plan = plan_of(wildcards.dataset)
    files = [
        STAGED_DATA_FILE.format(
            dataset=wildcards.dataset, **chunk_file(f.chunk, f.file)
        )
        for f in plan.data_files
    ]
    for key, key_files in plan.video_files.items():
        files += [
            STAGED_VIDEO_FILE.format(
                dataset=wildcards.dataset, video_key=key, **chunk_file(f.chunk, f.file)
            )
            for f in key_files
        ]
    return files


def validation_reports(wildcards):
    """Every final file's validation report (rules aggregate_data and aggregate_video)."""
    plan = plan_of(wildcards.dataset)
    reports = [
        VALIDATED_DATA_FILE.format(
            dataset=wildcards.dataset, **chunk_file(f.chunk, f.file)
        )
        for f in plan.data_files
    ]
    for key, files in plan.video_files.items():
        reports += [
            VALIDATED_VIDEO_FILE.format(
                dataset=wildcards.dataset, video_key=key, **chunk_file(f.chunk, f.file)
            )
            for f in files
        ]
    return reports


def converted_datasets():
    """The published v3.0 datasets of every configured dataset (their info.json)."""
    return expand(PUBLISHED_INFO, dataset=dataset_names())


def pushed_datasets():
    """The push records of every dataset with a `push:` section (target `push`)."""
    return [
        PUSH_FILE.format(dataset=name)
        for name in dataset_names()
        if "push" in config["datasets"][name]
    ]


def push_options(wildcards):
    """params: the dataset's `push:` section (robopipe.conversion.push.PushTarget)."""
    entry = config["datasets"][wildcards.dataset]
    if "push" not in entry:
        raise ValueError(f"dataset {wildcards.dataset!r} has no push: section")
    return entry["push"]


def source_of(wildcards):
    """params: the dataset's v2.1 source folder."""
    return source_dir(wildcards.dataset)


def conversion_of(wildcards):
    """params: the dataset's conversion settings (config keys)."""
    return conversion_options(wildcards.dataset).to_dict()


def demo_options(wildcards):
    """params: the demo generator's settings (robopipe.demo.generate_demo keywords)."""
    options = dict(config["datasets"][wildcards.dataset]["demo"])
    options["cameras"] = demo_cameras(options.get("cameras", 2))
    return options


def hub_repo_id(wildcards):
    return config["datasets"][wildcards.dataset]["repo_id"]


def hub_revision(wildcards):
    return config["datasets"][wildcards.dataset].get("revision", "v2.1")


def conversion_benchmarks(name):
    """The benchmark: TSV of every job that converts dataset `name` (inputs of its report).

    The demo rule's time is left out: generating the demo is not part of a conversion.
    """
    plan = plan_of(name)
    steps = [
        "check/check",
        "plan/plan",
        "meta/meta",
        "validate/validate",
        "publish/publish",
    ]
    if source_kind(name) == "repo_id":
        steps.append("fetch/fetch")
    steps += [f"shard/{s.id}" for s in plan.shards]
    steps += [
        f"aggregate_data/chunk-{f.chunk:03d}_file-{f.file:03d}" for f in plan.data_files
    ]
    for key, files in plan.video_files.items():
        for f in files:
            steps.append(f"aggregate_video/{key}_chunk-{f.chunk:03d}_file-{f.file:03d}")
    return [JOB_STATS_FILE.format(dataset=name, step=step) for step in steps]


def report_inputs(wildcards):
    """Inputs of rule report_dataset (workflow/rules/report.smk) for one dataset."""
    name = wildcards.dataset
    lerobot = f"results/bench/{name}/lerobot_convert.json"
    return {
        "bench": [f"results/bench/{name}/{s}.json" for s in bench_scenarios(name)],
        "ceilings": bench_ceilings(name) if bench_scenarios(name) else [],
        "copies": [
            COPY_FILE.format(dataset=name, encoding=e) for e in bench_encodings(name)
        ],
        "converted": PUBLISHED_INFO.format(dataset=name),
        "conversion": conversion_benchmarks(name),
        "lerobot": [lerobot] if os.path.exists(lerobot) else [],
    }


BENCH_NOT_SETTINGS = ("matrix", "ceiling_frames")
# a copy's files, relative to its root: what one copy_file job writes
COPY_PART_PATTERN = (
    r"(?:videos/[^/]+/chunk-\d{3}/file-\d{3}\.mp4|data/chunk-\d{3}/file-\d{3}\.parquet)"
)
# NVDEC cannot decode AV1: a cuda scenario without an encoding reads this copy
CUDA_ENCODING = "h264g2"


def bench_scenarios(dataset):
    """The scenario names of the configured matrix that apply to `dataset`: lerobot_* loaders
    only when config["bench"]["lerobot_python"] names an interpreter, robomimic_hdf5_* and
    *_seq_* loaders only for a robomimic source."""
    names = expand_matrix(config["bench"]["matrix"])
    if not config["bench"].get("lerobot_python"):
        names = [n for n in names if not n.startswith("lerobot_")]
    if source_kind(dataset) != "robomimic":
        names = [
            n for n in names if not n.startswith("robomimic_hdf5_") and "_seq_" not in n
        ]
    return names


def scenario_encoding(name):
    """The copy a scenario reads: its encoding, CUDA_ENCODING for a cuda scenario without
    one, or None (the converted dataset)."""
    scenario = parse_scenario(name)
    if scenario.encoding is None and scenario.decode == "cuda":
        return CUDA_ENCODING
    return scenario.encoding


def bench_encodings(dataset):
    """The copies the dataset's scenarios read, sorted."""
    encodings = {scenario_encoding(n) for n in bench_scenarios(dataset)}
    return sorted(e for e in encodings if e)


def bench_ceilings(dataset):
    """The decode-ceiling JSONs of the dataset and of each copy its scenarios read."""
    return [f"results/bench/{dataset}/ceiling.json"] + [
        f"results/bench/{dataset}/ceiling_e{e}.json" for e in bench_encodings(dataset)
    ]


def bench_results(dataset):
    """A dataset's benchmark outputs: every scenario's JSON and the ceiling JSONs."""
    return [
        f"results/bench/{dataset}/{name}.json" for name in bench_scenarios(dataset)
    ] + bench_ceilings(dataset)


def all_bench_results():
    """Every benchmark output of every configured dataset."""
    return [path for name in dataset_names() for path in bench_results(name)]


def bench_dataset_input(wildcards):
    """The dataset a scenario reads (its info.json): its copy (scenario_encoding), else the
    v3.0 output."""
    encoding = scenario_encoding(wildcards.scenario)
    if encoding:
        return COPY_INFO.format(dataset=wildcards.dataset, encoding=encoding)
    return PUBLISHED_INFO.format(dataset=wildcards.dataset)


def bench_robo_input(wildcards):
    """The robo archive a robopipe_seq_tar scenario reads (rule robomimic_robo), else nothing."""
    if parse_scenario(wildcards.scenario).loader == "robopipe_seq_tar":
        return [ROBO_FILE.format(dataset=wildcards.dataset)]
    return []


def bench_pushed_input(wildcards):
    """The push a scenario waits for: push.json when its remote source's URL
    (bench.sources) is where the dataset's `push: url` publishes it, else nothing."""
    source = parse_scenario(wildcards.scenario).source
    template = config["bench"].get("sources", {}).get(source)
    push = config["datasets"][wildcards.dataset].get("push", {})
    if template and template.format(dataset=wildcards.dataset) == push.get("url"):
        return [PUSH_FILE.format(dataset=wildcards.dataset)]
    return []


def ceiling_input(wildcards):
    """The dataset a ceiling job decodes (its info.json): a copy (``ceiling_e{encoding}``) or
    the v3.0 output."""
    if wildcards.suffix:
        return COPY_INFO.format(
            dataset=wildcards.dataset, encoding=wildcards.suffix[2:]
        )
    return PUBLISHED_INFO.format(dataset=wildcards.dataset)


def copy_part_names(wildcards):
    """The files of a copy that one copy_file job each writes, relative to the dataset root:
    each planned mp4, or each data parquet when the encoding moves frames into the data files.
    """
    plan = plan_of(wildcards.dataset)
    if parse_encoding(wildcards.encoding).in_video_files:
        return [
            video_path(key, f.chunk, f.file)
            for key, files in plan.video_files.items()
            for f in files
        ]
    return [data_path(f.chunk, f.file) for f in plan.data_files]


def copy_parts(wildcards):
    """Every file the copy_file jobs of this copy write (in its staging folder)."""
    return [
        COPY_PART.format(dataset=wildcards.dataset, encoding=wildcards.encoding, part=p)
        for p in copy_part_names(wildcards)
    ]


def copy_part_results(wildcards):
    """The measurement JSON of every copy_file job of this copy."""
    return [
        COPY_PART_RESULT.format(
            dataset=wildcards.dataset, encoding=wildcards.encoding, part=p
        )
        for p in copy_part_names(wildcards)
    ]


def bench_settings(wildcards):
    """params: config["bench"] without the matrix (robopipe.bench.runner.Settings)."""
    return {k: v for k, v in config["bench"].items() if k not in BENCH_NOT_SETTINGS}


def bench_network(wildcards):
    """resources: 1 for a remote source, so network-bound scenarios never overlap."""
    return int(parse_scenario(wildcards.scenario).remote)


def bench_threads(wildcards):
    """threads: the DataLoader workers plus the main process."""
    return parse_scenario(wildcards.scenario).workers + 1


def bench_nodes(wildcards):
    """resources nodes and tasks: one rank per node."""
    return parse_scenario(wildcards.scenario).nodes


def bench_mem_mb(wildcards):
    """resources mem_mb: 2 GB for the main process plus 1 GB per DataLoader worker."""
    return 2000 + 1000 * parse_scenario(wildcards.scenario).workers


def bench_mpi(wildcards):
    """resources mpi: 'srun' for a multi-node scenario, so that the job runs its own
    `srun -N {nodes}` (robopipe.ranks.run_ranks) over every node of its allocation."""
    return "srun" if parse_scenario(wildcards.scenario).nodes > 1 else ""


def bench_gres(wildcards):
    """resources gres: one GPU per node for cuda decoding."""
    return "gpu:1" if parse_scenario(wildcards.scenario).decode == "cuda" else ""


ROBOMIMIC_NOT_OPTIONS = ("path", "generate")


def robomimic_entry(wildcards):
    return config["datasets"][wildcards.dataset]["robomimic"]


def robomimic_hdf5(wildcards):
    """The dataset's robomimic file: the configured `path`, or the generated file."""
    entry = robomimic_entry(wildcards)
    if "path" in entry:
        return entry["path"]
    return f"results/{wildcards.dataset}/robomimic/generated.hdf5"


def robomimic_options(wildcards):
    """params: robopipe.robomimic.to_v21.RobomimicOptions keywords from the config."""
    entry = robomimic_entry(wildcards)
    return {k: v for k, v in entry.items() if k not in ROBOMIMIC_NOT_OPTIONS}


def robomimic_generate_options(wildcards):
    """params: robopipe.robomimic.generate.generate_robomimic keywords from the config."""
    return robomimic_entry(wildcards)["generate"]


def robomimic_batch_dirs(wildcards):
    """Every batch folder of the dataset's robomimic plan, in plan order."""
    plan_file = checkpoints.robomimic_plan.get(dataset=wildcards.dataset).output.plan
    with open(plan_file, encoding="utf-8") as f:
        batches = json.load(f)["batches"]
    return [f"results/{wildcards.dataset}/robomimic/batches/{b['id']}" for b in batches]
