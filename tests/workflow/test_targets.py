"""robopipe.workflow.targets and robopipe.workflow.bench: the files each rule reads and writes."""

import pytest

from robopipe.conversion.plan import make_plan
from robopipe.formats.v21_reader import load_source
from robopipe.options import ConversionOptions
from robopipe.sources import open_source
from robopipe.workflow import bench, targets


@pytest.fixture(scope="module")
def plan(make_v21):
    source = load_source(make_v21(episodes=5, cameras=2), "d")
    # 1 MB video files: the tiny demo still fills one video file per camera
    return make_plan(source, ConversionOptions(episodes_per_shard=2))


def test_staged_files_and_reports_pair_up(plan):
    staged = targets.staged_files(plan, "d")
    reports = targets.validation_reports(plan, "d")
    cameras = len(plan.video_keys)
    assert (
        len(staged)
        == len(reports)
        == len(plan.data_files) + cameras * len(plan.video_files[plan.video_keys[0]])
    )
    assert staged[0] == "results/d/staging/data/chunk-000/file-000.parquet"
    assert reports[0] == "results/d/validation/data/chunk-000/file-000.json"
    key = plan.video_keys[1]
    assert f"results/d/staging/videos/{key}/chunk-000/file-000.mp4" in staged
    assert f"results/d/validation/videos/{key}/chunk-000/file-000.json" in reports


def test_shards_of_a_data_file(plan):
    assert targets.shard_dirs(plan, "d") == [
        "results/d/shards/shard-000000",
        "results/d/shards/shard-000001",
        "results/d/shards/shard-000002",
    ]
    assert targets.data_file_shards(plan, "d", 0, 0) == targets.shard_dirs(plan, "d")


def test_copy_parts_follow_the_encoding(plan):
    key = plan.video_keys[0]
    data, videos = targets.plan_files(plan)
    assert f"videos/{key}/chunk-000/file-000.mp4" in targets.copy_part_names(data, videos, "h264g2")
    assert targets.copy_part_names(data, videos, "jpeg90") == ["data/chunk-000/file-000.parquet"]
    with pytest.raises(ValueError):
        targets.copy_part_names(data, videos, "nonsense")


def test_conversion_benchmarks(plan):
    tsvs = targets.conversion_benchmarks(plan, "d")
    assert "results/jobs/d/plan/plan.tsv" in tsvs
    assert "results/jobs/d/shard/shard-000002.tsv" in tsvs
    assert "results/jobs/d/aggregate_data/chunk-000_file-000.tsv" in tsvs
    key = plan.video_keys[0]
    assert f"results/jobs/d/aggregate_video/{key}_chunk-000_file-000.tsv" in tsvs


MATRIX = {
    "loader": ["robopipe_map", "lerobot_map", "robomimic_hdf5_all", "robopipe_seq_all"],
    "source": ["local"],
    "mode": ["single"],
    "decode": ["cpu", "cuda"],
    "workers": [2],
    "nodes": [1],
}


def test_scenarios_per_source_kind(monkeypatch):
    plain = bench.scenarios({"matrix": MATRIX, "lerobot_python": None}, robomimic_source=False)
    assert plain == ["robopipe_map_local_single_cpu_w2_n1", "robopipe_map_local_single_cuda_w2_n1"]
    # an interpreter with lerobot installed (robopipe.peer_env.peer_packages)
    monkeypatch.setattr(bench, "peer_packages", lambda python: {"lerobot": "0.6.1"})
    with_lerobot = bench.scenarios(
        {"matrix": MATRIX, "lerobot_python": "python3"}, robomimic_source=True
    )
    loaders = {name.split("_local_")[0] for name in with_lerobot}
    assert loaders == set(MATRIX["loader"])


def test_copies_and_ceilings_a_scenario_reads():
    names = ["robopipe_map_local_single_cuda_w2_n1", "robopipe_map_local_single_ejpeg90_cpu_w2_n1"]
    assert bench.scenario_encoding(names[0]) == bench.CUDA_ENCODING
    assert bench.encodings(names) == ["h264g2", "jpeg90"]
    assert bench.ceilings("d", names) == [
        "results/bench/d/ceiling.json",
        "results/bench/d/ceiling_eh264g2.json",
        "results/bench/d/ceiling_ejpeg90.json",
    ]
    info = "results/d/v3.0/meta/info.json"
    copy = "results/d/copies/jpeg90/v3.0/meta/info.json"
    assert bench.scenario_dataset("d", names[1], info) == copy
    assert bench.scenario_dataset("d", "robopipe_map_local_single_cpu_w2_n1", info) == info
    assert bench.ceiling_dataset("d", "", info) == info
    assert bench.ceiling_dataset("d", "_ejpeg90", info) == copy
    assert bench.results("d", names[:1])[0] == f"results/bench/d/{names[0]}.json"


def test_resources_of_a_scenario():
    assert bench.resources("robopipe_stream_http_single_cuda_w2_n2") == {
        "threads": 3,
        "nodes": 2,
        "mem_mb": 4000,
        "network": 1,
        "mpi": "srun",
        "gres": "gpu:1",
    }
    local = bench.resources("robopipe_map_local_single_cpu_w0_n1")
    assert (local["network"], local["mpi"], local["gres"]) == (0, "", "")


def test_settings_and_pushed_first():
    config = {
        "matrix": MATRIX,
        "ceiling_frames": 9,
        "batch_size": 4,
        "sources": {"s3": "s3://b/{dataset}"},
    }
    assert bench.settings(config) == {"batch_size": 4, "sources": config["sources"]}
    pushed = open_source("d", {"demo": {}, "push": {"url": "s3://b/d"}})
    assert pushed.pushed()
    assert bench.pushed_first(config, pushed, "robopipe_stream_s3_single_cpu_w2_n1")
    assert bench.pushed_input(config, pushed, "robopipe_stream_s3_single_cpu_w2_n1") == [
        "results/d/push.json"
    ]
    unpushed = open_source("d", {"demo": {}})
    assert not unpushed.pushed()
    assert not bench.pushed_first(config, unpushed, "robopipe_stream_s3_single_cpu_w2_n1")
    assert not bench.pushed_first(config, pushed, "robopipe_stream_http_single_cpu_w2_n1")
