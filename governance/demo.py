"""The sample storage tree for `govern demo`: realistic training runs on local disk.

Weight and optimizer files are sparse (their size is real, their disk use is not), so the
demo shows true-to-life bytes and dollars while costing almost nothing to create.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

GiB = 1024**3
MiB = 1024**2


@dataclass
class TreeWriter:
    """Writes files under `root` with a chosen modification time."""

    root: Path
    now: datetime
    files: int = 0
    total_bytes: int = 0

    def write(
        self, rel: str, *, age: timedelta, size: int | None = None, content: bytes | None = None
    ) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if content is not None:
            path.write_bytes(content)
        else:
            with open(path, "wb") as fh:
                fh.truncate(size or 0)
        ts = (self.now - age).timestamp()
        os.utime(path, (ts, ts))
        self.files += 1
        self.total_bytes += path.stat().st_size


def _hf_checkpoint(
    w: TreeWriter,
    run: str,
    step: int,
    age: timedelta,
    *,
    shards: int,
    loss: float,
    history: list[dict[str, float]],
    complete: bool = True,
) -> None:
    ck = f"{run}checkpoint-{step}/"
    shard_size = 2 * GiB
    names = [f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(1, shards + 1)]
    index = {
        "metadata": {"total_size": shard_size * shards},
        "weight_map": {f"layers.{i}.weight": names[i % shards] for i in range(shards * 4)},
    }
    written = names if complete else names[:-1]
    for name in written:
        w.write(ck + name, age=age, size=shard_size)
    w.write(ck + "model.safetensors.index.json", age=age, content=json.dumps(index).encode())
    w.write(ck + "config.json", age=age, content=b'{"model_type": "llama", "hidden_size": 2048}')
    w.write(ck + "optimizer.pt", age=age, size=2 * shard_size * shards)
    w.write(ck + "scheduler.pt", age=age, size=1064)
    w.write(ck + "rng_state.pth", age=age, size=14_512)
    w.write(ck + "training_args.bin", age=age, size=5_304)
    if complete:
        state = {
            "global_step": step,
            "best_metric": None,
            "best_model_checkpoint": None,
            "log_history": [*history, {"step": step, "eval_loss": loss}],
        }
        w.write(ck + "trainer_state.json", age=age, content=json.dumps(state).encode())


def build_demo_tree(root: Path, now: datetime) -> TreeWriter:
    """Write the sample tree; returns the writer with its file and byte counts."""
    w = TreeWriter(root, now)
    day = timedelta(days=1)

    # A finished HF Trainer run: 16 checkpoints over two months, final weights exported.
    run = "nlp/llm-pretrain/runs/llama-1b-a/"
    history: list[dict[str, float]] = []
    for i in range(16):
        step = (i + 1) * 1000
        loss = 2.0 - 0.08 * i + (0.15 if i == 13 else 0.0)
        age = (64 - 4 * i) * day
        _hf_checkpoint(w, run, step, age, shards=2, loss=loss, history=list(history))
        history.append({"step": step, "eval_loss": loss})
    final_names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    for name in final_names:
        w.write(f"{run}final/{name}", age=4 * day, size=2 * GiB)
    final_index = {
        "metadata": {},
        "weight_map": {"embed.weight": final_names[0], "lm_head.weight": final_names[1]},
    }
    w.write(
        f"{run}final/model.safetensors.index.json",
        age=4 * day,
        content=json.dumps(final_index).encode(),
    )
    w.write(f"{run}final/config.json", age=4 * day, content=b'{"model_type": "llama"}')
    w.write(f"{run}final/tokenizer.json", age=4 * day, size=2 * MiB)
    w.write(f"{run}COMPLETED", age=4 * day, content=b"")
    for i in range(30):
        w.write(
            f"{run}logs/events.out.tfevents.{1700000000 + i}.node{i % 4}",
            age=(64 - 2 * i) * day,
            size=40 * MiB,
        )

    # A run still training: recent checkpoints, the newest one still being written.
    run = "nlp/llm-pretrain/runs/llama-1b-b/"
    history = []
    for i in range(6):
        step = (i + 1) * 500
        _hf_checkpoint(
            w,
            run,
            step,
            (12 - 2 * i) * day + timedelta(hours=1),
            shards=2,
            loss=2.2 - 0.05 * i,
            history=list(history),
        )
        history.append({"step": step, "eval_loss": 2.2 - 0.05 * i})
    _hf_checkpoint(w, run, 3500, timedelta(hours=2), shards=2, loss=1.9, history=[], complete=False)
    w.write(f"{run}train.log", age=timedelta(hours=1), size=12 * MiB)

    # A failed Lightning run: .ckpt files (optimizer inside; cannot be stripped).
    run = "vision/detector/runs/yolo-c/"
    for i in range(8):
        step = (i + 1) * 2000
        w.write(
            f"{run}checkpoints/epoch={i}-step={step}-val_loss={0.9 - 0.05 * i:.2f}.ckpt",
            age=(48 - i) * day,
            size=3 * GiB,
        )
    w.write(
        f"{run}FAILED",
        age=40 * day,
        content=b"CUDA error: an illegal memory access was encountered\n",
    )

    # An abandoned DeepSpeed run: a tag newer than `latest` is a half-written save.
    run = "vision/segmenter/runs/sam-d/"
    for step in (1000, 2000, 3000):
        tag = f"{run}global_step{step}/"
        age = (30 - step // 500) * day
        w.write(f"{tag}mp_rank_00_model_states.pt", age=age, size=2 * GiB)
        for dp_rank in range(2):
            w.write(
                f"{tag}zero_pp_rank_{dp_rank}_mp_rank_00_optim_states.pt", age=age, size=3 * GiB
            )
    w.write(f"{run}latest", age=24 * day, content=b"global_step2000")

    # Residue: a staged HF save that never got renamed, temp files.
    w.write(
        "nlp/llm-pretrain/runs/llama-1b-a/tmp-checkpoint-17000/model-00001-of-00002.safetensors",
        age=5 * day,
        size=2 * GiB,
    )
    w.write("scratch/upload.parquet.tmp", age=9 * day, size=700 * MiB)
    w.write("scratch/export.partial", age=20 * day, size=300 * MiB)

    # Datasets and a shared log folder.
    for i in range(24):
        w.write(f"datasets/web-crawl-v3/shard-{i:06d}.tar", age=120 * day, size=900 * MiB)
    for i in range(4):
        w.write(
            f"datasets/eval-suite/data/test-{i:05d}-of-00004.parquet", age=200 * day, size=64 * MiB
        )
    for i in range(20):
        w.write(f"logs/cluster/job-{i:04d}.log", age=(400 - 20 * i) * day, size=30 * MiB)
    return w
