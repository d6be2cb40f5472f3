"""The Snakemake path of a Hub source: `fetch`, then the `plan` checkpoint, then conversion."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow

SNAKEFILE = Path(__file__).resolve().parents[2] / "Snakefile"
CONFIG = {
    "datasets": {
        "hubds": {
            "repo_id": "local/demo",
            "revision": "v2.1",
            "conversion": {"video_file_size_in_mb": 0.02},  # as the v30 fixture
        }
    }
}


def _snakemake(workdir: Path, env: dict, target: str, *options: str) -> subprocess.CompletedProcess:
    config = workdir / "config.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    command = [sys.executable, "-m", "snakemake", "-s", str(SNAKEFILE), "-d", str(workdir), target]
    result = subprocess.run(
        [*command, "--configfile", str(config), *options], env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, f"snakemake failed:\n{result.stdout}\n{result.stderr}"
    return result


def _tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".snakemake_timestamp"
    }


def test_convert_fetches_from_hf_endpoint(v21, v30, hub_standin, net_log, tmp_path):
    hub = hub_standin({"local/demo": {"v2.1": v21}})
    env = net_log.env(hub.client_env(tmp_path / "hf_home"))
    workdir = tmp_path / "work"
    workdir.mkdir()

    dry = _snakemake(workdir, env, "convert", "-n", "--quiet", "rules")
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", dry.stdout, re.M))
    assert (counts["fetch"], counts["plan"]) == ("1", "1")
    assert "shard" not in counts  # the plan is a checkpoint: shards are known after the fetch
    assert hub.requests == []

    _snakemake(workdir, env, "convert", "--cores", "2")
    results = workdir / "results"
    assert (results / "hubds/v3.0/meta/info.json").is_file()
    assert _tree(results / "hubds/v3.0") == _tree(v30)
    assert "fetched local/demo@v2.1" in (results / "logs/hubds/fetch.log").read_text()
    assert (results / "benchmarks/hubds/fetch/fetch.tsv").is_file()
    downloads = [r for r in hub.requests if r.method == "GET" and "/resolve/" in r.path]
    assert len(downloads) == len(_tree(v21))
    net_log.assert_only_local()
