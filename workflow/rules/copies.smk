# Training copies: results/{dataset}/copies/{encoding}/v3.0, the converted dataset with its
# frames in another representation (robopipe.copies.encodings), still a LeRobot v3.0 dataset.
# One copy_file job per output file (each mp4, or each data parquet when frames move into the
# data files), in parallel; copy_finish writes the metadata, links the unchanged files,
# publishes the copy and writes copy.json (size, compression, encode time, PSNR/SSIM). The
# published files are hard links to the staged ones (no second copy on disk; not temp(): with
# the SLURM job groups, a temp() output made Snakemake's dry run fail after the plan checkpoint).
# The lance copy (lerobot-lancedb's Lance layout, not a v3.0 folder) is one copy_lance job per
# dataset, run by lerobot-lance-convert of the peer interpreter (robopipe.copies.lance).
# Every path is a template of robopipe.layout.
from robopipe.layout import (
    COPY_FILE,
    COPY_INFO,
    COPY_PART,
    COPY_PART_RESULT,
    JOB_STATS_FILE,
    LOG_FILE,
)
from robopipe.peer_env import peer_python
from robopipe.copies.encodings import FILE_ENCODING_PATTERN, LANCE
from robopipe.workflow.targets import COPY_PART_PATTERN, copy_part_names


def copy_files(template):
    """input of copy_finish: ``template`` (COPY_PART or COPY_PART_RESULT) for every file the
    copy_file jobs of this copy write."""

    def files(wildcards):
        data, videos = DATASETS.files(wildcards.dataset)
        names = copy_part_names(data, videos, wildcards.encoding)
        return [
            template.format(
                dataset=wildcards.dataset, encoding=wildcards.encoding, part=p
            )
            for p in names
        ]

    return files


rule copy_file:
    input:
        dataset=dataset_input,
        ready=ready_input,
    output:
        part=COPY_PART,
        json=COPY_PART_RESULT,
    log:
        LOG_FILE.format(dataset="{dataset}", step="copy_file/{encoding}/{part}"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="copy_file/{encoding}/{part}")
    wildcard_constraints:
        encoding=FILE_ENCODING_PATTERN,
        part=COPY_PART_PATTERN,
    conda:
        ROBOPIPE_ENV
    resources:
        mem_mb=3000,
    params:
        options=config.get("copies", {}),  # robopipe.copies.make.copy_file keywords
    script:
        "../../scripts/copy_file.py"


rule copy_finish:
    input:
        dataset=dataset_input,
        ready=ready_input,
        parts=copy_files(COPY_PART),
        results=copy_files(COPY_PART_RESULT),
    output:
        dataset=COPY_INFO,
        measurements=COPY_FILE,
    log:
        LOG_FILE.format(dataset="{dataset}", step="copy_finish/{encoding}"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="copy_finish/{encoding}")
    wildcard_constraints:
        encoding=FILE_ENCODING_PATTERN,
    conda:
        ROBOPIPE_ENV
    script:
        "../../scripts/copy_finish.py"


rule copy_lance:
    input:
        dataset=dataset_input,
        ready=ready_input,
    output:
        dataset=COPY_INFO.format(dataset="{dataset}", encoding=LANCE),
        measurements=COPY_FILE.format(dataset="{dataset}", encoding=LANCE),
    log:
        LOG_FILE.format(dataset="{dataset}", step=f"copy_lance/{LANCE}"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step=f"copy_lance/{LANCE}")
    conda:
        ROBOPIPE_ENV
    resources:
        mem_mb=3000,
    params:
        python=peer_python(config.get("bench", {})),
    script:
        "../../scripts/copy_lance.py"
