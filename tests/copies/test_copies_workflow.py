"""The copies under Snakemake: one copy_file job per output file, scenarios on copies with the
encoding in their name, a ceiling per copy, and the report's which-copy table."""

from __future__ import annotations

import json

import pandas as pd

MATRIX = {
    "loader": ["robopipe_map"],
    "source": ["local"],
    "mode": ["single"],
    "encoding": [None, "jpeg90", "h264g2_24x32"],
    "decode": ["cpu"],
    "workers": [1],
    "nodes": [1],
}


def test_copies_rules(make_v21, tmp_path, run_snakemake, quick_bench):
    source = make_v21(
        episodes=6, cameras=2, height=48, width=64, fps=10, min_length=12, max_length=30
    )
    config = {
        "datasets": {"tiny": {"path": str(source), "conversion": {"video_file_size_in_mb": 0.03}}},
        "bench": {
            "matrix": MATRIX,
            **quick_bench,
        },
    }
    run_snakemake(tmp_path, config, "--cores", "2", "report")
    results = tmp_path / "results"
    videos = sorted((results / "tiny/v3.0").glob("videos/*/*/*.mp4"))
    assert len(videos) > 2  # several files, so several copy_file jobs
    copy_jobs = sorted((results / "jobs/tiny/copy_file/h264g2_24x32").rglob("*.tsv"))
    assert len(copy_jobs) == len(videos)
    data_jobs = sorted((results / "jobs/tiny/copy_file/jpeg90").rglob("*.tsv"))
    assert len(data_jobs) == len(list((results / "tiny/v3.0").glob("data/*/*.parquet")))
    staged = results / "tiny/copies/jpeg90/staging/data/chunk-000/file-000.parquet"
    published = results / "tiny/copies/jpeg90/v3.0/data/chunk-000/file-000.parquet"
    assert staged.stat().st_ino == published.stat().st_ino  # a hard link: no second copy
    for encoding in ("jpeg90", "h264g2_24x32"):
        scenario = f"robopipe_map_local_single_e{encoding}_cpu_w1_n1"
        result = json.loads((results / f"bench/tiny/{scenario}.json").read_text())
        assert result["encoding"] == encoding and result["samples"] > 0
        ceiling = json.loads((results / f"bench/tiny/ceiling_e{encoding}.json").read_text())
        assert ceiling["encoding"] == encoding
        copy = json.loads((results / f"tiny/copies/{encoding}/copy.json").read_text())
        assert copy["frames"] == 2 * copy["frames"] // 2 > 0
    table = pd.read_csv(results / "report/tiny/copies.csv")
    assert sorted(table["encoding"]) == ["converted", "h264g2_24x32", "jpeg90"]
    converted = table[table["encoding"] == "converted"].iloc[0]
    assert converted["load_time_factor"] == 1.0 and bool(converted["lossless"])
    assert (table["psnr_mean_db"].dropna() > 20).all() and (table["compression_factor"] > 1).all()
    assert (results / "report/tiny/copies.svg").stat().st_size > 0
