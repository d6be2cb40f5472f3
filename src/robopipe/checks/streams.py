"""Each camera's stream parameters across a source's episodes: the episodes whose stream
differs from most episodes of the same camera in what ``info.json`` does not declare."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping

from robopipe.checks.report import Problem
from robopipe.formats.v21_reader import V21Source, declared_stream

# the stream parameters compared across a camera's episodes, in :func:`consistency_key` order
CONSISTENCY = ("codec", "width", "height", "pix_fmt", "time_base")


def consistency_key(params: Mapping) -> tuple:
    """The :data:`CONSISTENCY` parameters of a stream, as JSON keeps them (the time base as
    its text: ``1/15360``, as the messages print it)."""
    return tuple(str(params[w]) if w == "time_base" else params[w] for w in CONSISTENCY)


class StreamRuns:
    """Each camera's stream parameters (:func:`consistency_key`) by episode, held as runs of
    consecutive episodes per distinct value: a few entries per camera, not one per episode.

    ``runs[key][params]`` is a list of ``[first, stop)`` episode ranges, the values in the
    order their first episode comes (episodes are added in increasing order).
    """

    def __init__(self, keys) -> None:
        self.runs: dict[str, dict[tuple, list[list[int]]]] = {k: {} for k in keys}

    def add(self, key: str, episode: int, params: tuple) -> None:
        """Camera ``key``'s stream of ``episode`` (after any episode added before)."""
        ranges = self.runs[key].setdefault(params, [])
        if ranges and ranges[-1][1] == episode:
            ranges[-1][1] = episode + 1
        else:
            ranges.append([episode, episode + 1])

    def update(self, other: Mapping[str, list]) -> None:
        """Add a later part's runs, as :meth:`to_json` wrote them."""
        for key, values in other.items():
            for params, ranges in values:
                for first, stop in ranges:
                    mine = self.runs[key].setdefault(tuple(params), [])
                    if mine and mine[-1][1] == first:
                        mine[-1][1] = stop
                    else:
                        mine.append([first, stop])

    def to_json(self) -> dict:
        """``{key: [[params, ranges], ...]}``."""
        return {k: [[list(p), r] for p, r in v.items()] for k, v in self.runs.items()}

    def problems(self, source: V21Source) -> list[Problem]:
        """Episodes whose stream differs from most episodes of the same camera in what
        info.json does not declare: the time base, and any parameter it leaves out."""
        problems = []
        for key, by_value in self.runs.items():
            declared = declared_stream(source.info, key)
            for i, what in enumerate(CONSISTENCY):
                if declared.get(what) is not None:
                    continue  # each episode was compared with info.json
                values: Counter = Counter()
                for params, ranges in by_value.items():
                    values[params[i]] += sum(stop - first for first, stop in ranges)
                usual = values.most_common(1)[0][0] if values else None
                odd = sorted(
                    (episode, params[i])
                    for params, ranges in by_value.items()
                    if params[i] != usual
                    for first, stop in ranges
                    for episode in range(first, stop)
                )
                for episode, value in odd:
                    kind = "video_size" if what in ("width", "height") else f"video_{what}"
                    rel = os.path.relpath(source.video_file(episode, key), source.root)
                    message = (
                        f"video {what} is {value} but {values[usual]} other episodes of "
                        f"{key} have {usual}; re-encode the episode to match, or leave it out "
                        "with `skip_episodes`"
                    )
                    problems.append(Problem(kind, message, episode, rel))
        return problems


def stream_signature(track) -> tuple | None:
    """What fixes an mp4's stream parameters and frame rate as PyAV reports them: the sample
    entry (codec, size, parameter sets), the time scale and the one frame duration
    (:class:`robopipe.mp4.Track`); None for no track or a variable frame duration."""
    if track is None or track.durations.min() != track.durations.max():
        return None
    return track.parameters, track.timescale, int(track.durations[0])
