"""robopipe.report.quality: the quality figures of a small dataset with injected faults (the
library's own check and merge), bounded as the captions say; the episodes strip of many
episodes keeps every flagged one."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_report import assert_png, svg_text

from robopipe.harness.faults import copy_dataset, inject_black_camera, inject_nan
from robopipe.layout import REPORT_QUALITY_FIGURES
from robopipe.quality import CHECKS, QualityOptions, check_batch, merge_batches
from robopipe.report import quality


@pytest.fixture(scope="module")
def checked(make_v21, tmp_path_factory):
    """A 4-episode dataset with NaN in episodes 1 and 3 and a black camera stretch in episode
    2, checked: (its root, quality.json, episodes.parquet)."""
    base = tmp_path_factory.mktemp("quality_report")
    clean = make_v21(episodes=4, cameras=1, min_length=30, max_length=40, fps=10)
    root = copy_dataset(clean, base / "ds")
    inject_nan(root, 1, frame=3)
    inject_nan(root, 3, frame=4, dimension=1)
    inject_black_camera(root, 2, start=5)
    options = QualityOptions()
    check_batch(str(root), [0, 1, 2, 3], options, base / "batch.json")
    out = base / "quality"
    merge_batches([base / "batch.json"], out, dataset="ds", source=str(root), options=options)
    return root, out / "quality.json", out / "episodes.parquet"


def test_every_quality_figure_is_drawn_with_what_was_flagged(checked, tmp_path):
    root, report, episodes = checked
    written = quality.quality_figures(report, episodes, tmp_path, dataset="ds", root=str(root))
    assert sorted(p.name for p in written) == sorted(
        f"{stem}.{ext}" for stem in REPORT_QUALITY_FIGURES for ext in ("svg", "png")
    )
    for stem in REPORT_QUALITY_FIGURES:
        assert_png(tmp_path / f"{stem}.png")
    checks = svg_text(tmp_path / "quality_checks.svg")
    assert all(name in checks for name in CHECKS)
    sheet = tmp_path / "quality_cameras.svg"
    assert "black_camera (" in svg_text(sheet) and "episode 2" in svg_text(sheet)
    assert sheet.read_text().count("<image") == 3  # first, middle and last frame
    signals = svg_text(tmp_path / "quality_signals.svg")
    assert "nan_inf (error)" in signals and "episode 3" in signals


def test_the_drawn_findings_are_capped_and_the_title_says_so(checked, tmp_path):
    root, report, episodes = checked
    flagged = quality.signal_findings(json.loads(Path(report).read_text()))
    assert len(flagged) >= 2
    quality.quality_figures(report, episodes, tmp_path, dataset="ds", root=str(root), max_drawn=1)
    assert f"(1 of {len(flagged)} shown" in svg_text(tmp_path / "quality_signals.svg")


def test_a_stretch_that_cannot_be_read_shows_why(checked, tmp_path):
    _root, report, _episodes = checked
    quality.cameras(json.loads(Path(report).read_text()), str(tmp_path / "gone"),
                    tmp_path / "sheet", "ds")  # fmt: skip
    assert "episode 2" in svg_text(tmp_path / "sheet.svg")
    assert "<image" not in (tmp_path / "sheet.svg").read_text()


def test_the_strip_of_many_episodes_keeps_each_flagged_one(tmp_path):
    ranks = np.zeros((len(CHECKS), 2500), np.int8)
    ranks[3, 1234] = 3
    ranks[0, 2499] = 1
    columns, per_column = quality.worst_per_column(ranks)
    assert per_column == 3 and columns.shape == (len(CHECKS), 834)
    assert columns[3, 1234 // 3] == 3 and columns[0, -1] == 1 and columns.sum() == 4
    episodes = pd.DataFrame({"episode_index": range(2500), "length": 10})
    for check in CHECKS:
        episodes[check] = ""
    quality.episodes_strip(episodes, CHECKS, tmp_path / "strip", "ds")
    assert "worst of 3 consecutive episodes" in svg_text(tmp_path / "strip.svg")


def test_only_findings_in_one_episode_on_a_signal_or_camera_are_drawn():
    report = {
        "findings": [
            {"check": "constant_dimension", "severity": "info", "episode_index": None,
             "feature": "action", "dimension": 6},
            {"check": "missing_file", "severity": "error", "episode_index": 3,
             "feature": "observation.images.front"},
            {"check": "nan_inf", "severity": "warning", "episode_index": 2, "feature": "action"},
            {"check": "nan_inf", "severity": "error", "episode_index": 5, "feature": "action"},
        ]
    }  # fmt: skip
    assert [f["episode_index"] for f in quality.signal_findings(report)] == [5, 2]
    assert quality.camera_findings(report) == []
