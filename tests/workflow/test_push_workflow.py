"""The push as Snakemake runs it: opt-in, to moto's S3 server, and a benchmark scenario on
``source: s3`` that reads the pushed copy."""

import hashlib
import json
import re

import pytest

pytestmark = pytest.mark.slow

SCENARIO = "robopipe_stream_s3_single_cpu_w0_n1"


def test_push_to_s3_then_bench_reads_the_pushed_copy(
    make_v21, s3_server, tmp_path, run_snakemake, file_tree, quick_bench
):
    source = make_v21(episodes=6, cameras=2, fps=10, min_length=12, max_length=30)
    url = s3_server.url("lerobot/tiny")
    config = {
        "datasets": {
            "tiny": {
                "path": str(source),
                "push": {"url": url, "storage_options": s3_server.storage_options},
            },
            "local_only": {"path": str(source)},
        },
        "bench": {
            "matrix": {
                "loader": ["robopipe_stream"],
                "source": ["s3"],
                "mode": ["single"],
                "encoding": [None],  # no copies (the default config adds jpeg90)
                "decode": ["cpu"],
                "workers": [0],
                "nodes": [1],
            },
            "sources": {"s3": s3_server.url("lerobot/{dataset}")},
            "storage_options": {"s3": s3_server.storage_options},
            **quick_bench,
        },
    }
    dry = run_snakemake(tmp_path, config, "push", "-n", "--quiet", "rules")
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", dry.stdout, re.M))
    assert (counts["push_dataset"], counts["publish"]) == ("1", "1")  # not local_only

    run_snakemake(tmp_path, config, "--cores", "2", f"results/bench/tiny/{SCENARIO}.json")
    results = tmp_path / "results"
    record = json.loads((results / "tiny/push.json").read_text())
    assert record["target"] == url and record["uploaded_files"] == record["files"]
    fs, prefix = s3_server.fs, f"{s3_server.bucket}/lerobot/tiny"
    pushed = {
        path[len(prefix) + 1 :]: hashlib.sha256(fs.cat_file(path)).hexdigest()
        for path in fs.find(prefix)
    }
    assert pushed == file_tree(results / "tiny/v3.0")
    assert not (results / "local_only").exists()

    bench = json.loads((results / f"bench/tiny/{SCENARIO}.json").read_text())
    assert bench["samples"] > 0
    lines = s3_server.requests()
    last_put = max(i for i, line in enumerate(lines) if line.startswith("PUT "))
    reads = [line for line in lines[last_put:] if line.startswith(f"GET /{prefix}/")]
    assert any("/videos/" in line for line in reads) and any("/data/" in line for line in reads)

    again = run_snakemake(tmp_path, config, "--cores", "1", "push", "--forcerun", "push_dataset")
    assert "push_dataset" in again.stderr
    assert json.loads((results / "tiny/push.json").read_text())["uploaded_files"] == 0
