"""Snakemake job: check the whole source of one dataset (results/{dataset}/check.json), as its
family checks (robopipe.workflow.source_jobs.check): a v2.1 source before it is converted (a
large one's episodes checked by source_check_part jobs, merged here with the metadata's
checks), a v3.0 one (a local folder, or any fsspec URL, read by range requests, each read and
listing retried within the dataset's ``retry_attempts``, ``retry_seconds`` and
``read_timeout_s``) before any loader reads it. A local v3.0 folder is also given to
lerobot-lance-doctor where the peer environment exists; its verdict is check.json's
``doctor``, and a flag fails the check (a note where episodes are left out).

Every problem goes to the log, one line each, and the full report to check.json; with
problems the job fails, Snakemake removes check.json, and the report stays in the log folder
(results/logs/{dataset}/check.json). Source files that changed since the last check are
notes (compared with results/{dataset}/check_files.json, which the job keeps).
"""

import sys
from pathlib import Path

from robopipe.checks.parts import write_files
from robopipe.checks.report import write_report
from robopipe.jobs import logged
from robopipe.workflow import source_jobs

with logged(snakemake, pandas=False) as log:
    output = Path(snakemake.output[0])
    files = output.with_name("check_files.json")
    report = source_jobs.check(
        snakemake.params.source,
        threads=snakemake.threads,
        parts=list(snakemake.input.parts),
        files=files,
        doctor_python=snakemake.params.peer_python,
    )
    if report.doctor is not None:
        doctor = report.doctor
        log.info("lerobot-lance-doctor: %s", doctor.get("skipped") or doctor.get("passed"))
    write_files(report, files)
    if report.ok:
        write_report(report, output)
        log.info("%s", report.summary(path=output))
    else:
        kept = Path(snakemake.log.report)
        write_report(report, kept)
        log.error("%s", report.summary(path=kept))
        sys.exit(1)
