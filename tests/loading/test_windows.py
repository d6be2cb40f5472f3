import numpy as np
import pytest

from robopipe.loading.windows import (
    check_delta_timestamps,
    delta_indices,
    mode_delta_timestamps,
    window_rows,
)


def test_delta_indices_round_to_frames():
    out = delta_indices({"action": [-0.1, 0.0, 0.2]}, fps=10)
    assert out["action"].tolist() == [-1, 0, 2]


def test_check_rejects_off_grid_delta():
    check_delta_timestamps({"a": [-1 / 30, 0.0]}, fps=30, tolerance_s=1e-4)
    with pytest.raises(ValueError, match="multiple of 1/fps"):
        check_delta_timestamps({"a": [0.01]}, fps=30, tolerance_s=1e-4)


def test_window_rows_clamp_and_pad_at_both_edges():
    rows, pad = window_rows(1, 5, np.array([-3, -1, 0, 2, 4]))
    assert rows.tolist() == [0, 0, 1, 3, 4]
    assert pad.tolist() == [True, False, False, False, True]
    rows, pad = window_rows(4, 5, np.array([-1, 0, 1]))
    assert rows.tolist() == [3, 4, 4] and pad.tolist() == [False, False, True]


def test_modes():
    cams = ["observation.images.a", "observation.images.b"]
    assert mode_delta_timestamps("single", cams, 10) is None
    sarm = mode_delta_timestamps("sarm", cams, 10)
    assert set(sarm) == {*cams, "observation.state"}
    assert sarm["observation.state"] == [-7.0, -6.0, -5.0, -4.0, -3.0, -2.0, -1.0, 0.0]
    windows = {"pair": {"cameras": [-0.1, 0], "action": [0, 0.1]}}
    assert mode_delta_timestamps("pair", cams, 10, windows) == {
        cams[0]: [-0.1, 0.0],
        cams[1]: [-0.1, 0.0],
        "action": [0.0, 0.1],
    }
    with pytest.raises(ValueError, match="unknown frame mode"):
        mode_delta_timestamps("nope", cams, 10, windows)
