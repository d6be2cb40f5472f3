import re

import pytest

from robopipe.bench.scenarios import (
    WILDCARD_CONSTRAINTS,
    Scenario,
    SequenceMode,
    expand_matrix,
    parse_scenario,
    parse_sequence_mode,
)


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


def test_sequence_modes():
    assert parse_sequence_mode("single") == SequenceMode(1)
    assert parse_sequence_mode("seq10") == SequenceMode(10)
    assert parse_sequence_mode("seq10b64") == SequenceMode(10, 64)
    assert parse_sequence_mode("seq50b1r28") == SequenceMode(50, 1, 28)
    assert parse_sequence_mode("singler28") == SequenceMode(1, None, 28)
    name = "robopipe_seq_tar_local_seq50b1r28_cpu_w0_n1"
    assert parse_scenario(name).mode == "seq50b1r28"
    assert re.fullmatch(WILDCARD_CONSTRAINTS["scenario"], name)
    for mode in ("sarm", "seq0", "seqx", "seq10b0", "seq10r28b64", "b64"):
        with pytest.raises(ValueError, match="take single or seq<N>"):
            parse_sequence_mode(mode)
