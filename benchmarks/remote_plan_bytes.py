"""What the plan and the check of a remote v2.1 source read, against the dataset's size.

Serves a local v2.1 folder on the Hub stand-in (:mod:`robopipe.harness.hub_standin`, 127.0.0.1, its
parquets and mp4s as LFS files), then plans it as the ``plan`` job does
(``robopipe.conversion.plan.plan_remote``: the listing, the meta files, each parquet's footer by
range reads) and checks it as ``source_check`` does (range reads of the parquet columns it
checks and of each mp4's header and last packets), and prints, from the stand-in's request
log, the bytes each read against the dataset's bytes (meta/, data/ and videos/). Usage::

    python benchmarks/remote_plan_bytes.py ../shared/datasets/cr5_banana_plate_v21 [--no-check]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from robopipe.harness.hub_standin import dataset_files, serve_folder_to_this_process


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="a local v2.1 dataset folder")
    parser.add_argument("--no-check", action="store_true", help="plan only")
    args = parser.parse_args()
    root = args.folder.resolve()
    files = dataset_files(root)
    total = sum(p.stat().st_size for p in files)
    with tempfile.TemporaryDirectory() as tmp, serve_folder_to_this_process(root, "v2.1") as hub:
        # imported after HF_ENDPOINT is set: huggingface_hub reads it on import
        from robopipe.checks.v21 import check_source
        from robopipe.conversion.plan import plan_remote
        from robopipe.options import ConversionOptions

        options = ConversionOptions(restamp_timestamps=True)
        manifest = Path(tmp) / "source.sqlite"
        start = time.perf_counter()
        plan = plan_remote(
            manifest, "ds", options, url="hf://datasets/local/ds@v2.1", cache=f"{tmp}/cache"
        )
        seconds = time.perf_counter() - start
        planned = hub.requests
        read = hub.served_bytes(planned)
        print(f"dataset: {total} bytes in {len(files)} files, {len(plan.episodes)} episodes")
        print(
            f"plan: {read} bytes ({100 * read / total:.3f}% of the dataset), "
            f"{len(planned)} requests, {seconds:.2f} s"
        )
        if not args.no_check:
            start = time.perf_counter()
            report = check_source(manifest, "ds", options, threads=8)
            seconds = time.perf_counter() - start
            checked = hub.requests[len(planned) :]
            read = hub.served_bytes(checked)
            print(
                f"check: {read} bytes ({100 * read / total:.3f}% of the dataset), "
                f"{len(checked)} requests, {seconds:.2f} s, ok={report.ok}"
            )


if __name__ == "__main__":
    main()
