from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/sources.smk"
include: "workflow/rules/convert.smk"


rule all:
    input:
        converted_datasets(),
        expand("results/{dataset}/validation.json", dataset=dataset_names()),
    default_target: True
