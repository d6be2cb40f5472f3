"""Benchmark scenario names ``{loader}_{source}_{mode}[_e{encoding}]_{decode}_w{workers}_n{nodes}``,
parsed and expanded from a config matrix (a list per axis, plus exclusions).

``_e{encoding}`` names a training copy (``robopipe.copies.encodings``) the loader reads instead
of the converted dataset; without it the loader reads the converted dataset itself."""

from __future__ import annotations

import itertools
import re
from dataclasses import asdict, dataclass

from robopipe.bench.registry import LOADERS as REGISTRY
from robopipe.copies.encodings import ENCODING_PATTERN

LOADERS = tuple(REGISTRY)  # loader names (robopipe.bench.registry), in its order
SOURCES = ("local", "http", "s3", "hf")
DECODES = ("cpu", "cuda")
REMOTE_SOURCES = ("http", "s3", "hf")
AXES = ("loader", "source", "mode", "encoding", "decode", "workers", "nodes")
OPTIONAL_AXES = {"encoding": [None]}  # an axis the matrix may leave out, and its values then
MODE_PATTERN = "[A-Za-z0-9]+"  # single, sarm, or a window name from config (no underscore)
# the frame modes of the *_seq_* loaders: single (1 step) or seq<steps>, optionally with a
# batch size overriding bench.batch_size and a square image size to downscale to
SEQUENCE_MODE = re.compile(
    r"^(?:single|seq(?P<seq>[1-9]\d*))(?:b(?P<batch>[1-9]\d*))?(?:r(?P<res>[1-9]\d*))?$"
)

# Snakemake wildcard_constraints: loader names contain underscores, so alternations
WILDCARD_CONSTRAINTS = {
    "scenario": (
        f"(?:{'|'.join(LOADERS)})_(?:{'|'.join(SOURCES)})_{MODE_PATTERN}"
        rf"(?:_e{ENCODING_PATTERN})?_(?:{'|'.join(DECODES)})_w\d+_n\d+"
    ),
}


def snakemake_pattern(suffix: str = "") -> str:
    """The scenario grammar as a Snakemake output pattern with one named wildcard per axis
    (``{loader}``, ``{source}``, ``{mode}``, ``{copy_suffix}`` (``_e{encoding}`` or empty),
    ``{decode}``, ``{workers}``, ``{nodes}``), each constrained as :data:`SCENARIO` constrains
    it, followed by ``suffix`` (e.g. ``".svg"``)."""
    return (
        f"{{loader,{'|'.join(LOADERS)}}}_{{source,{'|'.join(SOURCES)}}}_{{mode,{MODE_PATTERN}}}"
        f"{{copy_suffix,(?:_e{ENCODING_PATTERN})?}}"
        f"_{{decode,{'|'.join(DECODES)}}}_w{{workers,[0-9]+}}_n{{nodes,[0-9]+}}{suffix}"
    )


SCENARIO = re.compile(
    rf"^(?P<loader>{'|'.join(LOADERS)})_(?P<source>{'|'.join(SOURCES)})_(?P<mode>{MODE_PATTERN})"
    rf"(?:_e(?P<encoding>{ENCODING_PATTERN}))?_(?P<decode>{'|'.join(DECODES)})_w(?P<workers>\d+)_n(?P<nodes>\d+)$"
)


@dataclass(frozen=True)
class SequenceMode:
    """A ``*_seq_*`` loader's frame mode ``single`` or ``seq<N>[b<B>][r<S>]``: sequence length
    ``N`` (``single``: 1), batch size ``B`` (None: ``bench.batch_size``), images downscaled to
    ``S`` x ``S`` pixels (None: as stored). E.g. ``seq10b64``, ``seq50b1r28``."""

    seq_length: int
    batch_size: int | None = None
    image_size: int | None = None


def parse_sequence_mode(mode: str) -> SequenceMode:
    """Parse a ``*_seq_*`` loader's frame mode (:class:`SequenceMode`).

    Raises:
        ValueError: not ``single`` or ``seq<N>[b<B>][r<S>]`` with positive numbers.
    """
    match = SEQUENCE_MODE.match(mode)
    if not match:
        raise ValueError(
            f"frame mode {mode!r}: robomimic loaders take single or seq<N>[b<batch>][r<pixels>]"
        )
    seq, batch, res = (match[k] and int(match[k]) for k in ("seq", "batch", "res"))
    return SequenceMode(seq or 1, batch, res)


@dataclass(frozen=True)
class Scenario:
    """One benchmark run: which loader reads which source, how, with how many workers/nodes."""

    loader: str
    source: str
    mode: str
    decode: str
    workers: int
    nodes: int
    encoding: str | None = None

    @property
    def name(self) -> str:
        copy = f"_e{self.encoding}" if self.encoding else ""
        return (
            f"{self.loader}_{self.source}_{self.mode}{copy}_{self.decode}"
            f"_w{self.workers}_n{self.nodes}"
        )

    @property
    def remote(self) -> bool:
        """True for network sources (the rule gives them the ``network=1`` resource)."""
        return self.source in REMOTE_SOURCES

    def as_dict(self) -> dict:
        return asdict(self)


def parse_scenario(name: str) -> Scenario:
    """Parse a scenario name.

    Raises:
        ValueError: the name does not match
            ``{loader}_{source}_{mode}[_e{encoding}]_{decode}_w{N}_n{M}``.
    """
    match = SCENARIO.match(name)
    if not match:
        raise ValueError(
            f"bad scenario name {name!r}: expected {{loader}}_{{source}}_{{mode}}"
            f"[_e{{encoding}}]_{{decode}}"
            f"_w{{workers}}_n{{nodes}} with loader in {LOADERS}, source in {SOURCES}, "
            f"decode in {DECODES}"
        )
    fields = match.groupdict()
    return Scenario(
        **{k: fields[k] for k in ("loader", "source", "mode", "decode", "encoding")},
        workers=int(fields["workers"]),
        nodes=int(fields["nodes"]),
    )


def expand_matrix(matrix: dict) -> list[str]:
    """Scenario names of the cross product of ``matrix``'s axes minus its exclusions.

    ``matrix`` maps each axis of ``AXES`` to a list of values (``encoding`` may be left out:
    no copies; ``null`` in its list is the converted dataset itself), and ``exclude`` to a list of
    partial mappings (axis -> value or list of values); a combination matching every entry of
    one exclusion is dropped. Names are sorted and unique.

    Raises:
        ValueError: a missing axis, or a value that makes an invalid name.
    """
    missing = [axis for axis in AXES if axis not in matrix and axis not in OPTIONAL_AXES]
    if missing:
        raise ValueError(f"bench matrix lacks axes {missing}")
    matrix = {**OPTIONAL_AXES, **matrix}
    exclusions = [
        {k: v if isinstance(v, list) else [v] for k, v in rule.items()}
        for rule in matrix.get("exclude") or []
    ]
    names = set()
    for values in itertools.product(*(matrix[axis] for axis in AXES)):
        combo = dict(zip(AXES, values, strict=True))
        if any(all(combo[k] in v for k, v in rule.items()) for rule in exclusions):
            continue
        names.add(parse_scenario(Scenario(**combo).name).name)
    return sorted(names)
