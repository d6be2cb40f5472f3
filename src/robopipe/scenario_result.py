"""The result file of one benchmark scenario: its schema, written and read in one place.

The benchmark (:mod:`robopipe.bench`) writes ``results/bench/{dataset}/{scenario}.json`` with
:func:`write_scenario_result` and the report (:mod:`robopipe.report`) reads it with
:func:`read_scenario_result`; both validate it against ``scenario_result.schema.yaml`` (beside
this module), so neither depends on the other.
"""

from __future__ import annotations

import csv
import json
from functools import cache
from importlib import resources
from pathlib import Path

import jsonschema
import yaml

from robopipe.atomic import atomic_path, write_json


@cache
def scenario_schema() -> dict:
    """The JSON schema of a scenario result (``scenario_result.schema.yaml``)."""
    text = resources.files("robopipe").joinpath("scenario_result.schema.yaml").read_text("utf-8")
    return yaml.safe_load(text)


def scenario_fields() -> tuple[str, ...]:
    """The fields every scenario result has, in the schema's order."""
    return tuple(scenario_schema()["required"])


def check_scenario_result(result: dict, path: str | Path) -> None:
    """Validate ``result`` against the schema.

    Raises:
        ValueError: naming ``path``, the offending field and what is wrong.
    """
    try:
        jsonschema.validate(result, scenario_schema())
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
        raise ValueError(f"{path}: scenario result field {where}: {exc.message}") from None


def write_scenario_result(result: dict, json_path: str | Path, csv_path: str | Path) -> None:
    """Validate ``result``, then write it as JSON and as a one-row CSV of its scalar fields
    (nested dicts flattened with ``_``: ``latency_ms_p50``, ``decoder_cache_hits``; the ``ranks``
    list left out). Both files are written atomically.

    Raises:
        ValueError: the result does not match the schema (nothing is written).
    """
    check_scenario_result(result, json_path)
    write_json(json_path, result)
    row = {}
    for key, value in result.items():
        if isinstance(value, dict):
            row.update({f"{key}_{k}": v for k, v in value.items()})
        elif not isinstance(value, list):
            row[key] = value
    with atomic_path(csv_path) as tmp, open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(row))
        writer.writeheader()
        writer.writerow(row)


def read_scenario_result(path: str | Path) -> dict:
    """Read and validate a scenario result JSON.

    Raises:
        ValueError: the file is unreadable, not JSON, or does not match the schema.
    """
    try:
        result = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: unreadable result file: {exc}") from None
    check_scenario_result(result, path)
    return result
