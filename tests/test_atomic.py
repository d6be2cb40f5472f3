"""write_json writes json.dumps's bytes, whether it streams (indented) or not."""

import json

import pytest

from robopipe.atomic import write_json


@pytest.mark.parametrize("indent", [None, 1, 4])
def test_write_json_writes_the_bytes_of_json_dumps(tmp_path, indent):
    obj = {
        "text": ["é", "", None, True, 2.5, -(2**70)],
        "nested": {"empty": {}, "list": [[]]},
        "files": {f"videos/episode_{i:06d}.mp4": [i, i * 10**15] for i in range(300)},
    }
    write_json(tmp_path / "out.json", obj, indent=indent)
    expected = json.dumps(obj, indent=indent, ensure_ascii=False).encode()
    assert (tmp_path / "out.json").read_bytes() == expected
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no temporary left
