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
# From quality.smk: quality_report_inputs(wildcards) -> {"report": quality.json, "episodes":
# episodes.parquet}, quality_location(wildcards) and quality_storage_options(wildcards): where
# the dataset's frames and signals are read.
from robopipe.layout import (
    REPORT_FIGURES,
    REPORT_QUALITY_DIR,
    REPORT_QUALITY_FIGURES,
    LOGS_DIR,
    LOG_FILE,
    REPORT_ALL_SUMMARY,
    REPORT_DATASET_DIR,
    REPORT_LOG,
    REPORT_SUMMARY,
)
from robopipe.bench.scenarios import snakemake_pattern
from robopipe.workflow.bench import skipped_peers

# Scenario cards, {loader}_{source}_{mode}[_e{encoding}]_{decode}_w{workers}_n{nodes}.svg: the
# grammar of robopipe.bench.scenarios, the one place it is defined.
REPORT_SCENARIO_CARD = snakemake_pattern(".svg")


def figure(name):
    """A dataset's figure `name` (robopipe.layout.REPORT_FIGURES) as a report item: its SVG, caption
    workflow/report/<name>.rst, filed under its category, the dataset and its label."""
    category, label = REPORT_FIGURES[name]
    return report(
        f"{REPORT_DATASET_DIR}/{name}.svg",
        caption=f"../report/{name}.rst",
        category=category,
        subcategory="{dataset}",
        labels={"figure": label},
    )


rule report_dataset:
    input:
        unpack(report_inputs),
    output:
        **{name: figure(name) for name in REPORT_FIGURES},
        copies_table=report(
            f"{REPORT_DATASET_DIR}/copies.csv",
            caption="../report/copies_table.rst",
            category="Dataloading",
            subcategory="{dataset}",
            labels={"figure": "table per copy"},
        ),
        png=[f"{REPORT_DATASET_DIR}/{name}.png" for name in REPORT_FIGURES],
        scenarios=report(
            directory(f"{REPORT_DATASET_DIR}/scenarios"),
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
            f"{REPORT_DATASET_DIR}/conversion.csv",
            caption="../report/conversion_table.rst",
            category="Conversion",
            subcategory="{dataset}",
            labels={"figure": "table per rule"},
        ),
        summary=REPORT_SUMMARY,
        peers=report(
            f"{REPORT_DATASET_DIR}/peers.csv",
            caption="../report/peers.rst",
            category="Dataloading",
            subcategory="{dataset}",
            labels={"figure": "robopipe against the best peer"},
        ),
        jobs_rss=report(
            f"{REPORT_DATASET_DIR}/jobs_rss.csv",
            caption="../report/jobs_rss.rst",
            category="Conversion",
            subcategory="{dataset}",
            labels={"figure": "peak RSS per job"},
        ),
    log:
        LOG_FILE.format(dataset="{dataset}", step="report"),
    localrule: True
    conda:
        ROBOPIPE_ENV
    params:
        logs=LOGS_DIR,
        # loader -> why not run
        skipped_peers=lambda w: skipped_peers(
            config.get("bench", {}), episodes_selected(w.dataset)
        ),
    script:
        "../../scripts/report_dataset.py"


# The quality section (category Quality): findings per check, episodes x checks, the flagged
# camera stretches' frames and the flagged signals, read from the dataset (a bounded number).
rule report_quality:
    input:
        unpack(quality_report_inputs),
    output:
        **{
            stem: report(
                f"{REPORT_QUALITY_DIR}/{stem}.svg",
                caption=f"../report/{stem}.rst",
                category="Quality",
                subcategory="{dataset}",
                labels={"figure": label},
            )
            for stem, label in REPORT_QUALITY_FIGURES.items()
        },
        png=[f"{REPORT_QUALITY_DIR}/{stem}.png" for stem in REPORT_QUALITY_FIGURES],
    log:
        LOG_FILE.format(dataset="{dataset}", step="report_quality"),
    localrule: True
    conda:
        ROBOPIPE_ENV
    params:
        root=quality_location,
        storage_options=quality_storage_options,
    script:
        "../../scripts/report_quality.py"


rule report:
    input:
        summaries=expand(REPORT_SUMMARY, dataset=dataset_names()),
        quality=expand(
            f"{REPORT_QUALITY_DIR}/{{stem}}.svg",
            dataset=dataset_names(),
            stem=list(REPORT_QUALITY_FIGURES),
        ),
    output:
        report(
            REPORT_ALL_SUMMARY,
            caption="../report/summary.rst",
            category="Dataloading",
            subcategory="all datasets",
            labels={"table": "summary, one row per scenario"},
        ),
    log:
        REPORT_LOG,
    localrule: True
    conda:
        ROBOPIPE_ENV
    script:
        "../../scripts/report.py"
