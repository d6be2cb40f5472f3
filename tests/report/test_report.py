"""The report library on fixture results (tests/report/fixtures/): figures, tables, errors."""

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from robopipe.errors import DatasetError
from robopipe.report import FIGURES, build_dataset_report, merge_summaries
from robopipe.report.tables import (
    conversion_by_rule,
    load_benchmarks,
    load_job_rss,
    load_scenarios,
)

FIXTURES = Path(__file__).parent / "fixtures"


def fixture_inputs(dataset: str) -> dict:
    bench = FIXTURES / "bench" / dataset
    return {
        "bench": sorted(bench.glob("*_n*.json")),
        "ceilings": [bench / "ceiling.json"],
        "conversion_tsvs": sorted((FIXTURES / "jobs" / dataset).rglob("*.tsv")),
        "lerobot": list(bench.glob("lerobot_convert.json")),
    }


def svg_text(path: Path) -> str:
    """The figure's text: matplotlib draws text as paths and keeps each string in a comment."""
    parser = ET.XMLParser(target=ET.TreeBuilder(insert_comments=True))
    root = ET.parse(path, parser=parser).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    return "\n".join(el.text for el in root.iter() if el.tag is ET.Comment)


def assert_png(path: Path) -> None:
    with Image.open(path) as image:
        image.load()
        assert image.format == "PNG"
        assert image.width >= 600 and image.height >= 200


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report") / "demo"
    build_dataset_report("demo", out, **fixture_inputs("demo"))
    return out


def test_every_figure_is_written_as_readable_svg_and_png(demo):
    for stem in FIGURES:
        assert svg_text(demo / f"{stem}.svg"), stem
        assert_png(demo / f"{stem}.png")
    scenarios = sorted(p.stem for p in fixture_inputs("demo")["bench"])
    assert sorted(p.stem for p in (demo / "scenarios").glob("*.svg")) == scenarios
    for name in scenarios:
        assert name in svg_text(demo / "scenarios" / f"{name}.svg")
        assert_png(demo / "scenarios" / f"{name}.png")


def test_axes_carry_units_and_scenario_names(demo):
    expected = {
        "throughput": ["samples/s", "decoded frames/s per node", "640 frames/s", "1,850 frames/s"],
        "latency": ["latency per sample, ms", "p99 200.0"],
        "first_batch": ["time to the first batch, s"],
        "peak_rss": ["peak memory per rank (main process and its workers", "RSS 16,000", "PSS n/a"],
        "scaling_workers": ["DataLoader workers per node", "samples/s"],
        "scaling_nodes": ["nodes", "decoded frames/s, all nodes"],
        "conversion_rules": ["shard (6 jobs)", "summed over the rule's jobs, s", "MB"],
        "conversion_shards": ["shard-00005", "wall time, s", "peak RSS, MB"],
        "lerobot_convert": ["50 episodes", "7.10", "905"],
    }
    for stem, strings in expected.items():
        text = svg_text(demo / f"{stem}.svg")
        for s in strings:
            assert s in text, (stem, s)
    throughput = svg_text(demo / "throughput.svg")
    for path in fixture_inputs("demo")["bench"]:
        assert path.stem in throughput


def test_missing_optional_results_give_figures_that_say_so(tmp_path):
    build_dataset_report("tiny", tmp_path / "tiny", **fixture_inputs("tiny"))
    assert "only one node count was measured" in svg_text(tmp_path / "tiny/scaling_nodes.svg")
    assert "two or more worker counts" in svg_text(tmp_path / "tiny/scaling_workers.svg")
    assert "was not measured" in svg_text(tmp_path / "tiny/lerobot_convert.svg")

    build_dataset_report("empty", tmp_path / "empty")
    for stem in FIGURES:
        assert_png(tmp_path / "empty" / f"{stem}.png")
    for stem in ("throughput", "latency", "first_batch", "peak_rss", "scaling_nodes"):
        assert "no benchmark scenario" in svg_text(tmp_path / "empty" / f"{stem}.svg")
    assert "no conversion benchmark" in svg_text(tmp_path / "empty/conversion_rules.svg")
    for stem in ("paper_cache_modes", "paper_batch_size", "paper_seq_length"):
        assert "robomimic_paper.yaml" in svg_text(tmp_path / "empty" / f"{stem}.svg")
    assert list((tmp_path / "empty/scenarios").iterdir()) == []
    assert pd.read_csv(tmp_path / "empty/summary.csv").empty


