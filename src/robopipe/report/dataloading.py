"""Dataloading figures: throughput, latency, first batch, peak RSS, and one card per scenario.

Every figure takes the table of :func:`robopipe.report.tables.load_scenarios` (one row per
scenario, grouped by loader) and writes ``{stem}.svg`` and ``{stem}.png``.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from robopipe.report.figures import (
    WIDTH_IN,
    bar_figure,
    headroom,
    loader_colour,
    loader_legend,
    placeholder,
    save,
    scenario_bars,
)

NO_SCENARIOS = "no benchmark scenario was run for this dataset (config: bench)"
PERCENTILES = ("p50", "p95", "p99")


def ceiling_cores(workers) -> list[int]:
    """The core counts a set of scenarios decodes on: W workers use W cores, 0 workers the
    main process's one."""
    return sorted({max(int(w), 1) for w in workers}) or [1]


def _ceiling_lines(ax, ceiling: dict | None, cores: list[int] = (1,)) -> None:
    """Vertical lines at the decode ceiling times each core count used (random access solid,
    sequential dashed; darker for more cores)."""
    if ceiling is None:
        return
    lines = (
        ("random_frames_per_s_per_core", "random access", "-"),
        ("sequential_frames_per_s_per_core", "sequential", "--"),
    )
    for i, n in enumerate(cores):
        shade = str(0.55 * (1 - (i + 1) / len(cores)))  # the largest count in black
        for key, name, style in lines:
            value = ceiling.get(key)
            if value:
                label = f"decode ceiling x {n} core{'s' if n > 1 else ''}, {name}: "
                label += f"{value * n:,.0f} frames/s"
                ax.axvline(value * n, color=shade, linestyle=style, linewidth=1.2, label=label)


def throughput(table: pd.DataFrame, ceiling: dict | None, stem: str | Path, dataset: str):
    """Samples/s and decoded frames/s per node per scenario, the decode ceiling as lines; a
    remote scenario's name carries its source and injected round trip ("http, 20 ms")."""
    title = f"{dataset}: dataloading throughput"
    if table.empty:
        return placeholder(stem, title, NO_SCENARIOS)
    fig, (left, right) = bar_figure(len(table), panels=2)
    names = [
        row["scenario"] + (f" ({net})" if (net := network_label(row)) else "")
        for _, row in table.iterrows()
    ]
    scenario_bars(left, table, "samples_per_s", names=names)
    left.set_xlabel("samples/s (all nodes, steady window)")
    scenario_bars(right, table, "frames_per_s_per_node", names=names)
    right.set_xlabel("decoded frames/s per node")
    cores = ceiling_cores(table["workers"])
    _ceiling_lines(right, ceiling, cores)
    if ceiling is not None:
        peak = max(table["frames_per_s_per_node"].max(skipna=True) or 0, 0)
        top = max((ceiling.get("sequential_frames_per_s_per_core") or 0) * cores[-1], peak)
        right.set_xlim(0, max(right.get_xlim()[1], top * 1.18))
    fig.suptitle(title)
    loader_legend(fig, table["loader"], right)
    return save(fig, stem)


def network_label(row: pd.Series) -> str | None:
    """``"http, 20 ms"``: a remote scenario's source and the round trip the benchmark
    injected; ``"http"`` where the result does not say; None for a local source."""
    if row["source"] == "local":
        return None
    rtt = row.get("network_latency_ms")
    return row["source"] if _missing(rtt) else f"{row['source']}, {rtt:,.0f} ms"


def latency(table: pd.DataFrame, stem: str | Path, dataset: str):
    """Per-sample latency p50/p95/p99 (ms) per scenario; log scale when they span > 30x."""
    title = f"{dataset}: per-sample latency"
    if table.empty:
        return placeholder(stem, title, NO_SCENARIOS)
    fig, (ax,) = bar_figure(int(len(table) * 1.6), panels=1)
    height = 0.8 / len(PERCENTILES)
    shades = {"p50": 1.0, "p95": 0.65, "p99": 0.35}
    for i, q in enumerate(PERCENTILES):
        values = table[f"latency_{q}_ms"]
        y = [r - 0.4 + height * (i + 0.5) for r in range(len(table))]
        colours = [(*loader_colour(lo)[:3], shades[q]) for lo in table["loader"]]
        bars = ax.barh(y, values.fillna(0), height=height, color=colours, label=q)
        labels = [f"{q} n/a" if pd.isna(v) else f"{q} {v:,.1f}" for v in values]
        ax.bar_label(bars, labels=labels, padding=3, fontsize=7)
    ax.set_yticks(range(len(table)), table["scenario"])
    ax.set_ylim(len(table) - 0.5, -0.5)
    positive = table[[f"latency_{q}_ms" for q in PERCENTILES]].stack()
    positive = positive[positive > 0]
    if len(positive) and positive.max() / positive.min() > 30:
        ax.set_xscale("log")
        ax.set_xlabel("latency per sample, ms (log scale)")
    else:
        ax.set_xlabel("latency per sample, ms")
    headroom(ax, 1.25)
    fig.suptitle(f"{title} (bars per scenario: p50, p95, p99; lighter = higher percentile)")
    loader_legend(fig, table["loader"])
    return save(fig, stem)


