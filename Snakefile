import os

from snakemake.settings.types import DeploymentMethod
from snakemake.utils import min_version

from robopipe import cluster
from robopipe.layout import REPORT_ALL_SUMMARY

min_version("9.0")

# Under --executor slurm: fit check, stuck-job watchdog, interrupts that cancel (robopipe.cluster).
cluster.install()

# With --sdm conda, jobs run in envs/robopipe.yaml, which holds robopipe's dependencies but
# not robopipe itself: they import it from this checkout.
if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method:
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p
        for p in (
            os.path.join(workflow.basedir, "src"),
            os.environ.get("PYTHONPATH"),
        )
        if p
    )


# the defaults, whatever the working directory (-d); --configfile files are merged on top
configfile: os.path.join(workflow.basedir, "config", "config.yaml")


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/sources.smk"
include: "workflow/rules/robomimic.smk"
include: "workflow/rules/conversion.smk"
include: "workflow/rules/push.smk"
include: "workflow/rules/copies.smk"
include: "workflow/rules/bench.smk"
include: "workflow/rules/quality.smk"
include: "workflow/rules/quality_peer.smk"
include: "workflow/rules/report.smk"


rule all:
    default_target: True
    input:
        converted_datasets(),
        quality_outputs(),
        REPORT_ALL_SUMMARY,


onsuccess:
    exit_promptly()


onerror:
    exit_promptly()
