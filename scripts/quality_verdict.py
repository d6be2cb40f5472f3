"""Snakemake job: fail the run where the dataset's findings reach config `quality: fail_on`
(robopipe.quality.verdict), naming them; quality.json stays for the user to read."""

import json
import sys

from robopipe.atomic import write_json
from robopipe.jobs import logged
from robopipe.quality import verdict

with logged(snakemake) as log:
    with open(snakemake.input[0], encoding="utf-8") as f:
        report = json.load(f)
    fail_on = snakemake.params.fail_on
    message = verdict(report, fail_on)
    if message is not None:
        log.error("robopipe: dataset %r: quality: %s", snakemake.wildcards.dataset, message)
        log.error("robopipe: every finding is in %s", snakemake.input[0])
        sys.exit(1)
    write_json(snakemake.output[0], {"fail_on": fail_on, "passed": True})
    log.info("passed (fail_on: %s)", fail_on)
