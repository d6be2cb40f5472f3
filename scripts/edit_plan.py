"""Snakemake job: plan an edit (results/{dataset}/edit/plan.json) from its inputs' meta/;
bad input (an unknown episode, fractions, merge inputs that differ) stops it here."""

from robopipe.edits.plan import flagged_episodes, make_edit_plan
from robopipe.jobs import logged

with logged(snakemake, pandas=False) as log:
    operation = dict(snakemake.params.operation)
    if operation.get("flagged_by"):
        quality = snakemake.input.quality
        severities = tuple(operation.pop("severity", None) or ["error"])
        indices = flagged_episodes(
            quality,
            operation.pop("flagged_by"),
            severities,
            conversion_plan=snakemake.input.get("conversion_plan"),
        )
        log.info("%s flags episodes %s (of the v3.0 input)", quality, indices)
        operation["episode_indices"] = indices
    plan = make_edit_plan(
        snakemake.wildcards.dataset,
        operation,
        snakemake.params.sources,
        source_names=snakemake.params.source_names,
        split=snakemake.params.split,
    )
    plan.save(snakemake.output[0])
    log.info(
        "%d episodes, %d data files, %d video files",
        plan.num_episodes,
        len(plan.data_files),
        sum(len(v) for v in plan.video_files.values()),
    )
