"""robopipe.mp4 reads what FFmpeg's demuxer reads, and the remux that uses it writes the same
bytes as the remux through PyAV alone."""

from __future__ import annotations

import hashlib
import shutil
import struct

import av
import numpy as np
import pytest

from robopipe import remux
from robopipe.mp4 import read_track


def demuxed(path):
    """Every packet PyAV demuxes (flush packets aside), and the stream's facts."""
    with av.open(str(path), format="mp4") as container:
        stream = container.streams.video[0]
        facts = (
            stream.codec_context.codec.canonical_name,
            stream.width,
            stream.height,
            stream.duration,
            stream.frames,
            stream.time_base.denominator,
        )
        packets = [
            (p.pts, p.dts, p.duration, p.is_keyframe, p.is_discard, p.is_disposable, bytes(p))
            for p in container.demux(stream)
            if p.dts is not None
        ]
    return facts, packets


def indexed(path):
    """The same from :func:`read_track`."""
    track = read_track(path)
    data = path.read_bytes()
    facts = (track.codec, track.width, track.height, track.duration, track.frames, track.timescale)
    packets = [
        (int(pts), int(dts), int(d), bool(k), False, False, data[o : o + s])
        for o, s, pts, dts, d, k in zip(
            track.offsets,
            track.sizes,
            track.pts,
            track.dts,
            track.durations,
            track.keyframes,
            strict=True,
        )
    ]
    return facts, packets


@pytest.mark.parametrize("codec", ["libsvtav1", "h264"])
def test_packets_are_ffmpegs(make_v21, codec):
    root = make_v21(episodes=3, cameras=1, codec=codec, fps=15)
    paths = sorted(root.glob("videos/**/*.mp4"))
    assert paths
    for path in paths:
        assert read_track(path).intact
        assert indexed(path) == demuxed(path)


def test_an_av1_sdtp_is_read_like_ffmpeg_reads_it(make_v21):
    """FFmpeg 8's libsvtav1 writes an ``sdtp`` marking its non-key frames disposable; FFmpeg's
    AV1 parser drops that flag on demux, so the index gives PyAV's packets."""
    path = next(make_v21(episodes=1, cameras=1, codec="libsvtav1", fps=15).glob("videos/**/*.mp4"))
    if b"sdtp" not in path.read_bytes():
        pytest.skip(f"this FFmpeg ({av.ffmpeg_version_info}) writes no sdtp for AV1")
    assert indexed(path) == demuxed(path)


def test_an_hevc_sdtp_is_left_to_ffmpeg(tmp_path):
    """HEVC packets keep sdtp's disposable flag, which a packet muxed by PyAV cannot carry."""
    path = tmp_path / "hevc.mp4"
    frames = np.random.default_rng(0).integers(0, 255, (12, 32, 32, 3), dtype=np.uint8)
    with av.open(str(path), "w", format="mp4") as container:
        stream = container.add_stream("libx265", rate=15, options={"x265-params": "log-level=0"})
        stream.width = stream.height = 32
        stream.pix_fmt = "yuv420p"
        stream.codec_tag = "hvc1"  # parameter sets out of band, as read_track needs
        for frame in frames:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        container.mux(stream.encode())
    assert any(packet[5] for packet in demuxed(path)[1])  # disposable packets, from sdtp
    assert read_track(path) is None


def test_a_remuxed_file_is_read_like_ffmpeg_reads_it(make_v21, tmp_path):
    root = make_v21(episodes=3, cameras=1, codec="h264", fps=15)
    output = tmp_path / "out.mp4"
    remux.concat_videos(sorted(root.glob("videos/**/*.mp4")), output)  # moov first, one chunk
    assert indexed(output) == demuxed(output)


