import re

import pytest

from robopipe.bench.scenarios import WILDCARD_CONSTRAINTS, Scenario, expand_matrix, parse_scenario


def test_parse_round_trips():
    s = parse_scenario("robopipe_stream_s3_sarm_cuda_w3_n2")
    assert s == Scenario("robopipe_stream", "s3", "sarm", "cuda", 3, 2)
    assert s.name == "robopipe_stream_s3_sarm_cuda_w3_n2" and s.remote


@pytest.mark.parametrize(
    "name",
    ["robopipe_local_single_cpu_w2_n1", "robopipe_map_ftp_single_cpu_w2_n1",
     "robopipe_map_local_single_tpu_w2_n1", "robopipe_map_local_my_window_cpu_w2_n1",
     "robopipe_map_local_single_cpu_w2"],
)  # fmt: skip
def test_bad_names_are_rejected_by_parser_and_wildcard(name):
    with pytest.raises(ValueError, match="bad scenario name"):
        parse_scenario(name)
    assert not re.fullmatch(WILDCARD_CONSTRAINTS["scenario"], name)


def test_wildcard_accepts_every_loader():
    for loader in ("robopipe_map", "lerobot_stream", "robomimic_hdf5_low_dim"):
        assert re.fullmatch(WILDCARD_CONSTRAINTS["scenario"], f"{loader}_hf_pair_cpu_w0_n1")


def test_expand_matrix_with_exclusions():
    matrix = {
        "loader": ["robopipe_map", "robopipe_stream"],
        "source": ["local", "http"],
        "mode": ["single"],
        "decode": ["cpu"],
        "workers": [0, 2],
        "nodes": [1],
        "exclude": [
            {"loader": "robopipe_map", "source": ["http"]},
            {"workers": 0, "source": "http"},
        ],
    }
    assert expand_matrix(matrix) == [
        "robopipe_map_local_single_cpu_w0_n1",
        "robopipe_map_local_single_cpu_w2_n1",
        "robopipe_stream_http_single_cpu_w2_n1",
        "robopipe_stream_local_single_cpu_w0_n1",
        "robopipe_stream_local_single_cpu_w2_n1",
    ]


def test_expand_matrix_needs_every_axis():
    with pytest.raises(ValueError, match="lacks axes"):
        expand_matrix({"loader": ["robopipe_map"]})
