"""load_source names what is wrong with a v2.1 folder's metadata as what it is."""

import json
import shutil

import pytest

from robopipe.errors import DatasetError
from robopipe.formats.v21_reader import load_source, normalise_template, read_episode_lines


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


def test_episode_lines_are_the_files_lines_sorted_and_parsed_on_demand(tmp_path):
    lines = [
        {"length": 5, "episode_index": 1, "tasks": ["b", "c"], "extra": 1.0},
        {"episode_index": 0, "tasks": ["a"], "length": 3},
    ]
    (tmp_path / "episodes.jsonl").write_text(
        "\n".join(json.dumps(line) for line in lines) + "\n\n  \n"
    )
    read = read_episode_lines(tmp_path, "episodes.jsonl", "x")
    assert list(read) == lines and read.heads == [(1, True), (0, True)]
    assert [list(line) for line in read] == [list(line) for line in lines]  # key order kept
    assert type(read[0]["extra"]) is float and read[-1] == lines[1]
    assert list(read.take([1, 0])) == [lines[1], lines[0]]


def test_an_episode_line_that_is_not_an_object_is_named(tmp_path):
    (tmp_path / "episodes.jsonl").write_text('{"episode_index": 0, "length": 1}\n[1]\n')
    with pytest.raises(DatasetError, match="line 2 is not a JSON object"):
        read_episode_lines(tmp_path, "episodes.jsonl", "x")


def test_sorted_episodes_keep_each_line(root):
    lines = _lines(root)
    (root / "meta/episodes.jsonl").write_text("\n".join(reversed(lines)) + "\n")
    source = load_source(root, "x")
    assert [e["episode_index"] for e in source.episodes] == [0, 1, 2, 3]
    assert list(source.episodes) == [json.loads(line) for line in lines]
