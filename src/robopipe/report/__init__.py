"""The report: gather benchmark and conversion results into tables and figures (SVG and PNG).

``build_dataset_report`` writes one dataset's figures and tables (``results/report/{dataset}/``);
``merge_summaries`` joins the per-dataset tables into ``results/report/summary.csv``.
"""

from robopipe.report.build import FIGURES, build_dataset_report, merge_summaries

__all__ = ["FIGURES", "build_dataset_report", "merge_summaries"]