def test_summary_has_one_flat_row_per_scenario(demo):
    summary = pd.read_csv(demo / "summary.csv")
    assert len(summary) == len(fixture_inputs("demo")["bench"])
    row = summary.set_index("scenario").loc["robopipe_map_local_single_cpu_w2_n1"]
    assert row["samples_per_s"] == 520.0
    assert row["latency_p99_ms"] == pytest.approx(23.08)
    assert row["decoder_cache_hits"] == 900
    assert row["ceiling_random_frames_per_s_per_core"] == 640.0
    assert "ranks" not in summary.columns
    # grouped by loader, in the contract's order
    assert list(dict.fromkeys(summary["loader"])) == [
        "robopipe_map",
        "robopipe_stream",
        "lerobot_map",
        "lerobot_stream",
        "robomimic_hdf5_all",
    ]


def test_merge_summaries_concatenates_datasets(demo, tmp_path):
    build_dataset_report("tiny", tmp_path / "tiny", **fixture_inputs("tiny"))
    merged = pd.read_csv(
        merge_summaries([demo / "summary.csv", tmp_path / "tiny/summary.csv"], tmp_path / "s.csv")
    )
    assert sorted(merged["dataset"].unique()) == ["demo", "tiny"]
    assert len(merged) == len(fixture_inputs("demo")["bench"]) + 1


def test_benchmark_tsvs_per_job_and_per_rule():
    jobs = load_benchmarks("demo", fixture_inputs("demo")["conversion_tsvs"])
    validate = jobs.set_index("rule").loc["validate"]
    # a repeat() TSV: mean wall time of its runs, max RSS ignoring Snakemake's NA
    assert validate["s"] == pytest.approx((1.7 + 1.9) / 2)
    assert validate["max_rss"] == 260.0
    per_rule = conversion_by_rule(jobs)
    assert list(per_rule["rule"])[:4] == ["demo", "plan", "shard", "aggregate_data"]
    shard = per_rule.set_index("rule").loc["shard"]
    assert shard["jobs"] == 6
    assert shard["total_s"] == pytest.approx(jobs[jobs["rule"] == "shard"]["s"].sum())


def test_a_slurm_run_s_job_starts_per_rule(tmp_path):
    records = {"a": ("shard", 1.0, 20.0), "b": ("shard", 2.0, 30.0), "c": ("plan", 1.5, None)}
    for job, (rule, startup, job_start) in records.items():
        record = {"rule": rule, "own_mb": 1, "children_mb": 1, "peak_mb": 1}
        record |= {"startup_s": startup, "job_start_s": job_start}
        (tmp_path / f"{job}.log.rss.json").write_text(json.dumps(record))
    job_rss = load_job_rss(sorted(tmp_path.glob("*.rss.json")))
    jobs = pd.DataFrame({"rule": ["shard", "shard", "plan"], "s": [1.0, 1.0, 1.0]})
    per_rule = conversion_by_rule(jobs.assign(max_rss=1.0), job_rss).set_index("rule")
    shard = per_rule.loc["shard"]
    assert shard["job_start_s"] == 25.0 and shard["startup_s"] == 1.5
    assert pd.isna(per_rule.loc["plan", "job_start_s"])


def test_many_shards_are_plotted_by_ordinal(tmp_path):
    template = next((FIXTURES / "jobs/demo/shard").glob("*.tsv"))
    tsvs = []
    for i in range(55):
        tsv = tmp_path / "jobs/big/shard" / f"shard-{i:05d}.tsv"
        tsv.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(template, tsv)
        tsvs.append(tsv)
    build_dataset_report("big", tmp_path / "big", conversion_tsvs=tsvs)
    text = svg_text(tmp_path / "big/conversion_shards.svg")
    assert "shard (ordinal by name, 55 shards)" in text
    assert "shard-00054" not in text


