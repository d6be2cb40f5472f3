"""What the check and plan jobs run for a source, by its family: the operations of a
:class:`~robopipe.sources.base.Source` that need :mod:`robopipe.checks` and
:mod:`robopipe.conversion`, which sit above :mod:`robopipe.sources` (docs/development.md,
Layers), so they live here, one function per operation. Each is a
:func:`functools.singledispatch` on the source's class, so that no caller (rule, script or
:class:`~robopipe.workflow.sources.Datasets`) asks which kind a source is: a new kind
inherits its family's check and plan, or registers its own.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from robopipe.checks.parts import read_part
from robopipe.checks.report import CheckReport, read_report
from robopipe.checks.v21 import check_part, merge_parts
from robopipe.checks.v30 import check_v30
from robopipe.conversion.plan import Plan, make_plan, plan_remote, reuse_plan
from robopipe.formats.v21_reader import load_source
from robopipe.layout import PARSE_TIME_PLAN_FILE
from robopipe.sources import ConvertedSource, LocalV21, RemoteV21, Source, V30Source

log = logging.getLogger(__name__)

__all__ = ["check", "parse_time_plan", "plan"]


@functools.singledispatch
def check(
    source: Source,
    *,
    threads: int = 8,
    parts: Sequence[str] = (),
    files: str | Path | None = None,
    doctor_python: str | None = None,
) -> CheckReport:
    """Check ``source`` completely (rule source_check), at its ``check_location()``; never
    raises for bad data.

    Args:
        source: the source (a converted one, or a v3.0 one).
        threads: episodes (v2.x) or files (v3.0) checked at once (footer reads and mp4
            opens release the GIL).
        parts: the findings of its check part jobs (Source.check_parts), merged with the
            metadata's checks; none: every episode is checked here.
        files: the ``check_files.json`` of its last check (every file it read): files that
            changed, appeared or disappeared since are notes; None or missing: none.
        doctor_python: the peer interpreter whose ``lerobot-lance-doctor`` is asked about a
            local v3.0 folder (robopipe.checks.doctor); None: not asked.

    Returns:
        A :class:`~robopipe.checks.report.CheckReport`.

    Raises:
        TypeError: a source of neither family.
        robopipe.retry.RemoteReadError: a remote read failed on every attempt of its
            ``retry_budget``.
    """
    raise TypeError(f"{source!r} is neither converted nor v3.0: no check")


@check.register
def _check_converted(
    source: ConvertedSource,
    *,
    threads: int = 8,
    parts: Sequence[str] = (),
    files: str | Path | None = None,
    doctor_python: str | None = None,
) -> CheckReport:
    """A v2.x source (:mod:`robopipe.checks.v21`): its part jobs' findings, read back each
    time they are needed (else every episode checked here, in ``threads``), merged with the
    metadata's checks. ``doctor_python`` is not used (the doctor reads v3.0 only)."""
    location = source.check_location()
    if parts:

        def found() -> Iterator:
            return (read_part(path) for path in parts)
    else:
        whole = check_part(location, source.name, source.options, threads=threads)

        def found() -> list:
            return [whole]

    previous = files if files is not None and os.path.isfile(files) else None
    return merge_parts(location, source.name, source.options, found, previous=previous)


@check.register
def _check_v30(
    source: V30Source,
    *,
    threads: int = 8,
    parts: Sequence[str] = (),
    files: str | Path | None = None,
    doctor_python: str | None = None,
) -> CheckReport:
    """A v3.0 dataset (:func:`robopipe.checks.v30.check_v30`, which asks
    ``lerobot-lance-doctor`` of ``doctor_python`` about a local folder): its
    ``read_episodes()``, each read retried within its ``retry_budget``. It has no part jobs
    (``parts`` is not used)."""
    options = source.options
    return check_v30(
        source.check_location(),
        source.name,
        storage_options=source.storage_options(),
        threads=threads,
        tolerance_s=options.tolerance_s,
        skip_episodes=options.skip_episodes,
        episodes=source.read_episodes(),
        previous=None if files is None else read_report(files),
        doctor=True,
        doctor_python=doctor_python,
        retry_budget=options.retry_budget,
    )


@functools.singledispatch
def plan(source: Source) -> Plan:
    """The ``plan`` job's conversion plan of ``source`` (rule plan).

    Raises:
        NotImplementedError: a v3.0 source (it is read where it is, never planned).
        DatasetError: the source cannot be planned (its first problem).
        robopipe.retry.RemoteReadError: a remote read failed on every attempt.
    """
    raise NotImplementedError(f"{source!r} is not converted: it has no plan")


@plan.register
def _plan_folder(source: ConvertedSource) -> Plan:
    """A v2.x folder (its ``folder``, which exists by now): the parse-time plan where the
    main Snakemake saved one and no source file changed since
    (:func:`robopipe.conversion.plan.reuse_plan`), else made again from every parquet
    footer (:func:`robopipe.conversion.plan.make_plan`)."""
    loaded = load_source(
        source.folder, source.name, template_placeholders=source.options.template_placeholders
    )
    saved = PARSE_TIME_PLAN_FILE.format(dataset=source.name)
    reused = reuse_plan(saved, loaded, source.options)
    if reused is None:
        return make_plan(loaded, source.options)
    log.info("the parse-time plan: no source file changed since it was made")
    return reused


@plan.register
def _plan_listing(source: RemoteV21) -> Plan:
    """A remote v2.x source: listed into its manifest (its ``folder``), its metadata
    fetched into its cache, then planned as a folder is
    (:func:`robopipe.conversion.plan.plan_remote`)."""
    return plan_remote(source.folder, source.name, source.options, **source.remote_listing())


@functools.singledispatch
def parse_time_plan(source: Source) -> Plan:
    """The plan the main Snakemake makes while it builds the DAG, of a source whose
    ``parse_time_plan`` is true; without the stats check (the ``plan`` job reads
    episodes_stats.jsonl: :func:`plan`; the DAG needs no stats).

    Raises:
        NotImplementedError: a source the ``plan`` checkpoint plans.
        DatasetError: the metadata or a parquet footer cannot be read.
    """
    raise NotImplementedError(f"{source!r} is planned by the plan job, not at parse time")


@parse_time_plan.register
def _parse_time_plan_folder(source: LocalV21) -> Plan:
    """A local v2.x folder: from its metadata, loaded once (``LocalV21.v21``), and its
    parquet footers."""
    return make_plan(source.v21, source.options, check_stats=False)
