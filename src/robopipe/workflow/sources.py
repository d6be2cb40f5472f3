"""The configured datasets: their sources (:mod:`robopipe.sources`, built once from the config)
and what the rules decide from a source and its conversion plan.

A source planned at parse time (a local folder) has its plan made here while the DAG is built,
so that ``snakemake -n`` lists every shard and final-file job; any other converted source's
plan is read back from the ``plan`` checkpoint.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping

from robopipe.checks.report import write_report
from robopipe.conversion.plan import Plan, load_plan, save_parse_time_plan, source_signature
from robopipe.errors import DatasetError
from robopipe.layout import LOG_FILE, PLAN_FILE
from robopipe.sources import Source, open_source
from robopipe.sources.base import digest
from robopipe.sources.edited import EditedV30
from robopipe.workflow import source_jobs, targets

__all__ = ["REFUSAL_REPORT", "Datasets", "UnplannableSource"]

# Where a source refused while the DAG is built has its check report: where the check job puts
# a failing one (rule source_check's log.report). Not the check's output, check.json: a report
# written outside a job has no Snakemake metadata, so a later run would take it as a check
# made, and not check the source again once it is fixed.
REFUSAL_REPORT = LOG_FILE.format(dataset="{dataset}", step="check").replace(".log", ".json")


class UnplannableSource(Exception):
    """A source that cannot be planned while the DAG is built; ``lines`` are the
    ``robopipe: ...`` messages that say why (the check's summary: the first problems of each
    kind and where the report of every problem is)."""

    def __init__(self, lines: list[str]):
        super().__init__("\n".join(lines))
        self.lines = lines


def _raise(lines: list[str]):
    raise UnplannableSource(lines)


class Datasets:
    """The ``datasets:`` of a (validated) workflow config, each one's source built once.

    Args:
        config: the whole Snakemake config; ``config["datasets"]`` maps each dataset name to
            its entry, and ``config.get("conversion")`` holds the conversion defaults.
        checkpoint_plan: the plan file of a dataset whose plan the ``plan`` checkpoint makes
            (in the rules: ``checkpoints.plan.get(dataset=name).output.plan``).
        refuse: what a source that cannot be planned does with its lines (the rules: print
            them and stop; default: raise :class:`UnplannableSource`).
        in_job: whether this Snakemake runs one job of a run (a cluster job: remote mode),
            which reads a parse-time plan back from the plan job's output (:meth:`plan`).
        saved_plans: where each parse-time plan is saved for the plan job to reuse, a path
            with ``{dataset}`` (the rules: :data:`robopipe.layout.PARSE_TIME_PLAN_FILE`;
            default None: not saved).
        edited: the datasets the config's edits make, name -> entry (robopipe.workflow.
            edits.edited_entries), each an :class:`~robopipe.sources.edited.EditedV30`
            after the configured ones (a name that a configured dataset has is left out:
            the edits refuse it).
        edited_files: the data and video files of such a dataset, relative to its root,
            from its edit's plan (the rules: :func:`robopipe.workflow.targets.plan_files` of
            the ``edit_plan`` checkpoint's plan).

    A source whose version cannot be read (a remote info.json) is left out of the sources and
    named in :attr:`problems`, one ``robopipe: ...`` line each. Parse-time plans are made once;
    file signatures are read when a job's params ask for them, so that no table of every file
    is held (Snakemake holds this object for the whole run).
    """

    def __init__(
        self,
        config: dict,
        checkpoint_plan: Callable[[str], str] | None = None,
        refuse: Callable[[list[str]], None] = _raise,
        in_job: bool = False,
        saved_plans: str | None = None,
        edited: Mapping[str, Mapping] | None = None,
        edited_files: Callable[[str], tuple[list[str], list[str]]] | None = None,
    ):
        self.config = config
        self.sources: dict[str, Source] = {}
        self.problems: list[str] = []
        for name, entry in config["datasets"].items():
            try:
                self.sources[name] = open_source(name, entry, config.get("conversion"))
            except DatasetError as exc:
                self.problems.append(f"robopipe: {exc}")
        self.edited = [name for name in edited or {} if name not in config["datasets"]]
        for name in self.edited:
            self.sources[name] = EditedV30(name, edited[name], config.get("conversion"))
        self._edited_files = edited_files
        self._checkpoint_plan = checkpoint_plan
        self._refuse = refuse
        self._in_job = in_job
        self._saved_plans = saved_plans
        # per instance, not per class: functools.cache on methods would outlive the config
        self._parse_time_plan = functools.cache(self._make_parse_time_plan)
        self._written_plan = functools.cache(load_plan)
        self._video_file_episodes = functools.cache(self._video_ranges)

    def __getitem__(self, name: str) -> Source:
        """The source of dataset ``name``."""
        return self.sources[name]

    def names(self) -> list[str]:
        """Every dataset: the configured ones in config order, then the edits' outputs."""
        return list(self.config["datasets"]) + self.edited

    def configured(self) -> list[str]:
        """The datasets of ``datasets:`` (what ``snakemake convert`` makes), in config
        order."""
        return list(self.config["datasets"])

    def plan(self, name: str) -> Plan:
        """The conversion plan of a converted dataset: made here for a source planned at
        parse time (metadata, parquet footers and file sizes), else read from the ``plan``
        checkpoint's output. Inside a cluster job (``in_job``, Snakemake's remote mode) the
        parse-time plan is the plan job's output where it exists (a few numbers per episode,
        no source file opened), so that a job starts in about the same time whatever the
        episode count (a job's params, the ``plan`` job's layout digest among them, only go to
        the job's metadata record, which the main Snakemake writes again once the job ends).

        A source that cannot be planned is checked: the report of every problem goes to
        :data:`REFUSAL_REPORT` (as the check job writes it), and the source is refused
        (``refuse``) with the report's summary, which names that file; where the check finds
        nothing, with the planning error and how to see every problem.
        """
        if not self[name].parse_time_plan:
            return load_plan(self._checkpoint_plan(name))
        if self._in_job and not self._before_written_plan(name):
            return self._written_plan(PLAN_FILE.format(dataset=name))
        return self._source_plan(name)

    def _source_plan(self, name: str) -> Plan:
        """The parse-time plan made from the source's files (once); a source that cannot be
        planned is refused (:meth:`plan`)."""
        try:
            return self._parse_time_plan(name)
        except UnplannableSource as exc:
            self._refuse(exc.lines)
            raise

    def _make_parse_time_plan(self, name: str) -> Plan:
        source = self[name]
        try:
            # the files' state before they are read, for the plan job to reuse this plan
            signature = source_signature(source.folder) if self._saved_plans else ""
            plan = source_jobs.parse_time_plan(source)
        except DatasetError as exc:
            checked = source_jobs.check(source)
            if checked.problems:
                path = REFUSAL_REPORT.format(dataset=name)
                write_report(checked, path)
                raise UnplannableSource([checked.summary(path=path)]) from exc
            raise UnplannableSource(
                [f"robopipe: {exc}", "robopipe: run `snakemake check` for every problem"]
            ) from exc
        if self._saved_plans:
            save_parse_time_plan(plan, signature, self._saved_plans.format(dataset=name))
        return plan

    def known_episodes(self, name: str) -> int | None:
        """The dataset's episode count where it is known before a job runs: its parse-time
        plan's, else what the config or a v3.0 source's info.json tells (Source.
        known_episodes)."""
        source = self[name]
        if not source.parse_time_plan:
            return source.known_episodes()
        if self._in_job:  # the plan keeps every episode it does not skip
            return source.info["total_episodes"] - len(set(source.options.skip_episodes))
        return len(self.plan(name).episodes)

    def _before_written_plan(self, name: str) -> bool:
        """Whether this is a cluster job (``in_job``) that runs before the plan job has written
        the plan (a source check part, the check, the plan itself), which reads no episode."""
        return self._in_job and not os.path.exists(PLAN_FILE.format(dataset=name))

    def _signs(self, name: str) -> bool:
        """Whether the rerun-trigger params (:meth:`plan_layout`, :meth:`shard_signatures`,
        :meth:`video_signatures`) are computed: for a source planned at parse time, and not
        inside a cluster job (Snakemake's remote mode). There no script reads them and no
        rerun is decided: the main Snakemake records a job's params when the job ends. So a
        job's own Snakemake reads neither the plan nor a source file for them, and starts in
        about the same time whatever the episode count (docs/cluster.md)."""
        return self[name].parse_time_plan and not self._in_job

    def plan_layout(self, name: str) -> str:
        """params of plan: a digest of what the parse-time plan decided (episodes, files,
        shards), so that a source change that moves an episode replans; ``""`` for a source
        the plan job plans alone, and in a cluster job (see :meth:`_signs`)."""
        if not self._signs(name):
            return ""
        return self.plan(name).layout_digest()

    def shard_signatures(self, name: str, shard: str) -> str:
        """params of shard: Source.data_signatures of the shard's episodes (a digest: Snakemake
        holds every job's params for the whole run); ``""`` for a source planned by the plan
        job (its files are fetched or made by jobs)."""
        source = self[name]
        if not self._signs(name):
            return ""
        episodes = self.plan(name).shard_episodes(shard)
        return source.data_signatures(e.source_episode_index for e in episodes)

    def shard_file_signatures(self, name: str, shard: str) -> str:
        """A digest of Source.data_signatures and, per camera, Source.video_signatures of the
        shard's episodes: every source file they read (params of a job that reads each
        episode's parquet and mp4s, rule quality_batch); ``""`` as :meth:`shard_signatures`."""
        source = self[name]
        if not self._signs(name):
            return ""
        plan = self.plan(name)
        episodes = [e.source_episode_index for e in plan.shard_episodes(shard)]
        signatures = [source.data_signatures(episodes)]
        signatures += [source.video_signatures(episodes, key) for key in plan.video_keys]
        return digest(signatures)

    def video_signatures(self, name: str, key: str, chunk: int, file: int) -> str:
        """params of aggregate_video: Source.video_signatures of camera ``key``'s source mp4s
        that output video file ``(chunk, file)`` is made of; ``""`` as
        :meth:`shard_signatures`.

        Raises:
            KeyError: the parse-time plan has no such video file.
        """
        source = self[name]
        if not self._signs(name):
            return ""
        return source.video_signatures(self.source_videos(name, key, chunk, file), key)

    def source_videos(self, name: str, key: str, chunk: int, file: int) -> list[int]:
        """The source episode indices whose camera ``key`` mp4s the parse-time plan puts in
        output video file ``(chunk, file)``, in order.

        Raises:
            KeyError: the plan has no such video file.
        """
        episodes = self.plan(name).episodes
        positions = self._video_file_episodes(name, key)[(chunk, file)]
        return [episodes[i].source_episode_index for i in positions]

    def _video_ranges(self, name: str, key: str) -> dict[tuple[int, int], range]:
        """Where camera ``key``'s output video files are in the plan: ``(chunk, file)`` -> the
        positions of their episodes in ``plan.episodes`` (a file holds consecutive episodes).
        Built once per camera, one range per file, so that a job's lookup does not scan every
        episode."""
        ranges: dict[tuple[int, int], range] = {}
        for i, e in enumerate(self.plan(name).episodes):
            first = ranges[e.videos[key]].start if e.videos[key] in ranges else i
            ranges[e.videos[key]] = range(first, i + 1)
        return ranges

    def stats_shards(self, name: str) -> list[str]:
        """input of meta: the shard folders where the shard jobs compute stats (Source.
        computes_stats), else none."""
        if not self[name].computes_stats:
            return []
        return targets.shard_dirs(self.plan(name), name)

    def files(self, name: str) -> tuple[list[str], list[str]]:
        """The data and video files of the dataset's v3.0 dataset, relative to its root: a
        converted one's planned files, an edit output's from its plan, a v3.0 source's
        own."""
        source = self[name]
        if source.converted:
            return targets.plan_files(self.plan(name))
        if name in self.edited:
            return self._edited_files(name)
        return source.files()

    def conversion_benchmarks(self, name: str) -> list[str]:
        """The benchmark files of every job that converts the dataset (targets.
        conversion_benchmarks); none for a v3.0 source."""
        if not self[name].converted:
            return []
        return targets.conversion_benchmarks(self.plan(name), name)

    def sizes_info(self, name: str, copies: bool) -> str | list:
        """input of the dataset's report: the info.json of the local v3.0 folder whose mp4
        sizes it reads; none (``[]``) for a remote v3.0 dataset unless ``copies`` are made
        (its local copy is made only for them)."""
        source = self[name]
        return [] if source.remote_url() and not copies else source.dataset_info()
