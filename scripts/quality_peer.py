"""Snakemake script of rule ``quality_peer``: lerobot-doctor 0.2.0's ``check`` of the dataset
robopipe's quality checks read, its verdicts beside quality.json's findings
(robopipe.bench.quality_peer), in results/{dataset}/quality/doctor.json; skipped, with the
reason written there, where there is no peer environment or the source is remote."""

from robopipe.bench.quality_peer import quality_peer
from robopipe.jobs import logged

with logged(snakemake) as log:
    result = quality_peer(
        snakemake.params.root,
        snakemake.input.quality,
        snakemake.params.python,
        snakemake.output[0],
        dataset=snakemake.wildcards.dataset,
        timeout_s=snakemake.params.timeout_s,
    )
    if result.get("skipped"):
        log.info("%s", result["skipped"])
    else:
        compared = result.get("comparison") or {}
        log.info(
            "%s: %s in %.1f s; findings both report %d, only robopipe %d, only it %d, "
            "without an episode %d",
            result["tool"],
            result.get("overall_severity") or result.get("error"),
            result["wall_s"],
            len(compared.get("both", [])),
            len(compared.get("only_robopipe", [])),
            len(compared.get("only_doctor", [])),
            len(compared.get("doctor_without_episode", [])),
        )
