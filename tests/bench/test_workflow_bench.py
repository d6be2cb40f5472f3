"""The bench rules run under Snakemake: every scenario of a small matrix, and the ceiling."""

import json
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
MATRIX = {
    "loader": ["robopipe_map", "robopipe_stream"],
    "source": ["local", "http"],
    "mode": ["single"],
    "decode": ["cpu"],
    "workers": [1],
    "nodes": [1],
    "exclude": [{"loader": "robopipe_map", "source": "http"}],
}


def test_bench_rules(workdir):
    config = {
        "bench": {
            "matrix": MATRIX,
            "batch_size": 4,
            "warmup_batches": 2,
            "steady_s": 0.5,
            "probe_samples": 8,
            "ceiling_frames": 10,
        }
    }
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    (workdir / "Snakefile").write_text(
        'configfile: "config.yaml"\n\n\n'
        f'include: "{REPO}/workflow/rules/bench.smk"\n\n\n'
        'rule all:\n    input:\n        bench_results("tiny"),\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "2", "--resources", "network=1"],
        cwd=workdir, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    names = [
        "robopipe_map_local_single_cpu_w1_n1",
        "robopipe_stream_http_single_cpu_w1_n1",
        "robopipe_stream_local_single_cpu_w1_n1",
    ]
    assert sorted(p.stem for p in (workdir / "results/bench/tiny").glob("*_n1.json")) == names
    for name in names:
        assert json.loads((workdir / f"results/bench/tiny/{name}.json").read_text())["samples"] > 0
        assert (workdir / f"results/benchmarks/tiny/bench_scenario/{name}.tsv").exists()
        assert (workdir / f"results/logs/tiny/bench_scenario/{name}.log").exists()
    ceiling = json.loads((workdir / "results/bench/tiny/ceiling.json").read_text())
    assert ceiling["ffmpeg_threads"] == 1 and ceiling["camera_count"] == 2
