"""Real servers on 127.0.0.1: nginx serves files with Range requests and counts its traffic;
the runner's remote sources go through them (and through the latency proxy when asked)."""

import time
import urllib.error
import urllib.request

import fsspec
import jsonschema
import pytest

from robopipe.bench import servers
from robopipe.bench.runner import Settings, run_scenario, source_url
from robopipe.bench.scenarios import parse_scenario
from robopipe.bench.servers import serve_nginx
from robopipe.scenario_result import scenario_schema

needs_nginx = pytest.mark.skipif(
    servers.nginx_binary() is None,
    reason="nginx is not installed (bash tools/install.sh installs it)",
)
QUICK = Settings(batch_size=4, warmup_batches=2, steady_s=0.5, probe_samples=8, shuffle_buffer=16)


@pytest.fixture
def files(tmp_path):
    root = tmp_path / "root"
    (root / "ds/videos").mkdir(parents=True)
    data = bytes(range(256)) * 4000  # 1,024,000 bytes
    (root / "ds/videos/a.mp4").write_bytes(data)
    return root, data


def get(url, **headers):
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers)) as response:
        return response.status, dict(response.headers), response.read()


@needs_nginx
def test_nginx_serves_ranges_and_counts_them(files):
    root, data = files
    with serve_nginx(root) as server:
        assert server.url.startswith("http://127.0.0.1:")
        status, headers, body = get(f"{server.url}/ds/videos/a.mp4", Range="bytes=1000-1999")
        assert status == 206 and body == data[1000:2000]
        assert headers["Content-Range"] == f"bytes 1000-1999/{len(data)}"
        status, _, body = get(f"{server.url}/ds/videos/a.mp4", Range="bytes=-10")
        assert status == 206 and body == data[-10:]
        status, headers, body = get(f"{server.url}/ds/videos/a.mp4")
        assert status == 200 and body == data and headers["Accept-Ranges"] == "bytes"
        for path in ("/ds/videos/", "/ds/missing.mp4"):
            with pytest.raises(urllib.error.HTTPError) as err:
                get(server.url + path)
            assert err.value.code == 404  # no listings
        totals = server.totals()
        assert totals["requests"] == 5
        body_bytes = 1000 + 10 + len(data)
        assert body_bytes < totals["bytes_fetched"] < body_bytes + 5 * 1000  # plus headers
        request = urllib.request.Request(f"{server.url}/ds/x", data=b"1", method="PUT")
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(request)
        assert err.value.code == 403  # read-only
        process = server.process
    assert process.poll() is not None  # stopped with the block
    assert not (root / "ds/x").exists()


def test_missing_nginx_says_how_to_install_it(files, monkeypatch):
    monkeypatch.setattr(servers.shutil, "which", lambda name: None)
    monkeypatch.setattr(servers.os, "access", lambda path, mode: False)
    message = r"nginx is not installed: `bash tools/install.sh`"
    with pytest.raises(RuntimeError, match=message), serve_nginx(files[0]):
        pass


@needs_nginx
@pytest.mark.parametrize("latency_ms", [0, 10])
@pytest.mark.parametrize("source", ["http", "s3"])
def test_remote_scenarios_record_traffic_and_latency(v30, source, latency_ms):
    settings = Settings(**{**QUICK.__dict__, "latency_ms": latency_ms})
    result = run_scenario("tiny", v30, f"robopipe_map_{source}_single_cpu_w0_n1", settings)
    jsonschema.validate(result, scenario_schema())
    assert result["network_latency_ms"] == latency_ms
    # the tiny dataset's files are all open after warm-up: the window may fetch nothing
    assert result["bytes_fetched"] >= 0 and result["requests"] >= 0
    assert result["bytes_per_sample"] == pytest.approx(result["bytes_fetched"] / result["samples"])
    assert result["requests_per_sample"] == pytest.approx(result["requests"] / result["samples"])


@needs_nginx
@pytest.mark.parametrize("latency_ms", [0, 40])
@pytest.mark.parametrize("source", ["http", "s3"])
def test_sources_are_read_through_the_counted_path(v30, source, latency_ms):
    """The loader's URL and options lead through what counts (and delays) the traffic."""
    settings = Settings(latency_ms=latency_ms)
    scenario = parse_scenario(f"robopipe_map_{source}_single_cpu_w0_n1")
    path = "meta/info.json"
    size = (v30 / path).stat().st_size
    with source_url(scenario, "tiny", v30, settings) as (url, options, traffic, _):
        fs, root = fsspec.core.url_to_fs(url, **(options or {}))
        start = time.perf_counter()
        assert fs.cat_file(f"{root}/{path}") == (v30 / path).read_bytes()
        took = time.perf_counter() - start
        totals = traffic.totals()
    assert totals["requests"] >= 1 and totals["bytes_fetched"] >= size
    assert took >= 0.035 if latency_ms else True


def test_local_scenarios_have_no_network(v30):
    result = run_scenario("tiny", v30, "robopipe_map_local_single_cpu_w0_n1", QUICK)
    assert result["network_latency_ms"] is None
    assert result["bytes_fetched"] is None and result["requests_per_sample"] is None


def test_latency_needs_an_endpoint_on_this_machine(v30):
    settings = Settings(
        **{**QUICK.__dict__, "latency_ms": 20, "sources": {"http": "https://example.org/{dataset}"}}
    )
    with pytest.raises(
        ValueError, match="latency_ms and bench.fault_rate need the http source on a plain http://"
    ):
        run_scenario("tiny", v30, "robopipe_map_http_single_cpu_w0_n1", settings)


@pytest.fixture
def quiet_hf(monkeypatch, tmp_path):
    """huggingface_hub contacting no host but the stand-in (as tests/hub's ``hf_client``)."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf_home" / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)


@pytest.mark.parametrize("latency_ms", [0, 40])
def test_the_hub_stand_in_is_reached_through_the_proxy(v30, quiet_hf, latency_ms):
    from robopipe.harness.hub_standin import serve_hub

    with serve_hub({"local/tiny": {"v3.0": v30}}) as hub:
        settings = Settings(
            **{
                **QUICK.__dict__,
                "latency_ms": latency_ms,
                "sources": {"hf": hub.url("local/tiny", "v3.0")},
                "storage_options": {"hf": {"endpoint": hub.endpoint}},
            }
        )
        scenario = parse_scenario("robopipe_map_hf_single_cpu_w0_n1")
        path = "meta/info.json"
        with source_url(scenario, "tiny", v30, settings) as (url, options, traffic, _):
            assert options["endpoint"] != hub.endpoint  # the proxy's
            fs, root = fsspec.core.url_to_fs(url, **options)
            start = time.perf_counter()
            assert fs.cat_file(f"{root}/{path}") == (v30 / path).read_bytes()
            took = time.perf_counter() - start
            totals = traffic.totals()
        assert totals["requests"] >= 1 and totals["bytes_fetched"] >= (v30 / path).stat().st_size
        assert took >= 0.035 if latency_ms else True
        result = run_scenario("tiny", v30, scenario.name, settings)
    jsonschema.validate(result, scenario_schema())
    assert result["network_latency_ms"] == latency_ms and result["bytes_fetched"] >= 0
