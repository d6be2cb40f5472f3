# Sources that a rule makes: the generated demo dataset and Hub downloads.


rule demo:
    output:
        directory("results/{dataset}/demo"),
    params:
        demo=demo_options,
    log:
        "results/logs/{dataset}/demo.log",
    benchmark:
        "results/benchmarks/{dataset}/demo/demo.tsv"
    script:
        "../../scripts/demo.py"


rule fetch:
    output:
        directory("results/{dataset}/hub"),
    params:
        repo_id=hub_repo_id,
        revision=hub_revision,
    resources:
        network=1,
    log:
        "results/logs/{dataset}/fetch.log",
    benchmark:
        "results/benchmarks/{dataset}/fetch/fetch.tsv"
    script:
        "../../scripts/fetch.py"
