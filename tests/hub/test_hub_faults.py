"""A remote v2.1 conversion from the Hub stand-in through a proxy that faults 2% of the
requests (robopipe.bench.latency.Faults, all five kinds): the jobs retry (robopipe.retry) and
the output is byte-identical to the fault-free conversion."""

import copy

import pytest
from test_hub_workflow import CONFIG

from robopipe.bench.latency import Faults, delaying_proxy

pytestmark = pytest.mark.slow

SEED = 6  # its draws fault the 5th request, then a few more among the first 150


def test_convert_through_faults_equals_the_fault_free_output(
    v21, v30, hub_standin, tmp_path, run_snakemake, file_tree
):
    hub = hub_standin({"local/demo": {"v2.1": v21}}, lfs=("*.mp4", "*.parquet"))
    config = copy.deepcopy(CONFIG)
    config["datasets"]["hubds"]["conversion"].update(read_timeout_s=1.0, retry_seconds=60)
    workdir = tmp_path / "work"
    workdir.mkdir()
    faults = Faults(0.02, stall_s=3.0, retry_after_s=1, seed=SEED)
    with delaying_proxy(hub.endpoint, 0, faults) as proxy:
        env = hub.client_env(tmp_path / "hf_home")
        # huggingface_hub's own clients (the listing, the Hub files' range reads) wait 1 s
        env.update(HF_ENDPOINT=proxy.url, HF_HUB_DOWNLOAD_TIMEOUT="1", HF_HUB_ETAG_TIMEOUT="1")
        run_snakemake(workdir, config, "convert", "--cores", "2", env=env)
        totals = proxy.totals()
    injected = {k: v for k, v in totals.items() if k.startswith("faults_") and v}
    assert injected, totals
    assert file_tree(workdir / "results/hubds/v3.0") == file_tree(v30)
