"""Snakemake job: check the whole source of one dataset (results/{dataset}/check.json): a
v2.1 source before it is converted (a large one's episodes checked by source_check_part
jobs, merged here with the metadata's checks), a v3.0 one (a local folder, or any fsspec
URL, read by range requests, each read and listing retried within the dataset's
``retry_attempts``, ``retry_seconds`` and ``read_timeout_s``) before any loader reads it. A
local v3.0 folder is also given to lerobot-lance-doctor where the peer environment exists; its
verdict is check.json's ``doctor``, and a flag fails the check (a note where episodes are left
out).

Every problem goes to the log, one line each, and the full report to check.json; with
problems the job fails, Snakemake removes check.json, and the report stays in the log folder
(results/logs/{dataset}/check.json). Source files that changed since the last check are
notes (compared with results/{dataset}/check_files.json, which the job keeps).
"""

import sys
from pathlib import Path

from robopipe.checks.parts import read_part, write_files
from robopipe.checks.report import read_report, write_report
from robopipe.checks.v21 import check_part, merge_parts
from robopipe.checks.v30 import check_v30
from robopipe.jobs import logged
from robopipe.options import ConversionOptions

with logged(snakemake, pandas=False) as log:
    dataset = snakemake.wildcards.dataset
    output = Path(snakemake.output[0])
    files = output.with_name("check_files.json")
    options = ConversionOptions.from_config(snakemake.params.options)
    if snakemake.params.v30:
        report = check_v30(
            snakemake.params.source,
            dataset,
            storage_options=snakemake.params.storage_options,
            threads=snakemake.threads,
            tolerance_s=options.tolerance_s,
            skip_episodes=options.skip_episodes,
            episodes=snakemake.params.episodes,
            previous=read_report(files),
            doctor=True,
            doctor_python=snakemake.params.peer_python,
            retry_budget=options.retry_budget,
        )
        doctor = report.doctor or {}
        log.info("lerobot-lance-doctor: %s", doctor.get("skipped") or doctor.get("passed"))
    else:
        source = snakemake.params.source
        if snakemake.input.parts:  # the part jobs' findings, read each time they are needed
            parts = lambda: (read_part(path) for path in snakemake.input.parts)  # noqa: E731
        else:
            whole = check_part(source, dataset, options, threads=snakemake.threads)
            parts = lambda: [whole]  # noqa: E731
        previous = files if files.is_file() else None
        report = merge_parts(source, dataset, options, parts, previous=previous)
    write_files(report, files)
    if report.ok:
        write_report(report, output)
        log.info("%s", report.summary(path=output))
    else:
        kept = Path(snakemake.log.report)
        write_report(report, kept)
        log.error("%s", report.summary(path=kept))
        sys.exit(1)
