"""``python -m robopipe.quality ROOT OUT_DIR``: the quality checks of one dataset in this
process, without the workflow (``snakemake quality`` runs the same functions as parallel
jobs)::

    python -m robopipe.quality ../shared/datasets/cr5_banana_plate_v21 /tmp/q/cr5
    python -m robopipe.quality DATASET OUT --set decode=all --set frozen_camera_s=3 \\
        --fail-on error

Episodes are checked in batches of ``--batch-episodes`` (a v3.0 dataset: one batch per data
file), partial results under ``OUT_DIR/parts``, then merged into ``OUT_DIR/quality.json`` and
``OUT_DIR/episodes.parquet``. It prints the counts per check and severity and every warning
and error; with ``--fail-on`` it exits 1 when :func:`robopipe.quality.verdict` fails.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import yaml

from robopipe.errors import DatasetError
from robopipe.quality import QualityOptions, check_batch, merge_batches, v30_batches, verdict
from robopipe.quality.dataset import open_dataset


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m robopipe.quality", description=__doc__)
    parser.add_argument("root", help="dataset folder or fsspec URL (v2.0, v2.1 or v3.0)")
    parser.add_argument("out", type=Path, help="folder for quality.json and episodes.parquet")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE",
        help="a quality option (YAML value), e.g. decode=all; repeatable",
    )  # fmt: skip
    parser.add_argument("--batch-episodes", type=int, default=500)
    parser.add_argument("--fail-on", choices=("never", "error", "warning"), default=None)
    args = parser.parse_args(argv)
    try:
        section = {}
        for item in args.set:
            key, _, value = item.partition("=")
            section[key] = yaml.safe_load(value)
        options = QualityOptions.from_config(section)
        dataset = open_dataset(args.root)
        if dataset.meta is not None:
            batches = v30_batches(args.root)
        else:
            episodes = list(range(dataset.num_episodes))
            step = max(1, args.batch_episodes)
            batches = [episodes[i : i + step] for i in range(0, len(episodes), step)]
        parts = []
        for i, batch in enumerate(batches):
            parts.append(args.out / "parts" / f"{i:05d}.json")
            check_batch(args.root, batch, options, parts[-1])
        report = merge_batches(
            parts, args.out, dataset=dataset.name, source=args.root, options=options
        )
    except (DatasetError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    counts = Counter((f["check"], f["severity"]) for f in report["findings"])
    print(f"{report['dataset']}: {report['episodes']} episodes, {report['counts']}")
    for (check, severity), count in sorted(counts.items()):
        print(f"  {check:24s} {severity:8s} {count}")
    for f in report["findings"]:
        if f["severity"] != "info":
            print(f"  episode {f['episode_index']}: {f['check']} ({f['severity']}): {f['message']}")
    message = verdict(report, args.fail_on or options.fail_on)
    if message:
        print(message, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
