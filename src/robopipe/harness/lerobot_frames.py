"""Frames served by lerobot 0.6.1's ``LeRobotDataset`` against the source's own frames; run by
the peer interpreter (:func:`robopipe.harness.lerobot_compat.check_loader` starts it)::

    <peer python> lerobot_frames.py REPO_ID ROOT SOURCE RESULT INDICES

``LeRobotDataset(REPO_ID, root=ROOT, return_uint8=True)`` serves the items of ``INDICES``
(comma-separated global indices) of the converted v3.0 dataset ``ROOT``; each camera's frame
(uint8, ``(C, H, W)``) must equal, bit for bit, the frame that torchcodec decodes
(``seek_mode="exact"``) from the v2.1 ``SOURCE``'s own mp4 of that episode. Writes ``RESULT``:
JSON ``{"items": n, "cameras": n, "problems": [one line each]}``. Imports lerobot, torch and
torchcodec from that interpreter, nothing from robopipe.
"""

import json
import sys
from pathlib import Path


def serve_frames(repo_id: str, root: str, source: str, result_path: str, indices: str) -> None:
    """Compare the served frames of ``indices`` with the source's; write ``result_path``."""
    import torch
    from lerobot.datasets import LeRobotDataset
    from torchcodec.decoders import VideoDecoder

    ds = LeRobotDataset(repo_id, root=root, return_uint8=True)
    info = json.loads(Path(source, "meta/info.json").read_text())
    problems = []
    items = [int(i) for i in indices.split(",")]
    for idx in items:
        item = ds[idx]
        ep, frame = int(item["episode_index"]), int(item["frame_index"])
        if int(item["index"]) != idx:
            problems.append(f"item {idx}: index {int(item['index'])}")
        for key in ds.meta.video_keys:
            rel = info["video_path"].format(
                episode_chunk=ep // info["chunks_size"], video_key=key, episode_index=ep
            )
            expected = VideoDecoder(str(Path(source, rel)), seek_mode="exact")[frame]
            served = item[key]
            if served.dtype != torch.uint8 or served.shape != expected.shape:
                problems.append(f"item {idx} {key}: {served.dtype} {tuple(served.shape)}")
            elif not torch.equal(served, expected):
                diff = (served.int() - expected.int()).abs().max().item()
                where = f"item {idx} (episode {ep}, frame {frame}) {key}"
                problems.append(f"{where}: max |diff| {diff}")
    Path(result_path).write_text(
        json.dumps({"items": len(items), "cameras": len(ds.meta.video_keys), "problems": problems})
    )


if __name__ == "__main__":
    serve_frames(*sys.argv[1:])
