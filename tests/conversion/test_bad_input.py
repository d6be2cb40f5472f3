"""Bad input stops the conversion with an error naming the dataset, episode and file, and
nothing is published."""

import json
import shutil

import pytest

from robopipe.conversion.serial import convert_dataset
from robopipe.errors import DatasetError

EP = 3
PARQUET = f"data/chunk-000/episode_{EP:06d}.parquet"
MP4 = f"videos/chunk-000/observation.images.wrist/episode_{EP:06d}.mp4"


def _remove(root, rel):
    (root / rel).unlink()


def _corrupt(root, rel):
    (root / rel).write_bytes(b"PAR1 this is not a parquet file PAR1")


def _truncate(root, rel):
    path = root / rel
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _edit_json(rel, change):
    def edit(root, _):
        info = json.loads((root / rel).read_text())
        change(info)
        (root / rel).write_text(json.dumps(info))

    return edit


def _renumber_episode(root, _):
    lines = (root / "meta/episodes.jsonl").read_text().splitlines()
    ep = json.loads(lines[EP])
    ep["episode_index"] = 40
    lines[EP] = json.dumps(ep)
    (root / "meta/episodes.jsonl").write_text("\n".join(lines) + "\n")


def _swap_mp4(root, _):
    # episode 3's wrist video replaced by another episode's with another frame count
    episodes = [json.loads(line) for line in (root / "meta/episodes.jsonl").open()]
    other = next(e["episode_index"] for e in episodes if e["length"] != episodes[EP]["length"])
    shutil.copyfile(root / MP4.replace(f"{EP:06d}", f"{other:06d}"), root / MP4)


CASES = {
    "missing mp4": (_remove, MP4, EP, MP4, "video file is missing"),
    "missing parquet": (_remove, PARQUET, EP, PARQUET, "data file is missing"),
    "corrupt parquet": (_corrupt, PARQUET, EP, PARQUET, "unreadable parquet"),
    "truncated mp4": (_truncate, MP4, EP, MP4, "cannot read video|frames in the mp4"),
    "non-contiguous episodes": (
        _renumber_episode,
        None,
        40,
        "meta/episodes.jsonl",
        "episode 40 is out of range: info.json says total_episodes=6",
    ),
    "frame-count mismatch": (_swap_mp4, None, EP, MP4, r"frames in the mp4 but \d+ rows"),
    "info.json lacks fields": (
        _edit_json("meta/info.json", lambda i: i.pop("total_videos")),
        None,
        None,
        "meta/info.json",
        "lacks required field.*total_videos",
    ),
    "unknown codebase_version": (
        _edit_json("meta/info.json", lambda i: i.update(codebase_version="v2.0")),
        None,
        None,
        "meta/info.json",
        "unknown codebase_version 'v2.0'",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_reported_and_nothing_published(case, make_v21, tmp_path):
    damage, rel, episode, file, message = CASES[case]
    root = tmp_path / "src"
    shutil.copytree(make_v21(episodes=6, min_length=10, max_length=12), root)
    damage(root, rel)
    out = tmp_path / "v3.0"
    with pytest.raises(DatasetError, match=message) as caught:
        convert_dataset(root, out, name="broken")
    error = caught.value
    assert error.dataset == "broken"
    assert error.episode == episode
    assert error.file == file
    assert str(error).startswith("dataset 'broken'")
    assert not out.exists()
