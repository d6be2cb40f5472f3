"""Peak RSS of one conversion job, run in this process on a v2.1 source (issue #22).

Each command runs one job's function, as its Snakemake script calls it, and prints the
process's peak RSS (``VmHWM``, MB) and wall time. Run one job per process:

    python benchmarks/job_rss.py plan /tmp/droid/d20k /tmp/rss20k/plan.json
    python benchmarks/job_rss.py check /tmp/droid/d20k /tmp/rss20k
    python benchmarks/job_rss.py check-part /tmp/droid/d20k /tmp/rss20k/part-001.json 10000 -
    python benchmarks/job_rss.py check-merge /tmp/droid/d20k /tmp/rss20k PART.json...
    python benchmarks/job_rss.py meta /tmp/rss20k/plan.json RUN/video_episodes /tmp/rss20k/meta
    python benchmarks/job_rss.py validate /tmp/rss20k/plan.json RUN/staging RUN/validation

``check`` writes ``check.json`` and ``check_files.json`` into its folder, as the job does
(the whole check in one process); ``check-part`` one part job's findings (episode indices
``[FIRST, STOP)``, ``-`` for no end), ``check-merge`` the two reports from the parts (with
``check_files.json`` of an earlier run in the folder as ``previous``);
``meta`` reads the ``video_episodes`` JSON files of an earlier run of the same source
(``results/{dataset}/video_episodes``, the aggregate_video jobs' output) and writes the
``meta/`` folder into the last argument. ``validate`` checks an earlier run's staged dataset
(``results/{dataset}/staging``) with its file checks' reports (``results/{dataset}/validation``),
as the validate job does (without the peer's doctor), and prints the summary.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path


def peak_mb() -> int:
    """``VmHWM`` of this process, MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def run(job: str, args: list[str]) -> None:
    from robopipe.options import ConversionOptions

    if job == "plan":
        from robopipe.conversion.plan import make_plan
        from robopipe.formats.v21_reader import load_source

        source, out = args
        make_plan(load_source(source, "droid"), ConversionOptions()).save(out)
    elif job == "check":
        from robopipe.checks.parts import write_files
        from robopipe.checks.report import write_report
        from robopipe.checks.v21 import check_source

        source, out = args
        report = check_source(source, "droid", ConversionOptions(), threads=2)
        write_files(report, Path(out) / "check_files.json")
        write_report(report, Path(out) / "check.json")
        print(report.summary())
    elif job == "check-part":
        from robopipe.checks.parts import write_part
        from robopipe.checks.v21 import check_part

        source, out, first, stop = args
        stop = None if stop == "-" else int(stop)
        options = ConversionOptions()
        part = check_part(source, "droid", options, first=int(first), stop=stop, threads=1)
        write_part(part, out)
    elif job == "check-merge":
        from robopipe.checks.parts import read_part, write_files
        from robopipe.checks.report import write_report
        from robopipe.checks.v21 import merge_parts

        source, out, *parts = args
        previous = Path(out) / "check_files.json"
        report = merge_parts(
            source,
            "droid",
            ConversionOptions(),
            lambda: (read_part(p) for p in parts),
            previous=previous if previous.is_file() else None,
        )
        write_files(report, previous)
        write_report(report, Path(out) / "check.json")
        print(report.summary())
    elif job == "meta":
        from robopipe.conversion.meta import write_meta
        from robopipe.conversion.plan import load_plan, load_planned_source

        plan_path, video_episodes, out = args
        plan = load_plan(plan_path)
        write_meta(
            load_planned_source(plan.source, plan.dataset, plan),
            plan,
            sorted(Path(video_episodes).glob("*/*/*.json")),
            Path(out),
        )
    elif job == "validate":
        import json

        from robopipe.conversion.plan import load_plan
        from robopipe.conversion.validate import validate
        from robopipe.formats.v21_reader import V21Source

        plan_path, staging, validation = args
        plan = load_plan(plan_path)
        reports = [json.loads(p.read_text("utf-8")) for p in Path(validation).rglob("*.json")]
        source = V21Source(plan.dataset, Path(plan.source), info={}, episodes=[], tasks=[])
        print(validate(source, plan, Path(staging), reports))
    else:
        raise SystemExit(
            f"unknown job {job!r}: plan, check, check-part, check-merge, meta or validate"
        )


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(len(sys.argv) < 2)  # 1 without a job
    start = time.perf_counter()
    run(sys.argv[1], sys.argv[2:])
    print(f"{sys.argv[1]}: peak RSS {peak_mb()} MB, {time.perf_counter() - start:.1f} s")