def test_bad_result_files_name_dataset_and_file(tmp_path):
    good = json.loads(fixture_inputs("demo")["bench"][0].read_text())
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({k: v for k, v in good.items() if k != "samples_per_s"}))
    with pytest.raises(DatasetError, match=r"dataset 'demo': file .*broken.json: .*samples_per_s"):
        load_scenarios("demo", [broken])

    other = tmp_path / "other.json"
    other.write_text(json.dumps({**good, "dataset": "other"}))
    with pytest.raises(DatasetError, match=r"other.json: result file is for dataset 'other'"):
        load_scenarios("demo", [other])

    tsv = tmp_path / "shard" / "shard-00000.tsv"
    tsv.parent.mkdir()
    tsv.write_text("h:m:s\tio_in\n0:00:01\t1.0\n")
    with pytest.raises(DatasetError, match=r"shard-00000.tsv: benchmark TSV lacks"):
        load_benchmarks("demo", [tsv])


def test_peak_memory_figure_shows_rss_and_pss(tmp_path):
    source = sorted(fixture_inputs("demo")["bench"])[0]
    result = {**json.loads(source.read_text()), "peak_rss_mb": 3400.0, "peak_pss_mb": 1890.0}
    path = tmp_path / source.name
    path.write_text(json.dumps(result))
    table = load_scenarios("demo", [path])
    assert table.loc[0, "peak_pss_mb"] == 1890.0
    out = tmp_path / "report"
    build_dataset_report("demo", out, bench=[path])
    text = svg_text(out / "peak_rss.svg")
    assert "RSS 3,400" in text and "PSS 1,890" in text


def test_paper_figures_from_sequence_scenarios(tmp_path):
    template = json.loads(sorted(fixture_inputs("demo")["bench"])[0].read_text())
    paths = []
    modes = ["seq50b1", "seq10b1", "seq10b16", "seq10b64", "seq1b64", "seq25b64", "seq50b1r28"]
    for loader in ("robomimic_seq_none", "robopipe_seq_tar"):
        for i, mode in enumerate(modes):
            name = f"{loader}_local_{mode}_cpu_w0_n1"
            batch = int(mode.split("b")[1].split("r")[0])
            result = {**template, "dataset": "rm", "scenario": name, "loader": loader,
                      "mode": mode, "workers": 0, "nodes": 1, "batch_size": batch,
                      "samples_per_s": 100.0 + i, "peak_rss_mb": 1234.0 + i}  # fmt: skip
            paths.append(tmp_path / f"{name}.json")
            paths[-1].write_text(json.dumps(result))
    out = tmp_path / "report"
    build_dataset_report("rm", out, bench=paths)
    cache = svg_text(out / "paper_cache_modes.svg")
    for loader in ("robomimic_seq_none", "robopipe_seq_tar"):
        assert f"{loader} w0" in cache
    assert "r28" not in cache and "1,234" in cache and "peak RSS (MB)" in cache
    batch = svg_text(out / "paper_batch_size.svg")
    assert "batch size" in batch and "robopipe_seq_tar w0" in batch and "16" in batch
    seq = svg_text(out / "paper_seq_length.svg")
    assert "sequence length" in seq and "25" in seq


