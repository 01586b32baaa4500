"""Properties: every object lands in exactly one artifact, and the output does not depend on
the order objects were listed in (after sorting)."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governance.model.classify import classify
from governance.model.types import CatalogObject, ClassifyOptions, Group
from tests.fixtures import builders as b

BUILDERS = [
    lambda w, p: b.hf_run(
        w,
        p + "/output",
        steps=(10, 20),
        sharded=True,
        incomplete_last=True,
        tmp_checkpoint=True,
        final_weights=True,
        best_step=10,
    ),
    lambda w, p: b.hf_run(w, p, steps=(5,), peft=True),
    lambda w, p: b.lightning_run(w, p, epochs=2),
    lambda w, p: b.deepspeed_run(w, p + "/checkpoints", steps=(1, 2, 3), latest=2),
    lambda w, p: b.megatron_run(w, p, iters=(1, 2), torch_dist=True),
    lambda w, p: b.megatron_run(w, p, iters=(1, 2), pp=2, tracker=1),
    lambda w, p: b.dcp_checkpoint(w, p + "/ckpt/step_3", complete=False),
    lambda w, p: b.orbax_run(w, p + "/ckpts", steps=(1, 2)),
    lambda w, p: b.nemo_run(w, p, incomplete_last=True),
    lambda w, p: b.datasets(w, p),
    lambda w, p: b.logs(w, p),
    lambda w, p: b.eval_outputs(w, p),
    lambda w, p: b.residue(w, p),
    lambda w, p: b.marker(w, p, "COMPLETED"),
    lambda w, p: b.marker(w, p, "FAILED"),
]
SEGMENTS = st.sampled_from(
    [
        "a",
        "runs",
        "r1",
        "checkpoints",
        "checkpoint-7",
        "global_step3",
        "iter_0000001",
        "eval",
        "logs",
        "weights",
        "context",
        "wandb",
        "run-1",
        "x.ckpt",
        "100",
        "default",
        "data",
        "tmp",
    ]
)
NAMES = st.sampled_from(
    [
        "model.safetensors",
        "config.json",
        ".metadata",
        "__0_0.distcp",
        "latest",
        "x.tmp",
        "f.log",
        "_METADATA",
        "_CHECKPOINT_METADATA",
        "train.parquet",
        "a.ckpt",
        "m.nemo",
        "COMPLETED",
        "trainer_state.json",
        "notes.md",
        "events.out.tfevents.1",
        "dataset_info.json",
        "z",
    ]
)
PREFIXES = st.lists(SEGMENTS, min_size=0, max_size=3).map("/".join)


@st.composite
def trees(draw: Any) -> b.MemoryTree:
    tree = b.MemoryTree()
    for _ in range(draw(st.integers(0, 4))):
        builder = draw(st.sampled_from(BUILDERS))
        prefix = draw(PREFIXES)
        builder(tree, prefix or "root")
    for _ in range(draw(st.integers(0, 25))):
        key = "/".join(filter(None, [draw(PREFIXES), draw(NAMES)]))
        hours = draw(st.integers(0, 2000))
        tree(key, b"" if draw(st.booleans()) else b"x", b.T0 + timedelta(hours=hours))
    if draw(st.booleans()):
        tree.add_upload(draw(PREFIXES) + "/up.bin", "u1")
    return tree


def canonical(groups: list[Group]) -> list[Any]:
    out = []
    for g in groups:
        run = (
            None
            if g.run is None
            else (
                g.run.key,
                g.run.status,
                g.run.status_reason,
                g.run.best_checkpoint,
                tuple(sorted(g.run.attributes.items())),
            )
        )
        arts = [
            (
                a.key,
                a.kind,
                a.layout,
                a.step,
                a.complete,
                a.completeness_reason,
                a.strippable,
                tuple(sorted(a.metrics.items())),
                a.run,
                a.note,
                tuple((m.obj.key, m.obj.upload_id, m.component) for m in a.members),
            )
            for a in g.artifacts
        ]
        out.append((run, arts))
    return out


OPTIONS = [
    ClassifyOptions(as_of=b.T0 + timedelta(days=2)),
    ClassifyOptions(
        as_of=b.T0 + timedelta(days=90), run_templates=("runs/{run}/", "{team}/runs/{run}/")
    ),
]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=trees(), seed=st.integers(0, 2**32 - 1), which=st.integers(0, 1))
def test_every_object_in_exactly_one_artifact_and_order_independent(
    tree: b.MemoryTree, seed: int, which: int
) -> None:
    options = OPTIONS[which]
    objects = tree.objects()
    first = list(classify(lambda: iter(objects), options, tree.read_meta))

    seen: list[tuple[str, str]] = []
    for g in first:
        for a in g.artifacts:
            assert a.members, a.key
            for m in a.members:
                seen.append((m.obj.key, m.obj.upload_id))
                if a.key.endswith("/"):
                    assert m.obj.key.startswith(a.key)
                else:
                    assert m.obj.key == a.key
                if g.run is not None:
                    assert m.obj.key.startswith(g.run.key)
                    assert a.run == g.run.key
    assert sorted(seen) == sorted((o.key, o.upload_id) for o in objects)
    assert len(seen) == len(set(seen))
    run_keys = [g.run.key for g in first if g.run is not None]
    assert len(run_keys) == len(set(run_keys))

    shuffled = list(objects)
    random.Random(seed).shuffle(shuffled)
    resorted: list[CatalogObject] = sorted(shuffled, key=lambda o: (o.key, o.upload_id))
    second = list(classify(lambda: iter(resorted), options, tree.read_meta))
    assert canonical(first) == canonical(second)


def test_run_keys_are_unique_across_groups() -> None:
    tree = b.MemoryTree()
    for i, builder in enumerate(BUILDERS):
        builder(tree, f"team/runs/r{i}")
    gs = list(classify(tree.objects, OPTIONS[1], tree.read_meta))
    keys = [g.run.key for g in gs if g.run]
    assert len(keys) == len(set(keys)) == len(BUILDERS)
