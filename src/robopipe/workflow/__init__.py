"""What the Snakemake rules decide, as plain functions of the config: where each dataset's
source is and how it is planned (:mod:`.sources`), what its check and plan jobs run
(:mod:`.source_jobs`), which files each rule reads and writes
(:mod:`.targets`, :mod:`.bench`), and how jobs are grouped on SLURM (:mod:`.groups`).

The rule files (``workflow/rules/*.smk``) only wire these to Snakemake's input functions, so
that the decisions are unit-tested without running Snakemake.
"""