def first_batch(table: pd.DataFrame, stem: str | Path, dataset: str):
    """Time from iterator creation to the first batch (s) per scenario."""
    return _metric_figure(
        table, stem, f"{dataset}: first-batch latency", "first_batch_latency_s",
        "time to the first batch, s", fmt="{:,.2f}",
    )  # fmt: skip


def peak_rss(table: pd.DataFrame, stem: str | Path, dataset: str):
    """Peak memory of the benchmark's process tree (MB) per scenario, per rank (the largest
    rank's for multi-node scenarios, whose totals are in ``peak_rss_total_mb`` and
    ``peak_pss_total_mb``): two bars, the RSS sum (a page shared by several processes
    counted in each) and the PSS (shared pages counted once; ``robopipe.bench.rss``), ``n/a``
    for results without it."""
    title = f"{dataset}: peak memory of the dataloading process tree, per rank"
    if table.empty:
        return placeholder(stem, title, NO_SCENARIOS)
    fig, (ax,) = bar_figure(int(len(table) * 1.3), panels=1)
    height = 0.4
    measures = (("RSS", "peak_rss_mb", 0.45), ("PSS", "peak_pss_mb", 1.0))
    for i, (name, column, shade) in enumerate(measures):
        values = table[column]
        y = [r - 0.4 + height * (i + 0.5) for r in range(len(table))]
        colours = [(*loader_colour(lo)[:3], shade) for lo in table["loader"]]
        bars = ax.barh(y, values.fillna(0), height=height, color=colours)
        labels = [f"{name} n/a" if pd.isna(v) else f"{name} {v:,.0f}" for v in values]
        ax.bar_label(bars, labels=labels, padding=3, fontsize=7)
    ax.set_yticks(range(len(table)), table["scenario"])
    ax.set_ylim(len(table) - 0.5, -0.5)
    ax.set_xlabel(
        "peak memory per rank (main process and its workers; n2: the largest rank), MB:"
        " RSS summed (shared pages once per process), PSS (shared pages once)"
    )
    headroom(ax, 1.3)
    fig.suptitle(f"{title} (bars per scenario: RSS, lighter; PSS)")
    loader_legend(fig, table["loader"])
    return save(fig, stem)


def _metric_figure(table, stem, title: str, column: str, xlabel: str, **bar_options):
    """One bar per scenario of ``table[column]``, coloured by loader."""
    if table.empty:
        return placeholder(stem, title, NO_SCENARIOS)
    fig, (ax,) = bar_figure(len(table))
    scenario_bars(ax, table, column, **bar_options)
    ax.set_xlabel(xlabel)
    fig.suptitle(title)
    loader_legend(fig, table["loader"])
    return save(fig, stem)


def scenario_card(row: pd.Series, ceiling: dict | None, stem: str | Path):
    """One scenario: decoded frames/s per rank, latency percentiles, and time shares; the
    title lists its facts, its start apart from its measuring (:func:`start_facts`), and for
    a remote scenario the injected round trip and the bytes and requests per sample."""
    fig, (ranks_ax, latency_ax, share_ax) = plt.subplots(
        1, 3, figsize=(WIDTH_IN, 3.4), layout="constrained", width_ratios=(1.3, 1, 1)
    )
    colour = loader_colour(row["loader"])
    ranks = row["ranks"] or []
    names = [f"rank {r['rank']}" for r in ranks]
    rates = [r.get("frames_per_s") or 0 for r in ranks]
    ranks_ax.barh(range(len(ranks)), rates, color=colour, height=0.6)
    ranks_ax.set_yticks(range(len(ranks)), names)
    ranks_ax.set_ylim(len(ranks) - 0.5, -0.5)
    ranks_ax.set_xlabel("decoded frames/s per rank")
    ranks_ax.set_title("throughput per rank")
    _ceiling_lines(ranks_ax, ceiling, ceiling_cores([row["workers"]]))
    ranks_ax.set_xlim(0, ranks_ax.get_xlim()[1] * 1.1)
    if ceiling is not None:
        handles, labels = ranks_ax.get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower left", ncols=2, fontsize=8)

    values = [row[f"latency_{q}_ms"] for q in PERCENTILES]
    bars = latency_ax.bar(PERCENTILES, [0 if pd.isna(v) else v for v in values], color=colour)
    latency_ax.bar_label(bars, labels=["n/a" if pd.isna(v) else f"{v:,.1f}" for v in values])
    latency_ax.set_ylabel("latency per sample, ms")
    latency_ax.set_title("latency percentiles")
    latency_ax.set_ylim(0, max(latency_ax.get_ylim()[1], 1e-9) * 1.15)

    fetch = 0 if pd.isna(row["fetch_share"]) else row["fetch_share"]
    decode = 0 if pd.isna(row["decode_share"]) else row["decode_share"]
    other = max(0.0, 1.0 - fetch - decode)
    left = 0.0
    shares = (("fetch", fetch, 1.0), ("decode", decode, 0.6), ("other", other, 0.25))
    for name, share, alpha in shares:
        share_ax.barh([0], [share], left=left, color=colour, alpha=alpha, label=name)
        if share >= 0.08:
            share_ax.text(left + share / 2, 0, f"{name}\n{share:.0%}", ha="center", va="center")
        left += share
    share_ax.set_xlim(0, 1)
    share_ax.set_yticks([])
    share_ax.set_xlabel("share of the worker's time")
    share_ax.set_title("where the time goes")

    lines = (_card_facts(row), start_facts(row), _network_facts(row), _peer_facts(row))
    facts = "\n".join(f for f in lines if f)
    fig.suptitle(f"{row['dataset']}: {row['scenario']}\n{facts}", fontsize=9)
    return save(fig, stem)


