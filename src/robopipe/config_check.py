"""Unknown keys in the workflow's config, named with the nearest valid key.

Snakemake's ``validate`` checks the config against ``workflow/schemas/config.schema.yaml``,
but its message for a misspelt key is a JSON-schema dump. :func:`unknown_keys` walks the
config along the schema first and names every key that no ``properties`` allows where
``additionalProperties`` is false, with :func:`difflib.get_close_matches`'s suggestion
(:func:`key_hint`, which other settings of robopipe's use for their unknown keys too).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping


def unknown_keys(config: Mapping, schema: Mapping) -> list[str]:
    """One message per unknown key, e.g. ``config: datasets.cr5: unknown key 'conversoin';
    did you mean 'conversion'?``, in config order.

    Args:
        config: the merged config (nested dicts and lists).
        schema: the JSON schema (``definitions`` referenced as ``#/definitions/<name>``).
    """
    messages: list[str] = []
    _walk(config, schema, schema, "", messages)
    return messages


def config_problems(config: Mapping, schema: Mapping) -> list[str]:
    """What is wrong with ``config``: its unknown keys (:func:`unknown_keys`) if any, else
    every other violation of ``schema``, as ``config: <key path>: <jsonschema message>``."""
    import jsonschema

    messages = unknown_keys(config, schema)
    if messages:
        return messages
    errors = jsonschema.Draft202012Validator(schema).iter_errors(config)
    return [
        f"config: {'.'.join(map(str, error.absolute_path)) or 'top level'}: {error.message}"
        for error in sorted(errors, key=lambda e: [str(p) for p in e.absolute_path])
    ]


def _resolve(node: Mapping, root: Mapping) -> Mapping:
    while "$ref" in node:
        node = root["definitions"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def _walk(value, node: Mapping, root: Mapping, where: str, messages: list[str]) -> None:
    node = _resolve(node, root)
    if not isinstance(value, Mapping):
        return
    properties = node.get("properties", {})
    extra = node.get("additionalProperties", True)
    for key, item in value.items():
        if key in properties:
            _walk(item, properties[key], root, f"{where}.{key}" if where else str(key), messages)
        elif isinstance(extra, Mapping):
            _walk(item, extra, root, f"{where}.{key}" if where else str(key), messages)
        elif extra is False:
            hint = key_hint(str(key), properties)
            messages.append(f"config: {where or 'top level'}: unknown key {key!r}; {hint}")


def key_hint(key: str, valid: Iterable[str]) -> str:
    """The hint for an unknown ``key``: ``did you mean 'x'?`` naming the nearest of ``valid``
    (:func:`difflib.get_close_matches`, its default cutoff 0.6), else ``valid: a, b, ...``
    in the given order; e.g. ``key_hint("steady_z", ["steady_s", "seed"])`` is
    ``did you mean 'steady_s'?``."""
    valid = list(valid)
    near = difflib.get_close_matches(key, valid, n=1)
    return f"did you mean {near[0]!r}?" if near else f"valid: {', '.join(valid)}"
