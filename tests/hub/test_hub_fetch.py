"""robopipe.hub.fetch_dataset against the Hub stand-in: the files, the errors, no other host."""

import pytest

from robopipe.errors import DatasetError
from robopipe.hub import fetch_dataset

TOPS = ("meta", "data", "videos")


def _dataset_files(tree: dict[str, str]) -> dict[str, str]:
    """The meta/, data/ and videos/ entries of a ``file_tree`` (what a fetch downloads)."""
    return {path: digest for path, digest in tree.items() if path.split("/")[0] in TOPS}


def test_fetch_downloads_meta_data_and_videos(
    repo, hub_standin, net_log, hf_client, tmp_path, file_tree
):
    main = tmp_path / "main"  # the default branch holds something else
    (main / "meta").mkdir(parents=True)
    (main / "meta/info.json").write_text('{"codebase_version": "v3.0"}')
    hub = hub_standin({"local/demo": {"main": main, "v2.1": repo}}, page_size=5)
    output = tmp_path / "out" / "hub"
    fetch_dataset("local/demo", "v2.1", output, endpoint=hub.endpoint)

    expected = _dataset_files(file_tree(repo))
    assert len([p for p in expected if p.startswith("videos/")]) == 16  # 8 episodes x 2 cameras
    assert file_tree(output) == expected
    assert not (output / "README.md").exists() and not (output / ".gitattributes").exists()
    assert sorted(p.name for p in output.parent.iterdir()) == ["hub"]
    downloaded = {
        r.path.split("/resolve/", 1)[1].split("/", 1)[1]
        for r in hub.requests
        if r.method == "GET" and "/resolve/" in r.path and r.status == 200
    }
    assert downloaded == set(expected)
    ref = hf_client / "datasets--local--demo/refs/v2.1"
    assert ref.read_text() == hub.sha("local/demo", "v2.1")
    net_log.assert_only_local()


@pytest.mark.parametrize(
    ("repo_id", "revision", "what"),
    [
        ("local/demo", "v9.9", "revision"),
        ("local/absent", "v2.1", "dataset repository"),
    ],
)
def test_unknown_revision_or_repo_is_an_error_and_leaves_nothing(
    repo_id, revision, what, v21, hub_standin, hf_client, tmp_path
):
    hub = hub_standin({"local/demo": {"v2.1": v21}})
    output = tmp_path / "out" / "hub"
    with pytest.raises(DatasetError) as raised:
        fetch_dataset(repo_id, revision, output, name="hubds", endpoint=hub.endpoint)
    assert str(raised.value) == (
        f"dataset 'hubds': {what} not found on the Hub: {repo_id}@{revision}"
    )
    assert list(output.parent.iterdir()) == []
    assert not any("/resolve/" in r.path for r in hub.requests)
