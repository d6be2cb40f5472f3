"""The scenario result schema: checked when written and when read."""

import json
from pathlib import Path

import pytest

from robopipe.scenario_result import read_scenario_result, scenario_fields, write_scenario_result

FIXTURE = (
    Path(__file__).parent / "report/fixtures/bench/demo/robopipe_map_local_single_cpu_w2_n1.json"
)


def test_a_valid_result_round_trips(tmp_path):
    result = json.loads(FIXTURE.read_text())
    write_scenario_result(result, tmp_path / "r.json", tmp_path / "r.csv")
    assert read_scenario_result(tmp_path / "r.json") == result
    header = (tmp_path / "r.csv").read_text().splitlines()[0].split(",")
    assert "latency_ms_p50" in header and "ranks" not in header
    assert set(scenario_fields()) <= set(result)


def test_an_invalid_result_is_refused_and_nothing_is_written(tmp_path):
    result = json.loads(FIXTURE.read_text())
    result["samples_per_s"] = -1.0
    with pytest.raises(ValueError, match="samples_per_s"):
        write_scenario_result(result, tmp_path / "r.json", tmp_path / "r.csv")
    assert list(tmp_path.iterdir()) == []
    del result["samples_per_s"]
    (tmp_path / "bad.json").write_text(json.dumps(result))
    with pytest.raises(ValueError, match="samples_per_s"):
        read_scenario_result(tmp_path / "bad.json")
