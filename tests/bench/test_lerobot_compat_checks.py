"""robopipe.harness.lerobot_compat's comparisons of two v3.0 outputs, and the lerobot converter's
command (robopipe.harness.lerobot_convert); the comparison with lerobot's own output, which needs
the lerobot environment, is tests/conversion/test_lerobot_compat.py."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from robopipe.harness.lerobot_compat import (
    check_data,
    check_episodes,
    check_files,
    check_info,
    check_stats,
    check_tasks,
    check_videos,
    sample_indices,
)
from robopipe.harness.lerobot_convert import lerobot_convert_command


def _checks(ref, out) -> dict[str, list[str]]:
    fps = json.loads((out / "meta/info.json").read_text())["fps"]
    notes: list[str] = []
    return {
        "files": check_files(ref, out),
        "info": check_info(ref, out),
        "tasks": check_tasks(ref, out),
        "episodes": check_episodes(ref, out, False, notes),
        "stats": check_stats(ref, out, False, notes),
        "data": check_data(ref, out, False, fps, notes),
        "videos": check_videos(ref, out),
    }


def test_an_output_equals_itself_and_its_damage_is_named(v30, tmp_path):
    assert not any(_checks(v30, v30).values())
    out = shutil.copytree(v30, tmp_path / "out")
    info = json.loads((out / "meta/info.json").read_text())
    (out / "meta/info.json").write_text(json.dumps({**info, "robot_type": "other"}))
    data = sorted(out.glob("data/*/*.parquet"))[0]
    table = pq.read_table(data)
    at = table.schema.get_field_index("frame_index")
    shifted = pc.add(table["frame_index"], pa.scalar(1, table["frame_index"].type))
    pq.write_table(table.set_column(at, table.schema.field(at), shifted), data)
    (out / "extra.txt").write_text("")
    problems = _checks(v30, out)
    assert problems["files"] == ["extra: extra.txt"]
    assert problems["info"] == [f"info.robot_type: 'other' != expected {info['robot_type']!r}"]
    assert len(problems["data"]) == 1 and "frame_index: values differ" in problems["data"][0]
    assert not problems["episodes"] and not problems["videos"]


def test_first_and_last_frames_of_every_episode_are_sampled(v30):
    info = json.loads((v30 / "meta/info.json").read_text())
    indices = sample_indices(v30, random_count=0, seed=0)
    assert indices[0] == 0 and indices[-1] == info["total_frames"] - 1
    assert len(indices) == 2 * info["total_episodes"]


def test_the_cli_converts_whole_mb_and_python_the_rest(tmp_path):
    cli = lerobot_convert_command("py", tmp_path, 100, 200, 1000)
    assert cli[:3] == ["py", "-m", "lerobot.scripts.convert_dataset_v21_to_v30"]
    assert "--data-file-size-in-mb=100" in cli and "--video-file-size-in-mb=200" in cli
    code = lerobot_convert_command("py", tmp_path, 0.5, 200, 3)
    assert code[:2] == ["py", "-c"] and "c.DEFAULT_CHUNK_SIZE = 3" in code[2]
    assert "data_file_size_in_mb=0.5" in code[2]
