"""Each family of source is checked and planned by robopipe.workflow.source_jobs (check, plan,
parse_time_plan), and reaches a job as its config (pickled params)."""

import logging
import pickle
import shutil

import pytest

from robopipe.checks.parts import write_files
from robopipe.conversion.plan import make_plan, save_parse_time_plan, source_signature
from robopipe.conversion.serial import convert_dataset
from robopipe.formats.v21_reader import load_source
from robopipe.layout import PARSE_TIME_PLAN_FILE, SOURCE_MANIFEST
from robopipe.sources import LocalV21, LocalV30, RemoteV20, RemoteV21, open_source
from robopipe.workflow import source_jobs


@pytest.fixture(scope="module")
def v21(make_v21):
    return make_v21(episodes=3, cameras=1)


def test_a_v21_folder_is_checked_and_a_missing_file_named(v21, tmp_path):
    root = tmp_path / "ds"
    shutil.copytree(v21, root)
    source = open_source("ds", {"path": str(root)})
    assert type(source) is LocalV21
    report = source_jobs.check(source, threads=1)
    assert report.ok and report.doctor is None
    files = tmp_path / "check_files.json"
    write_files(report, files)
    mp4 = sorted(root.glob("videos/**/*.mp4"))[1]
    mp4.unlink()
    damaged = source_jobs.check(source, threads=1, files=files)
    assert not damaged.ok
    assert any(mp4.name in str(p) for p in damaged.problems), damaged.problems
    assert any(mp4.name in str(n) for n in damaged.notes), damaged.notes  # gone since


def test_a_v30_folder_is_checked_and_never_planned(v21, tmp_path):
    root = tmp_path / "v30"
    convert_dataset(v21, root, name="ds")
    source = open_source("ds", {"path": str(root), "episodes": [0, 2]})
    assert type(source) is LocalV30
    report = source_jobs.check(source, threads=1)
    assert report.ok, report.problems
    assert report.doctor is not None  # asked, and skipped without a peer interpreter
    with pytest.raises(NotImplementedError):
        source_jobs.plan(source)
    with pytest.raises(NotImplementedError):
        source_jobs.parse_time_plan(source)


def test_a_v21_folder_is_planned_reusing_the_parse_time_plan(v21, tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)  # the saved parse-time plan: results/ds/...
    source = open_source("ds", {"path": str(v21)})
    made = make_plan(load_source(v21, "ds"), source.options)
    assert source_jobs.plan(source) == made
    dag_plan = source_jobs.parse_time_plan(source)
    assert dag_plan.layout_digest() == made.layout_digest()
    saved = PARSE_TIME_PLAN_FILE.format(dataset="ds")
    save_parse_time_plan(dag_plan, source_signature(v21), saved)
    with caplog.at_level(logging.INFO, logger="robopipe.workflow.source_jobs"):
        assert source_jobs.plan(source).layout_digest() == made.layout_digest()
    assert "the parse-time plan: no source file changed" in caplog.text


@pytest.mark.parametrize("version", ["v2.1", "v2.0"])
def test_a_remote_v2_source_is_planned_from_its_listing(v21, tmp_path, monkeypatch, version):
    monkeypatch.chdir(tmp_path)  # its manifest and cache: results/ds/...
    root = tmp_path / "src"
    shutil.copytree(v21, root)
    if version == "v2.0":  # a v2.0 remote source is planned as a v2.1 one
        (root / "meta/episodes_stats.jsonl").unlink()
        info = (root / "meta/info.json").read_text().replace('"v2.1"', '"v2.0"')
        (root / "meta/info.json").write_text(info)
    source = open_source("ds", {"url": f"file://{root}"})
    assert type(source) is {"v2.1": RemoteV21, "v2.0": RemoteV20}[version]
    plan = source_jobs.plan(source)
    assert plan.source == str((tmp_path / SOURCE_MANIFEST.format(dataset="ds")).resolve())
    assert len(plan.episodes) == 3
    with pytest.raises(NotImplementedError):
        source_jobs.parse_time_plan(source)


def test_a_job_gets_the_source_as_its_config(v21):
    source = open_source("ds", {"path": str(v21)}, {"episodes_per_shard": 2})
    source_jobs.parse_time_plan(source)  # loads its metadata (source.v21) and options
    assert "v21" in source.__dict__
    copy = pickle.loads(pickle.dumps(source))
    assert type(copy) is LocalV21 and "v21" not in copy.__dict__
    assert (copy.name, copy.entry, copy.info) == (source.name, source.entry, source.info)
    assert copy.options == source.options
    assert copy.check_signatures() == source.check_signatures()
    assert len(pickle.dumps(source)) < 2_000
