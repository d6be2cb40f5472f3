# Sources that a rule makes: the generated demo dataset and Hub downloads.


rule demo:
    output:
        directory("results/{dataset}/demo"),
    log:
        "results/logs/{dataset}/demo.log",
    benchmark:
        "results/jobs/{dataset}/demo/demo.tsv"
    group:
        slurm_group("demo")
    conda:
        ROBOPIPE_ENV
    params:
        demo=demo_options,
    script:
        "../../scripts/demo.py"


rule fetch:
    output:
        directory("results/{dataset}/hub"),
    log:
        "results/logs/{dataset}/fetch.log",
    benchmark:
        "results/jobs/{dataset}/fetch/fetch.tsv"
    group:
        slurm_group("fetch")
    conda:
        ROBOPIPE_ENV
    resources:
        network=1,
    params:
        repo_id=hub_repo_id,
        revision=hub_revision,
    script:
        "../../scripts/fetch.py"
