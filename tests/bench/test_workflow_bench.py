"""The bench rules run under Snakemake: every scenario of a small matrix, and the ceiling."""

import json

MATRIX = {
    "loader": ["robopipe_map", "robopipe_stream"],
    "source": ["local", "http"],
    "mode": ["single"],
    "encoding": [None],  # the default config adds a jpeg90 copy
    "decode": ["cpu"],
    "workers": [1],
    "nodes": [1],
    "exclude": [{"loader": "robopipe_map", "source": "http"}],
}


def test_bench_rules(make_v21, tmp_path, run_snakemake, quick_bench):
    source = make_v21(episodes=6, cameras=2, fps=10, min_length=12, max_length=30)
    config = {
        "datasets": {"tiny": {"path": str(source), "conversion": {"video_file_size_in_mb": 0.02}}},
        "bench": {
            "matrix": MATRIX,
            **quick_bench,
        },
    }
    run_snakemake(tmp_path, config, "--cores", "2", "bench")
    names = [
        "robopipe_map_local_single_cpu_w1_n1",
        "robopipe_stream_http_single_cpu_w1_n1",
        "robopipe_stream_local_single_cpu_w1_n1",
    ]
    assert sorted(p.stem for p in (tmp_path / "results/bench/tiny").glob("*_n1.json")) == names
    for name in names:
        assert json.loads((tmp_path / f"results/bench/tiny/{name}.json").read_text())["samples"] > 0
        assert (tmp_path / f"results/jobs/tiny/bench_scenario/{name}.tsv").exists()
        assert (tmp_path / f"results/logs/tiny/bench_scenario/{name}.log").exists()
    ceiling = json.loads((tmp_path / "results/bench/tiny/ceiling.json").read_text())
    assert ceiling["ffmpeg_threads"] == 1 and ceiling["camera_count"] == 2
