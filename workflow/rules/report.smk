# The report: figures (SVG in the HTML report, PNG for the README) and tables from the
# benchmark results and the conversion rules' benchmark: files.
#
# Granularity: report() labels are per output file, so each dataset gets one figure per kind
# (category Dataloading, Scaling or Conversion; subcategory = the dataset; label "figure"), and
# one card per benchmark scenario, registered through a directory pattern whose wildcards are
# the scenario's loader, source, mode, decode, workers and nodes: the HTML report lists the
# cards as a table with one column per wildcard, and its search filters them.
#
# From common.smk: dataset_names(), and report_inputs(wildcards) -> {"bench": [scenario JSONs],
# "ceilings": [ceiling JSON], "conversion": [benchmark TSVs], "lerobot": [existing JSONs]}.

from robopipe.bench.scenarios import snakemake_pattern

# One dataset's figures, each an SVG (registered below) and a PNG; robopipe.report.FIGURES.
REPORT_FIGURES = [
    "throughput",
    "latency",
    "first_batch",
    "peak_rss",
    "scaling_workers",
    "scaling_nodes",
    "conversion_rules",
    "conversion_shards",
    "lerobot_convert",
    "copies",
    "paper_cache_modes",
    "paper_batch_size",
    "paper_seq_length",
]
# Scenario cards, {loader}_{source}_{mode}[_e{encoding}]_{decode}_w{workers}_n{nodes}.svg: the
# grammar of robopipe.bench.scenarios, the one place it is defined.
REPORT_SCENARIO_CARD = snakemake_pattern(".svg")


rule report_dataset:
    input:
        unpack(report_inputs),
    output:
        throughput=report(
            "results/report/{dataset}/throughput.svg",
            caption="../report/throughput.rst",
            category="Dataloading",
            subcategory="{dataset}",
            labels={"figure": "throughput"},
        ),
        latency=report(
            "results/report/{dataset}/latency.svg",
            caption="../report/latency.rst",
            category="Dataloading",
            subcategory="{dataset}",
            labels={"figure": "latency p50/p95/p99"},
        ),
        first_batch=report(
            "results/report/{dataset}/first_batch.svg",
            caption="../report/first_batch.rst",
            category="Dataloading",
            subcategory="{dataset}",
            labels={"figure": "first-batch latency"},
        ),
        peak_rss=report(
            "results/report/{dataset}/peak_rss.svg",
            caption="../report/peak_rss.rst",
            category="Dataloading",
            subcategory="{dataset}",
            labels={"figure": "peak RSS"},
        ),
        scaling_workers=report(
            "results/report/{dataset}/scaling_workers.svg",
            caption="../report/scaling_workers.rst",
            category="Scaling",
            subcategory="{dataset}",
            labels={"figure": "workers"},
        ),
        scaling_nodes=report(
            "results/report/{dataset}/scaling_nodes.svg",
            caption="../report/scaling_nodes.rst",
            category="Scaling",
            subcategory="{dataset}",
            labels={"figure": "nodes"},
        ),
        conversion_rules=report(
            "results/report/{dataset}/conversion_rules.svg",
            caption="../report/conversion_rules.rst",
            category="Conversion",
            subcategory="{dataset}",
            labels={"figure": "per rule"},
        ),
        conversion_shards=report(
            "results/report/{dataset}/conversion_shards.svg",
            caption="../report/conversion_shards.rst",
            category="Conversion",
            subcategory="{dataset}",
            labels={"figure": "per shard"},
        ),
        lerobot_convert=report(
            "results/report/{dataset}/lerobot_convert.svg",
            caption="../report/lerobot_convert.rst",
            category="Conversion",
            subcategory="{dataset}",
            labels={"figure": "vs lerobot"},
        ),
        copies=report(
            "results/report/{dataset}/copies.svg",
            caption="../report/copies.rst",
            category="Dataloading",
            subcategory="{dataset}",
            labels={"figure": "which copy"},
        ),
        paper_cache_modes=report(
            "results/report/{dataset}/paper_cache_modes.svg",
            caption="../report/paper_cache_modes.rst",
            category="robomimic paper",
            subcategory="{dataset}",
            labels={"figure": "cache modes"},
        ),
        paper_batch_size=report(
            "results/report/{dataset}/paper_batch_size.svg",
            caption="../report/paper_batch_size.rst",
            category="robomimic paper",
            subcategory="{dataset}",
            labels={"figure": "batch size"},
        ),
        paper_seq_length=report(
            "results/report/{dataset}/paper_seq_length.svg",
            caption="../report/paper_seq_length.rst",
            category="robomimic paper",
            subcategory="{dataset}",
            labels={"figure": "sequence length"},
        ),
        copies_table=report(
            "results/report/{dataset}/copies.csv",
            caption="../report/copies_table.rst",
            category="Dataloading",
            subcategory="{dataset}",
            labels={"figure": "table per copy"},
        ),
        png=expand("results/report/{{dataset}}/{name}.png", name=REPORT_FIGURES),
        scenarios=report(
            directory("results/report/{dataset}/scenarios"),
            patterns=[REPORT_SCENARIO_CARD],
            caption="../report/scenario.rst",
            category="Dataloading",
            subcategory="{dataset} scenarios",
            labels={
                "loader": "{loader}",
                "source": "{source}",
                "mode": "{mode}",
                "copy": "{copy_suffix}",
                "decode": "{decode}",
                "workers": "{workers}",
                "nodes": "{nodes}",
            },
        ),
        conversion=report(
            "results/report/{dataset}/conversion.csv",
            caption="../report/conversion_table.rst",
            category="Conversion",
            subcategory="{dataset}",
            labels={"figure": "table per rule"},
        ),
        summary="results/report/{dataset}/summary.csv",
        jobs_rss=report(
            "results/report/{dataset}/jobs_rss.csv",
            caption="../report/jobs_rss.rst",
            category="Conversion",
            subcategory="{dataset}",
            labels={"figure": "peak RSS per job"},
        ),
    log:
        "results/logs/{dataset}/report.log",
    localrule: True
    conda:
        ROBOPIPE_ENV
    params:
        logs="results/logs/{dataset}",
    script:
        "../../scripts/report.py"


rule report:
    input:
        expand("results/report/{dataset}/summary.csv", dataset=dataset_names()),
    output:
        report(
            "results/report/summary.csv",
            caption="../report/summary.rst",
            category="Dataloading",
            subcategory="all datasets",
            labels={"table": "summary, one row per scenario"},
        ),
    log:
        "results/logs/report.log",
    localrule: True
    conda:
        ROBOPIPE_ENV
    script:
        "../../scripts/report.py"
