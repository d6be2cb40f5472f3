# Training copies: results/{dataset}/copies/{encoding}/v3.0, the converted dataset with its
# frames in another representation (robopipe.copies.encodings), still a LeRobot v3.0 dataset.
# One copy_file job per output file (each mp4, or each data parquet when frames move into the
# data files), in parallel; copy_finish writes the metadata, links the unchanged files,
# publishes the copy and writes copy.json (size, compression, encode time, PSNR/SSIM). The
# published files are hard links to the staged ones (no second copy on disk; not temp(): with
# the SLURM job groups, a temp() output made Snakemake's dry run fail after the plan checkpoint).
# Every path is a template of robopipe.layout.


rule copy_file:
    input:
        dataset=PUBLISHED_INFO,
    output:
        part=COPY_PART,
        json=COPY_PART_RESULT,
    log:
        LOG_FILE.format(dataset="{dataset}", step="copy_file/{encoding}/{part}"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="copy_file/{encoding}/{part}")
    wildcard_constraints:
        encoding=ENCODING_PATTERN,
        part=COPY_PART_PATTERN,
    conda:
        ROBOPIPE_ENV
    resources:
        mem_mb=3000,
    params:
        fidelity_stride=config.get("copies", {}).get("fidelity_stride", 1),
    script:
        "../../scripts/copy_file.py"


rule copy_finish:
    input:
        dataset=PUBLISHED_INFO,
        parts=copy_parts,
        results=copy_part_results,
    output:
        dataset=COPY_INFO,
        measurements=COPY_FILE,
    log:
        LOG_FILE.format(dataset="{dataset}", step="copy_finish/{encoding}"),
    benchmark:
        JOB_STATS_FILE.format(dataset="{dataset}", step="copy_finish/{encoding}")
    wildcard_constraints:
        encoding=ENCODING_PATTERN,
    conda:
        ROBOPIPE_ENV
    script:
        "../../scripts/copy_finish.py"
