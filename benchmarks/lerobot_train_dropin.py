"""``lerobot-train`` (lerobot 0.6.1) with robopipe's ``LeRobotDataset`` in place of lerobot's.

    .venv-lerobot/bin/python benchmarks/lerobot_train_dropin.py [--root DIR] [--steps 3]
        [--batch-size 4] [--seed 1000] [--work results/lerobot_train_dropin]

Runs ``lerobot-train`` twice in the peer environment (``tools/lerobot_env.sh``), each in its
own process with the same seed and arguments: once as it is, once with the hook below (robopipe
imported from this checkout's ``src/``). The policy is a tiny ACT (ResNet-18 without
pretrained weights, one encoder and one decoder layer, chunks of 10 actions), trained on the
CPU without workers, checkpoints or wandb. Each run records the batches its data loader gave
(``lerobot-train``'s ``EpisodeAwareSampler`` picks the indices; they are the same for the same
seed) and the loss of every step. Then it checks that every batch is equal (every key, dtype,
shape and value) and that every loss is finite and equal, and prints one JSON line (and writes
it to ``<work>/result.json``). Exit status 1 when anything differs.

The hook, one line, for your own launcher (robopipe on ``PYTHONPATH`` or installed)::

    import lerobot.datasets.factory as f, robopipe.loading as r
    f.LeRobotDataset, f.LeRobotDatasetMetadata = r.LeRobotDataset, r.LeRobotDatasetMetadata

then call ``lerobot.scripts.lerobot_train.main()`` with ``lerobot-train``'s arguments.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CR5 = REPO / ".." / "shared" / "datasets" / "cr5_20ep_v30_lerobot"
LOADERS = ("lerobot", "robopipe")
TINY_ACT = [
    "--policy.type=act",
    "--policy.device=cpu",
    "--policy.push_to_hub=false",
    "--policy.pretrained_backbone_weights=null",
    "--policy.chunk_size=10",
    "--policy.n_action_steps=10",
    "--policy.dim_model=64",
    "--policy.n_heads=2",
    "--policy.dim_feedforward=128",
    "--policy.n_encoder_layers=1",
    "--policy.n_decoder_layers=1",
    "--policy.n_vae_encoder_layers=1",
    "--policy.latent_dim=8",
]


def use_robopipe() -> None:
    """The hook: ``lerobot-train`` builds robopipe's dataset and metadata classes."""
    import lerobot.datasets.factory as f

    import robopipe.loading as r

    f.LeRobotDataset, f.LeRobotDatasetMetadata = r.LeRobotDataset, r.LeRobotDatasetMetadata


def train_and_record(loader: str, record: Path, train_args: list[str]) -> None:
    """Run ``lerobot-train`` with ``train_args`` (with robopipe's classes when ``loader`` is
    ``robopipe``), recording the batches of its data loader, as they come out of it, and each
    step's loss into ``record`` (``torch.save``)."""
    import torch
    from lerobot.scripts import lerobot_train

    if loader == "robopipe":
        use_robopipe()
    batches, losses = [], []
    cycle, update_policy = lerobot_train.cycle, lerobot_train.update_policy

    def recording_cycle(dataloader):
        for batch in cycle(dataloader):
            batches.append(
                {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
            )
            yield batch

    def recording_update(train_metrics, *args, **kwargs):
        out = update_policy(train_metrics, *args, **kwargs)
        losses.append(out[0].loss.val)
        return out

    lerobot_train.cycle, lerobot_train.update_policy = recording_cycle, recording_update
    sys.argv = ["lerobot-train", *train_args]
    start = time.perf_counter()
    lerobot_train.main()
    seconds = time.perf_counter() - start
    dataset_class = lerobot_train.make_train_eval_datasets.__globals__["LeRobotDataset"]
    torch.save(
        {
            "batches": batches,
            "losses": losses,
            "seconds": seconds,
            "dataset_class": f"{dataset_class.__module__}.{dataset_class.__name__}",
        },
        record,
    )


def differences(theirs: dict, ours: dict) -> list[str]:
    """What differs between two batches: keys (in order), then each tensor's dtype, shape and
    values, each other value by ``==``."""
    import torch

    if list(theirs) != list(ours):
        return [f"keys {list(theirs)} != {list(ours)}"]
    found = []
    for key, a in theirs.items():
        b = ours[key]
        if isinstance(a, torch.Tensor):
            if a.dtype != b.dtype or a.shape != b.shape:
                found.append(f"{key}: {a.dtype} {tuple(a.shape)} != {b.dtype} {tuple(b.shape)}")
            elif not torch.equal(a, b):
                found.append(f"{key}: values differ")
        elif a != b:
            found.append(f"{key}: {a!r} != {b!r}")
    return found


def compare(work: Path) -> dict:
    """The two runs' records compared: equal batches, finite and equal losses."""
    import torch

    runs = {loader: torch.load(work / f"{loader}.pt", weights_only=False) for loader in LOADERS}
    theirs, ours = runs["lerobot"], runs["robopipe"]
    batch_differences = [
        f"step {step + 1}: {why}"
        for step, (a, b) in enumerate(zip(theirs["batches"], ours["batches"], strict=True))
        for why in differences(a, b)
    ]
    return {
        "steps": len(ours["losses"]),
        "batches_equal": not batch_differences and len(theirs["batches"]) > 0,
        "batch_differences": batch_differences[:10],
        "batch_keys": list(ours["batches"][0]) if ours["batches"] else [],
        "indices": [b["index"].tolist() for b in ours["batches"]],
        "loss_lerobot": theirs["losses"],
        "loss_robopipe": ours["losses"],
        "losses_equal": theirs["losses"] == ours["losses"],
        "losses_finite": all(math.isfinite(x) for x in theirs["losses"] + ours["losses"]),
        "seconds": {loader: round(run["seconds"], 1) for loader, run in runs.items()},
        "dataset_class": {loader: run["dataset_class"] for loader, run in runs.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=CR5, help="the v3.0 dataset")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1000)
    parser.add_argument("--work", type=Path, default=REPO / "results" / "lerobot_train_dropin")
    parser.add_argument("--child", choices=LOADERS, help=argparse.SUPPRESS)
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    if args.child:  # ... --child <loader> --work <work> -- <lerobot-train arguments>
        train_and_record(args.child, args.work / f"{args.child}.pt", argv[split + 1 :])
        return
    args.work.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"), os.getenv("PYTHONPATH")])),
        "HF_HOME": str(args.work / "hf"),
        "HF_HUB_OFFLINE": "1",
        "WANDB_MODE": "disabled",
    }
    for loader in LOADERS:
        train_args = [
            "--dataset.repo_id=local/dropin",
            f"--dataset.root={args.root.resolve()}",
            "--dataset.video_backend=torchcodec",
            *TINY_ACT,
            f"--batch_size={args.batch_size}",
            f"--steps={args.steps}",
            f"--seed={args.seed}",
            "--num_workers=0",
            "--log_freq=1",
            "--save_checkpoint=false",
            "--wandb.enable=false",
            f"--output_dir={args.work / loader / 'train'}",
        ]
        command = [sys.executable, __file__, "--child", loader, "--work", str(args.work), "--"]
        subprocess.run([*command, *train_args], env=env, check=True)
    result = {"root": str(args.root), "batch_size": args.batch_size, **compare(args.work)}
    (args.work / "result.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))
    ok = result["batches_equal"] and result["losses_equal"] and result["losses_finite"]
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
