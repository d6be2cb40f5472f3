"""peers.csv: robopipe's fastest loader against the fastest peer per source, on the same
frames, and the peers a run skipped."""

import pandas as pd
import pytest

from robopipe.report.dataloading import _peer_facts
from robopipe.report.peers import peers_table


def _run(loader, source, rate, *, peer, encoding=None, mode="single", workers=2, **extra):
    return {
        "loader": loader, "source": source, "mode": mode, "workers": workers, "nodes": 1,
        "decode": "cpu", "encoding": encoding, "samples_per_s": rate, "peer": peer,
        "peer_version": extra.get("version"), "peer_items_equal": extra.get("equal"),
    }  # fmt: skip


def test_robopipe_against_the_best_peer_per_source():
    table = pd.DataFrame(
        [
            _run("robopipe_map", "local", 500.0, peer=False),
            _run("robopipe_stream", "local", 400.0, peer=False),
            _run("robopipe_map", "local", 900.0, peer=False, encoding="jpeg90"),  # other frames
            _run("lerobot_map", "local", 390.0, peer=True, version="lerobot 0.6.1", equal=True),
            _run(
                "lancedb_map",
                "local",
                220.0,
                peer=True,
                encoding="lance",
                version="lerobot-lancedb 0.3.1",
                equal=True,
            ),  # fmt: skip
            _run("lancedb_map", "s3", 100.0, peer=True, encoding="lance"),
            _run("robopipe_map", "s3", 300.0, peer=False),
            _run("robopipe_stream", "http", 250.0, peer=False),
            _run("robomimic_hdf5_all", "local", 950.0, peer=False),  # reads the HDF5 file
        ]
    )
    peers = peers_table(table, {"lerobot_stream": "no peer environment"})
    rows = peers.set_index(["source", "mode", "workers"], drop=False)
    local = rows.loc[("local", "single", 2)]
    assert (local["robopipe_loader"], local["robopipe_samples_per_s"]) == ("robopipe_map", 500)
    assert (local["peer_loader"], local["peer_version"]) == ("lerobot_map", "lerobot 0.6.1")
    assert local["robopipe_over_peer"] == pytest.approx(500 / 390) and local["peer_items_equal"]
    assert rows.loc[("s3", "single", 2), "robopipe_over_peer"] == pytest.approx(3)
    http = rows.loc[("http", "single", 2)]
    assert pd.isna(http["peer_loader"]) and http["note"] == "no peer run"
    assert list(peers["source"].iloc[:3]) == ["local", "http", "s3"]
    skipped = peers.iloc[-1]
    assert skipped["peer_loader"] == "lerobot_stream"
    assert skipped["note"] == "skipped: no peer environment"


def test_a_card_says_whose_loader_it_is():
    assert _peer_facts(pd.Series({"peer": False})) == "robopipe"
    card = _peer_facts(
        pd.Series({"peer": True, "peer_version": "lerobot 0.6.1", "peer_items_equal": False})
    )
    assert card == "peer: lerobot 0.6.1 | items vs robopipe's: DIFFERENT"
    unchecked = pd.Series({"peer": True, "peer_version": None, "peer_items_equal": None})
    assert _peer_facts(unchecked) == "peer: version n/a | items vs robopipe's: not compared"