def _card_facts(row: pd.Series) -> str:
    facts = [
        f"{row['samples_per_s']:,.0f} samples/s" if pd.notna(row["samples_per_s"]) else None,
        f"first batch {row['first_batch_latency_s']:,.2f} s"
        if pd.notna(row["first_batch_latency_s"])
        else None,
        f"peak RSS {row['peak_rss_mb']:,.0f} MB" if pd.notna(row["peak_rss_mb"]) else None,
        f"PSS {row['peak_pss_mb']:,.0f} MB" if pd.notna(row.get("peak_pss_mb")) else None,
        f"batch {row['batch_size']:.0f} x {row['image_dtype']}",
        f"shuffle randomness {row['shuffle_randomness']:.2f}"
        if pd.notna(row["shuffle_randomness"])
        else None,
        f"device {row['device']}" + (", CPU fallback" if row["cpu_fallback"] is True else ""),
    ]
    return " | ".join(f for f in facts if f)


def start_facts(row: pd.Series) -> str | None:
    """The scenario's start, apart from its measuring: ``dispatch`` (the SLURM job's start to
    the first batch asked for; ``n/a`` outside SLURM) with the process's own start-up to that
    moment, the steady window measured, and for a multi-node scenario the ranks' start skew;
    None for a result written before these fields."""
    dispatch, startup = row.get("dispatch_s"), row.get("startup_to_measure_s")
    if _missing(dispatch) and _missing(startup):
        return None
    own = "" if _missing(startup) else f"; process start to measuring {startup:,.1f} s"
    if _missing(dispatch):
        facts = [f"dispatch n/a (no SLURM job{own})"]
    else:
        facts = [f"dispatch {dispatch:,.1f} s (SLURM job start to measuring{own})"]
    facts.append(f"measured: steady window {row['steady_wall_s']:,.1f} s")
    if row["nodes"] > 1:
        skew = row.get("start_skew_s")
        facts.append(
            "ranks' start skew n/a" if _missing(skew) else f"ranks' start skew {skew * 1e3:,.0f} ms"
        )
    return " | ".join(facts)


def _peer_facts(row: pd.Series) -> str:
    """Whose loader: ``robopipe``, or ``peer: <package> <version>`` and whether its items
    equalled robopipe's."""
    if not row.get("peer"):
        return "robopipe"
    version = row.get("peer_version")
    equal = row.get("peer_items_equal")
    checked = "not compared" if _missing(equal) else ("equal" if equal else "DIFFERENT")
    return (
        f"peer: {'version n/a' if _missing(version) else version} | items vs robopipe's: {checked}"
    )


def _network_facts(row: pd.Series) -> str | None:
    """A remote scenario's network line (``n/a`` where the result does not say); None for a
    local scenario that measured no traffic."""
    per_sample = (row.get("bytes_per_sample"), row.get("requests_per_sample"))
    measured = any(v is not None and pd.notna(v) for v in per_sample)
    if row["source"] == "local" and not measured:
        return None
    rtt = row.get("network_latency_ms")
    wait = row.get("network_wait_share")
    byte_count, requests = per_sample
    facts = [
        f"network: {row['source']}",
        "injected round trip n/a" if _missing(rtt) else f"injected round trip {rtt:,.0f} ms",
        "bytes/sample n/a" if _missing(byte_count) else f"{_size(byte_count)}/sample",
        "requests/sample n/a" if _missing(requests) else f"{requests:,.2f} requests/sample",
        "waiting n/a" if _missing(wait) else f"{wait:.0%} of wall time waiting on the network",
    ]
    rate, retries = row.get("fault_rate"), row.get("retries")
    if not _missing(rate) and rate:
        injected = row.get("faults_injected")
        facts.append(
            f"faults {rate:.1%} of requests ({row.get('fault_kinds')}): "
            + ("n/a" if _missing(injected) else f"{injected:,.0f} injected")
        )
    if not _missing(retries):
        facts.append(f"{retries:,.0f} retries")
    return " | ".join(facts)


def _missing(value) -> bool:
    return value is None or pd.isna(value)


def _size(n: float) -> str:
    """Bytes in B, kB, MB or GB (powers of 1000)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n:,.0f} B"