def test_summary_and_figures_show_the_network(demo):
    summary = pd.read_csv(demo / "summary.csv").set_index("scenario")
    columns = ["network_latency_ms", "bytes_fetched", "requests", "bytes_per_sample"]
    columns += ["requests_per_sample", "network_wait_share", "peer"]
    assert set(columns) <= set(summary.columns)
    remote = summary.loc["robopipe_stream_http_single_cpu_w2_n1"]
    assert remote["network_latency_ms"] == 20
    assert remote["bytes_fetched"] == 6553600 and remote["requests"] == 960
    assert remote["bytes_per_sample"] == 10240 and remote["requests_per_sample"] == 1.5
    assert remote["network_wait_share"] == 0.125
    # a result written before the network fields: NaN, not an error
    old = summary.loc["robopipe_map_http_single_cuda_w2_n1"]
    assert old[columns[:-1]].isna().all()
    # peer: the registry's word on the loader
    assert not summary.loc["robopipe_map_local_single_cpu_w2_n1", "peer"]
    assert summary.loc["lerobot_map_local_single_cpu_w2_n1", "peer"]
    assert summary["peer"].dtype == bool

    throughput = svg_text(demo / "throughput.svg")
    assert "robopipe_stream_http_single_cpu_w2_n1 (http, 20 ms)" in throughput
    assert "robopipe_map_http_single_cuda_w2_n1 (http)" in throughput
    assert "robopipe_map_local_single_cpu_w2_n1 (" not in throughput

    card = svg_text(demo / "scenarios/robopipe_stream_http_single_cpu_w2_n1.svg")
    assert "network: http | injected round trip 20 ms" in card
    assert "10.2 kB/sample | 1.50 requests/sample" in card
    assert "12% of wall time waiting on the network" in card
    old_card = svg_text(demo / "scenarios/robopipe_map_http_single_cuda_w2_n1.svg")
    assert "bytes/sample n/a | requests/sample n/a | waiting n/a" in old_card
    assert "network:" not in svg_text(demo / "scenarios/robopipe_map_local_single_cpu_w2_n1.svg")


def test_old_results_without_network_fields_load():
    table = load_scenarios("tiny", fixture_inputs("tiny")["bench"])
    assert table[["network_latency_ms", "bytes_per_sample", "requests"]].isna().all().all()
    assert table[["dispatch_s", "startup_to_measure_s", "start_skew_s"]].isna().all().all()
    assert table[["peak_pss_mb", "peak_pss_total_mb", "batch_buffer_mb"]].isna().all().all()
    assert list(table["peer"]) == [False]


def test_dispatch_and_the_ranks_start_skew_apart_from_measuring(tmp_path):
    bench = FIXTURES / "bench/demo"
    timings = {
        # a 2-node scenario in a SLURM job; a 1-node one outside SLURM
        "robopipe_stream_local_single_cpu_w2_n2": (23.4, 4.1, 0.012),
        "robopipe_map_local_single_cpu_w2_n1": (None, 3.2, None),
    }
    paths = []
    for name, (dispatch, startup, skew) in timings.items():
        result = json.loads((bench / f"{name}.json").read_text())
        result.update(
            measure_start_unix=1.8e9, dispatch_s=dispatch, startup_to_measure_s=startup,
            start_skew_s=skew,
        )  # fmt: skip
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(result))
    out = tmp_path / "report"
    build_dataset_report("demo", out, bench=paths)
    summary = pd.read_csv(out / "summary.csv").set_index("scenario")
    n2 = summary.loc["robopipe_stream_local_single_cpu_w2_n2"]
    assert (n2["dispatch_s"], n2["startup_to_measure_s"], n2["start_skew_s"]) == (23.4, 4.1, 0.012)
    assert n2["steady_wall_s"] == 1.376  # the measuring window, a column of its own
    n1 = summary.loc["robopipe_map_local_single_cpu_w2_n1"]
    assert pd.isna(n1["dispatch_s"]) and n1["startup_to_measure_s"] == 3.2
    assert pd.isna(n1["start_skew_s"])

    card = svg_text(out / "scenarios/robopipe_stream_local_single_cpu_w2_n2.svg")
    dispatch = "dispatch 23.4 s (SLURM job start to measuring; process start to measuring 4.1 s)"
    assert dispatch in card
    assert "measured: steady window 1.4 s | ranks' start skew 12 ms" in card
    card = svg_text(out / "scenarios/robopipe_map_local_single_cpu_w2_n1.svg")
    assert "dispatch n/a (no SLURM job; process start to measuring 3.2 s)" in card
    assert "skew" not in card
