"""load_source names what is wrong with a v2.1 folder's metadata as what it is."""

import json
import shutil

import pytest

from robopipe.errors import DatasetError
from robopipe.formats.v21_reader import load_source, normalise_template


@pytest.fixture
def root(make_v21, tmp_path):
    return shutil.copytree(make_v21(episodes=4), tmp_path / "src")


def _lines(root):
    return (root / "meta/episodes.jsonl").read_text().splitlines()


def test_a_duplicated_line_is_named_as_such(root):
    lines = _lines(root)
    (root / "meta/episodes.jsonl").write_text("\n".join([*lines, lines[2]]) + "\n")
    with pytest.raises(DatasetError, match="episode 2 is listed 2 times") as caught:
        load_source(root, "x")
    assert (caught.value.episode, caught.value.file) == (2, "meta/episodes.jsonl")


def test_a_missing_line_is_named_as_such(root):
    (root / "meta/episodes.jsonl").write_text("\n".join(_lines(root)[:3]) + "\n")
    with pytest.raises(DatasetError, match="episode 3 is not listed .*skip_episodes"):
        load_source(root, "x")


def test_a_v30_source_is_named_as_such(root):
    info = json.loads((root / "meta/info.json").read_text())
    for key in ("total_chunks", "total_videos"):
        info.pop(key)
    info["codebase_version"] = "v3.0"
    (root / "meta/info.json").write_text(json.dumps(info))
    with pytest.raises(DatasetError, match="already LeRobot v3.0, there is nothing to convert"):
        load_source(root, "x")


def test_other_placeholder_names_need_the_repair(root):
    info = json.loads((root / "meta/info.json").read_text())
    info["video_path"] = info["video_path"].replace("{video_key}", "{camera}")
    (root / "meta/info.json").write_text(json.dumps(info))
    with pytest.raises(DatasetError, match=r"\{camera\}; set `template_placeholders: true`"):
        load_source(root, "x")
    source = load_source(root, "x", template_placeholders=True)
    assert source.video_file(1, "cam").name == "episode_000001.mp4"
    assert source.video_file(1, "cam").parent.name == "cam"


def test_normalise_template_keeps_format_specs():
    assert (
        normalise_template("data/chunk-{chunk_index:03d}/ep_{episode:06d}_{{x}}.parquet")
        == "data/chunk-{episode_chunk:03d}/ep_{episode_index:06d}_{{x}}.parquet"
    )
