"""The ``edits:`` of a workflow config: each edit's outputs (a split has one per split), its
inputs, and what is wrong with it, decided at parse time before any job runs.

An edit's ``source`` (and each of a merge's ``sources``) is a dataset of the config (its v3.0:
published, or its local copy for a remote v3.0 one), the output of another edit, or a local
v3.0 folder. Each output is a dataset of its own (:func:`edited_entries`): checked,
benchmarked, reported and pushed like the configured ones.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from robopipe.edits.plan import (
    check_fractions,
    check_mergeable,
    check_modify_tasks,
    kept_episodes,
    recomputed_features,
    removed_features,
    split_episodes,
)
from robopipe.errors import DatasetError
from robopipe.layout import INFO_PATH, PUBLISHED_INFO, QUALITY_FILE


@dataclass(frozen=True)
class EditOutput:
    """One dataset an edit makes: ``results/<name>/v3.0``.

    Attributes:
        name: the output's name (the edit's, or ``<edit>_<split>`` for a split).
        edit: the edit's name in the config.
        split: the split this output is (a ``split`` operation), else None.
    """

    name: str
    edit: str
    split: str | None = None


def edit_outputs(entries: Mapping[str, Mapping]) -> list[EditOutput]:
    """The datasets the edits ``entries`` (the config's ``edits:``) make, in config order: one
    per edit, a split's one per split (``<edit>_<split>``)."""
    outputs = []
    for edit, entry in entries.items():
        operation = entry["operation"]
        if operation["type"] == "split":
            splits = operation.get("splits") or {}
            outputs += [EditOutput(f"{edit}_{split}", edit, split) for split in splits]
        else:
            outputs.append(EditOutput(edit, edit))
    return outputs


def edited_entries(config: Mapping) -> dict[str, dict]:
    """Each edit output's dataset entry, by name (robopipe.workflow.sources.Datasets'
    ``edited``): its edit's ``quality:`` and ``push:`` sections, where given."""
    entries = config.get("edits") or {}
    return {
        output.name: {
            key: entries[output.edit][key]
            for key in ("quality", "push")
            if key in entries[output.edit]
        }
        for output in edit_outputs(entries)
    }


class Edits:
    """The configured edits.

    Args:
        config: the whole config; ``config.get("edits")`` maps each edit's name to
            ``{"source": ..., "operation": {"type": ..., ...}}``.
        dataset_info: the v3.0 ``meta/info.json`` of a configured dataset
            (:meth:`robopipe.sources.base.Source.dataset_info`), by name.
        dataset_ready: what must exist before a configured dataset is read
            (:meth:`robopipe.sources.base.Source.ready`), by name.
        dataset_plan: the conversion's ``plan.json`` of a configured dataset that is
            converted here (it maps the source's episode indices, which quality findings
            name, to the v3.0's), else None, by name.

    :attr:`problems` lists every bad edit found at parse time, one ``robopipe: ...`` line
    each: an unknown source, a name taken twice, a cycle, and, where an input's info.json
    already exists, an unknown episode index or merge inputs that differ (fractions that do
    not add up to 1 need no input).
    """

    def __init__(
        self,
        config: dict,
        dataset_info: Callable[[str], str],
        dataset_ready: Callable[[str], list[str]] = lambda name: [],
        dataset_plan: Callable[[str], str | None] = lambda name: None,
    ) -> None:
        self.entries = dict(config.get("edits") or {})
        self.datasets = dict(config.get("datasets") or {})
        self._dataset_info = dataset_info
        self._dataset_ready = dataset_ready
        self._dataset_plan = dataset_plan
        self.outputs: dict[str, EditOutput] = {}
        self.problems: list[str] = []
        for output in edit_outputs(self.entries):
            if output.name in self.datasets or output.name in self.outputs:
                self._problem(output.name, "this name is taken by a dataset or another edit")
            self.outputs[output.name] = output
            if output.split is not None and "push" in self.entries[output.edit]:
                self._problem(
                    output.name,
                    "push: a split makes one dataset per split; push each from an edit "
                    "of its own (source: the split's output)",
                )
        for name in self.outputs:
            self._check(name)

    def names(self) -> list[str]:
        """Every edit output, in config order."""
        return list(self.outputs)

    def _problem(self, name: str, message: str) -> None:
        self.problems.append(f"robopipe: edit {name!r}: {message}")

    def operation(self, name: str) -> dict:
        """The output's operation as configured."""
        return dict(self.entries[self.outputs[name].edit]["operation"])

    def source_names(self, name: str) -> list[str]:
        """The output's inputs as the config names them."""
        entry = self.entries[self.outputs[name].edit]
        if entry["operation"]["type"] == "merge":
            return list(entry["operation"].get("sources") or [])
        return [entry["source"]] if entry.get("source") else []

    def info_file(self, source: str) -> str:
        """The v3.0 ``meta/info.json`` of an input: a dataset's, an edit output's, or a
        folder's."""
        if source in self.outputs:
            return PUBLISHED_INFO.format(dataset=source)
        if source in self.datasets:
            return self._dataset_info(source)
        return os.path.join(source, INFO_PATH)

    def roots(self, name: str) -> list[str]:
        """The v3.0 folders of the output's inputs."""
        return [
            os.path.dirname(os.path.dirname(self.info_file(s))) for s in self.source_names(name)
        ]

    def plan_inputs(self, name: str) -> dict[str, list[str] | str]:
        """input of the plan job: ``info``, each input's info.json (after what must exist
        first); for ``flagged_by``, ``quality``, the findings of the source's quality.json, and
        for a converted source ``conversion_plan``, its plan.json (source -> output indices)."""
        info = []
        for source in self.source_names(name):
            if source in self.datasets and source not in self.outputs:
                info += self._dataset_ready(source)
            info.append(self.info_file(source))
        inputs: dict[str, list[str] | str] = {"info": info}
        if self.operation(name).get("flagged_by"):
            source = self.source_names(name)[0]
            inputs["quality"] = QUALITY_FILE.format(dataset=source)
            plan = self._dataset_plan(source)
            if plan is not None:
                inputs["conversion_plan"] = plan
        return inputs

    def _check(self, name: str) -> None:
        operation = self.operation(name)
        kind = operation["type"]
        sources = self.source_names(name)
        if kind == "merge" and len(sources) < 2:
            return self._problem(name, "merge: needs `sources:`, two or more")
        if kind != "merge" and len(sources) != 1:
            return self._problem(name, f"{kind}: needs `source:`")
        for source in sources:
            if source in self.outputs or source in self.datasets:
                continue
            if "://" in source:
                return self._problem(
                    name,
                    f"source {source!r}: a remote v3.0 input is a dataset of the config "
                    f"(datasets: <name>: {{url: {source}}}, or repo_id:), named here by its "
                    "name; the edit reads its checked local copy",
                )
            if not os.path.isfile(os.path.join(source, INFO_PATH)):
                return self._problem(
                    name,
                    f"source {source!r} is no dataset, no edit and no v3.0 folder "
                    f"(datasets: {', '.join(self.datasets) or 'none'}; edits: "
                    f"{', '.join(self.outputs)})",
                )
        if self._cycle(name, []):
            return self._problem(name, "its sources lead back to itself")
        if kind == "delete_episodes":
            given = bool(operation.get("episode_indices")) + bool(operation.get("flagged_by"))
            if given != 1:
                return self._problem(
                    name, "delete_episodes: give `episode_indices` or `flagged_by`"
                )
            if operation.get("flagged_by") and not (
                sources[0] in self.datasets or sources[0] in self.outputs
            ):
                return self._problem(
                    name, "flagged_by: the source must be a dataset or an edit of the config"
                )
        try:
            if kind == "split":
                check_fractions_or_lists(name, operation.get("splits") or {})
            infos = [self._info_now(s) for s in sources]
            if any(info is None for info in infos):
                return None  # made by a job: checked by the plan job
            if kind == "merge":
                check_mergeable(sources, infos)
            elif kind == "remove_feature":
                removed_features(sources[0], infos[0], operation)
            elif kind == "modify_tasks":
                check_modify_tasks(sources[0], operation, infos[0]["total_episodes"])
            elif kind == "recompute_stats":
                recomputed_features(sources[0], infos[0], operation)
            elif kind == "split" or operation.get("episode_indices"):
                kept_episodes(
                    sources[0], infos[0]["total_episodes"], operation, self.outputs[name].split
                )
        except DatasetError as exc:
            self.problems.append(f"robopipe: edit {name!r}: {exc}")
        return None

    def _info_now(self, source: str) -> dict | None:
        path = self.info_file(source)
        if not os.path.isfile(path):
            return None
        with open(path, encoding="utf-8") as f:
            return json.load(f)

    def _cycle(self, name: str, seen: list[str]) -> bool:
        if name in seen:
            return True
        return any(
            self._cycle(s, [*seen, name]) for s in self.source_names(name) if s in self.outputs
        )


def check_fractions_or_lists(name: str, splits: dict) -> None:
    """The parse-time part of :func:`robopipe.edits.plan.split_episodes`: fractions that add
    up to 1, or lists that share no episode.

    Raises:
        DatasetError: as :func:`robopipe.edits.plan.split_episodes`.
    """
    values = list(splits.values())
    if values and all(isinstance(v, int | float) for v in values):
        check_fractions(name, splits)
    elif values and all(isinstance(v, list) for v in values):
        top = max((max(v) for v in values if v), default=0) + 1
        split_episodes(name, top, splits)
    else:
        raise DatasetError(name, "split: give every split a fraction, or every split a list")