def test_a_truncated_file_is_not_intact(make_v21, tmp_path):
    root = make_v21(episodes=1, cameras=1, codec="h264", fps=15)
    path = tmp_path / "cut.mp4"
    data = next(root.glob("videos/**/*.mp4")).read_bytes()
    moov = data.index(b"moov") - 4
    # the demo's files have the mdat first: cut into it and keep the index
    cut = data[: moov // 2] + data[moov:]
    assert data.index(b"mdat") < moov
    path.write_bytes(cut)
    track = read_track(path)
    assert track is None or not track.intact


def test_a_file_cut_inside_its_last_packet_is_truncated(make_v21, tmp_path):
    """A faststart file cut inside its last packet still lists it whole; FFmpeg returns it
    shorter, flagged corrupt, and ``intact_until`` does not count it."""
    root = make_v21(episodes=1, cameras=1, codec="h264", fps=15)
    faststart = tmp_path / "faststart.mp4"
    remux.concat_videos([next(root.glob("videos/**/*.mp4"))], faststart)  # index first
    track = read_track(faststart)
    cut = tmp_path / "cut.mp4"
    end = int(track.offsets[-1] + track.sizes[-1] // 2)  # half of the last packet kept
    cut.write_bytes(faststart.read_bytes()[:end])
    with av.open(str(cut), format="mp4") as container:
        stream = container.streams.video[0]
        duration = remux.stream_duration_s(container, stream)
        intact = remux.intact_until(container, stream, end, duration)
    assert intact is not None and intact < duration


def test_two_edits_are_left_to_ffmpeg(make_v21, tmp_path):
    root = make_v21(episodes=1, cameras=1, codec="h264", fps=15)
    path = tmp_path / "edits.mp4"
    data = bytearray(next(root.glob("videos/**/*.mp4")).read_bytes())
    elst = data.index(b"elst")
    struct.pack_into(">I", data, elst + 8, 2)  # entry count 2
    path.write_bytes(bytes(data))
    assert read_track(path) is None


def test_remux_from_the_index_writes_pyavs_bytes(make_v21, tmp_path, monkeypatch):
    root = make_v21(episodes=5, cameras=1, codec="h264", fps=15)
    inputs = sorted(root.glob("videos/**/*.mp4"))
    fast = remux.concat_videos(inputs, tmp_path / "fast.mp4")
    copied = []
    real = remux._copy_track
    monkeypatch.setattr(remux, "_copy_track", lambda *a: copied.append(a[0]) or real(*a))
    remux.concat_videos(inputs, tmp_path / "fast2.mp4")
    assert copied == inputs[1:]  # every input but the first (the output's template)
    monkeypatch.setattr(remux, "plain_track", lambda path: None)
    slow = remux.concat_videos(inputs, tmp_path / "slow.mp4")
    assert fast == slow
    digest = {
        p: hashlib.sha256((tmp_path / p).read_bytes()).hexdigest() for p in ("fast.mp4", "slow.mp4")
    }
    assert digest["fast.mp4"] == digest["slow.mp4"]


def test_an_input_of_other_parameters_is_named_by_pyav(make_v21, tmp_path):
    small = make_v21(episodes=2, cameras=1, codec="h264", fps=15)
    large = make_v21(episodes=1, cameras=1, codec="h264", fps=15, height=48, width=64)
    other = tmp_path / "other.mp4"
    shutil.copy(next(large.glob("videos/**/*.mp4")), other)
    inputs = [*sorted(small.glob("videos/**/*.mp4")), other]
    with pytest.raises(remux.VideoError, match="differs from") as caught:
        remux.concat_videos(inputs, tmp_path / "out.mp4")
    assert caught.value.path == other


def test_run_digests_from_the_index_are_pyavs(make_v21, tmp_path):
    root = make_v21(episodes=4, cameras=1, codec="h264", fps=15)
    output = tmp_path / "out.mp4"
    remuxed = remux.concat_videos(sorted(root.glob("videos/**/*.mp4")), output)
    runs = [(r.frames, r.offset_ticks) for r in remuxed]
    short = [*runs[:-1], (runs[-1][0] - 1, runs[-1][1])]  # the last packet left over
    for wanted in (runs, short):
        with av.open(str(output), format="mp4") as container:
            stream = container.streams.video[0]
            indexed = [d.as_dict() for d in remux.run_digests(output, container, stream, wanted)]
            demuxed = [d.as_dict() for d in remux._demuxed_runs(container, stream, wanted)]
        assert indexed == demuxed
    assert [d["packets"] for d in indexed[:-1]] == [n for n, _ in short]
    assert indexed[-1]["packets"] == 1
    assert indexed[:-2] == [r.digest for r in remuxed[:-1]]  # what the remux read
