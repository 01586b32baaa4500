"""Metrics from checkpoint names and from trainer_state.json."""

from __future__ import annotations

import json

import pytest

from governance.model.metrics import best_info, log_history_metrics, name_metrics


@pytest.mark.parametrize(
    ("name", "step", "metrics"),
    [
        ("epoch=3-step=1200-val_loss=0.35.ckpt", 1200, {"epoch": 3.0, "val_loss": 0.35}),
        ("epoch=1-step=20-v1.ckpt", 20, {"epoch": 1.0}),
        (
            "megatron_gpt--val_loss=2.34-step=1000-consumed_samples=8000.0-last",
            1000,
            {"val_loss": 2.34, "consumed_samples": 8000.0},
        ),
        ("loss=-1e-05", None, {"loss": -1e-05}),
        ("last.ckpt", None, {}),
    ],
)
def test_name_metrics(name: str, step: int | None, metrics: dict[str, float]) -> None:
    assert name_metrics(name) == (step, metrics)


def test_log_history_for_the_checkpoint_step() -> None:
    state = {
        "log_history": [
            {"step": 10, "loss": 2.0, "epoch": 0.1},
            {"step": 20, "loss": 1.5, "learning_rate": 1e-4},
            {"step": 20, "eval_loss": 1.2, "eval_runtime": 3},
            {"step": 30, "loss": 1.0},
        ]
    }
    assert log_history_metrics(state, 20) == {
        "loss": 1.5,
        "learning_rate": 1e-4,
        "eval_loss": 1.2,
        "eval_runtime": 3.0,
    }
    assert log_history_metrics(state, None) == {}
    assert log_history_metrics("garbage", 20) == {}


def test_best_info() -> None:
    state = json.loads('{"best_metric": 0.5, "best_model_checkpoint": "/data/out/checkpoint-40"}')
    info = best_info(state)
    assert info.metric == 0.5
    assert info.checkpoint_name == "checkpoint-40"
    assert best_info({"best_metric": None}).checkpoint_name is None
