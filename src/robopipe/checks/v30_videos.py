"""The v3.0 check of one camera's video file against the ``meta/episodes`` rows that name it:
a readable stream as ``info.json`` declares it, each episode's timestamps inside the file, the
episodes tiling it."""

from __future__ import annotations

from fractions import Fraction

from robopipe.checks.report import Problem
from robopipe.checks.v30_episodes import FIX, Episodes
from robopipe.formats.v21_reader import declared_stream
from robopipe.retry import RemoteReadError


class VideoFileCheck:
    """One camera's mp4 against the episode rows that name it (thread-safe).

    ``checker`` is the v3.0 check's state (:mod:`robopipe.checks.v30`): its ``info``,
    ``tasks``, ``tolerance_s``, ``report`` and ``open(rel)``."""

    def __init__(self, checker, episodes: Episodes) -> None:
        self.checker = checker
        self.episodes = episodes

    def check(self, cam: str, rel: str, owners: list[int]) -> list[Problem]:
        import av

        from robopipe.remux import MP4, intact_until, stream_duration_s

        episodes = self.episodes
        eps = [int(episodes["episode_index"][r]) for r in owners]
        size = self.checker.report.files[rel][0]  # recorded by _locate
        try:
            with self.checker.open(rel) as source, av.open(source, format=MP4) as container:
                if not container.streams.video:
                    return [
                        Problem("video_stream", f"no video stream; {FIX}", ep, rel) for ep in eps
                    ]
                stream = container.streams.video[0]
                params = stream_params(stream)
                duration = stream_duration_s(container, stream)
                intact = intact_until(container, stream, size, duration)
        except RemoteReadError:
            raise  # a network give-up says nothing of the file
        except (av.FFmpegError, OSError) as exc:
            return [
                Problem("unreadable_file", f"cannot read video ({exc}); {FIX}", ep, rel)
                for ep in eps
            ]
        problems = []
        for what, expected in declared_stream(self.checker.info, cam).items():
            if expected is None or params[what] == expected:
                continue
            kind = "video_size" if what in ("width", "height") else f"video_{what}"
            message = (
                f"video {what} is {params[what]} but info.json says {expected} for {cam}; "
                "fix info.json or re-encode the file"
            )
            problems += [Problem(kind, message, ep, rel) for ep in eps]
        problems += self._timestamp_problems(cam, rel, owners, duration, intact, size)
        return problems

    def _timestamp_problems(self, cam, rel, owners, duration, intact, size) -> list[Problem]:
        episodes, tol = self.episodes, self.checker.tolerance_s
        fps = float(self.checker.info["fps"])
        start = episodes[f"videos/{cam}/from_timestamp"]
        stop = episodes[f"videos/{cam}/to_timestamp"]
        problems = []
        index = episodes["episode_index"]
        here = {int(index[r]): r for r in owners}
        listed = set(index.tolist())
        for ep, row in sorted(here.items()):
            # where the episode should start: where the one before ends, in this file
            if ep - 1 in here:
                previous = float(stop[here[ep - 1]])
            else:  # the first in this file; unknown when the one before is unlisted
                previous = 0.0 if ep == 0 or ep - 1 in listed else None
            t0, t1, length = float(start[row]), float(stop[row]), int(episodes["length"][row])
            span = f"from_timestamp={t0:.6f}, to_timestamp={t1:.6f}"
            if t0 < -tol or t1 <= t0 or t1 > duration + tol:
                problems.append(
                    Problem(
                        "video_timestamps",
                        f"{span} are not within the video's {duration:.6f} s ({cam})",
                        ep,
                        rel,
                    )
                )
            elif previous is not None and abs(t0 - previous) > tol:
                problems.append(
                    Problem(
                        "video_timestamps",
                        f"{span}, but it should start at {previous:.6f} s, where the "
                        f"episode before ends ({cam}): episodes follow each other in the video",
                        ep,
                        rel,
                    )
                )
            elif intact is not None and t1 > intact + tol:
                problems.append(
                    Problem(
                        "truncated_file",
                        f"truncated ({size} bytes): its packets end at {intact:.3f} s but this "
                        f"episode ends at {t1:.3f} s ({cam}); {FIX}",
                        ep,
                        rel,
                    )
                )
            if abs((t1 - t0) * fps - length) > 0.5:
                problems.append(
                    Problem(
                        "frame_count",
                        f"{span} span {(t1 - t0) * fps:.2f} frames at {fps:g} fps but the "
                        f"episode has length={length} ({cam})",
                        ep,
                        rel,
                    )
                )
        return problems


def stream_params(stream) -> dict:
    """What :func:`declared_stream` compares: codec (FFmpeg's canonical name), width and
    height (pixels), pixel format, frame rate (a Fraction)."""
    rate = stream.average_rate or stream.base_rate or 0
    codec = stream.codec_context.codec.canonical_name
    return dict(
        codec=codec,
        width=stream.width,
        height=stream.height,
        pix_fmt=stream.pix_fmt,
        fps=Fraction(rate),
    )
