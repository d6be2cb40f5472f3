"""Make a training copy: one output file (``copy_file``, a workflow job) or a whole copy in
this process (``make_copy``)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from robopipe.atomic import write_json
from robopipe.copies.encodings import Encoding, parse_encoding
from robopipe.copies.finish import finish_copy, output_files
from robopipe.copies.frames import copy_data_file
from robopipe.copies.reencode import copy_video
from robopipe.formats.v30_reader import read_meta


def copy_file(
    source: str | Path,
    relative: str,
    output: str | Path,
    encoding: Encoding,
    *,
    fidelity_stride: int = 1,
) -> dict:
    """Write one output file of a copy: the mp4 or data parquet ``relative`` of ``source`` in
    ``encoding`` (``copy_video`` or ``copy_data_file``); return its measurements."""
    source, output = Path(source), Path(output)
    if encoding.in_video_files:
        return copy_video(source / relative, output, encoding, fidelity_stride=fidelity_stride)
    return copy_data_file(
        read_meta(source), relative, output, encoding, fidelity_stride=fidelity_stride
    )


def make_copy(
    source: str | Path,
    output: str | Path,
    measurements: str | Path,
    encoding: str,
    *,
    fidelity_stride: int = 1,
) -> dict:
    """Make a whole copy in this process, file after file (the workflow runs the files as
    parallel jobs); returns ``finish_copy``'s measurements."""
    parsed = parse_encoding(encoding)
    with tempfile.TemporaryDirectory(prefix="robopipe-copy-") as staged:
        results = []
        for relative in output_files(source, parsed):
            result = copy_file(
                source, relative, Path(staged, relative), parsed, fidelity_stride=fidelity_stride
            )
            results.append(Path(staged, relative + ".json"))
            write_json(results[-1], result)
        return finish_copy(source, staged, results, output, measurements, parsed)
