"""What the check of a remote v3.0 dataset reads, against the dataset's size.

Serves a local v3.0 folder on the Hub stand-in (:mod:`robopipe.harness.hub_standin`, 127.0.0.1, its
parquets and mp4s as LFS files), checks it at its ``hf://`` URL as ``source_check`` does
(``robopipe.checks.v30``: the metadata files, range reads of the parquet footers and
small columns and of each mp4's header and last group of frames), then checks the local
folder, and prints the bytes and requests the remote check took (from the stand-in's request
log) against the dataset's bytes, and both wall times. Usage::

    python benchmarks/remote_check_v30_bytes.py ../shared/datasets/cr5_20ep_v30_lerobot
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from robopipe.harness.hub_standin import dataset_files, serve_folder_to_this_process


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="a local v3.0 dataset folder")
    parser.add_argument("--threads", type=int, default=2, help="the check's threads")
    args = parser.parse_args()
    root = args.folder.resolve()
    files = dataset_files(root)
    total = sum(p.stat().st_size for p in files)
    with serve_folder_to_this_process(root, "main") as hub:
        # imported after HF_ENDPOINT is set: huggingface_hub reads it on import
        from robopipe.checks.v30 import check_v30

        start = time.perf_counter()
        remote = check_v30("hf://datasets/local/ds@main", "ds", threads=args.threads)
        remote_s = time.perf_counter() - start
        requests = hub.requests
        read = hub.served_bytes(requests)
        start = time.perf_counter()
        local = check_v30(root, "ds", threads=args.threads)
        local_s = time.perf_counter() - start
    print(f"dataset: {total} bytes in {len(files)} files, {remote.episodes} episodes")
    print(
        f"remote check: {read} bytes ({100 * read / total:.2f}% of the dataset), "
        f"{len(requests)} requests, {remote_s:.2f} s, ok={remote.ok}"
    )
    same = sorted(map(repr, remote.problems)) == sorted(map(repr, local.problems))
    print(f"local check: {local_s:.2f} s, ok={local.ok}, same problems: {same}")


if __name__ == "__main__":
    main()
