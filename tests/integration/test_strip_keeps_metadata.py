"""A strip to `keep_components: [weights]` leaves a checkpoint that still loads.

Without its metadata (configs, index, trainer state, commit marker) the next scan would
find the stripped checkpoint incomplete, call it residue, and a later plan would delete
the weights the tier kept. Here each framework's run is planned, applied, scanned again
and planned again: the stripped checkpoints are still checkpoints, kept, and nothing of
theirs is planned away.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.builders import (
    Writer,
    deepspeed_run,
    hf_run,
    local_writer,
    marker,
    megatron_run,
    orbax_run,
)
from tests.integration.test_apply_support import Setup

POLICY = """version: 1
storage:
  - name: root
    url: {url}
layout:
  runs: ["runs/{{run}}/"]
approval: {{require_for: []}}
protect: {{min_age: 1h}}
safety: {{max_delete_fraction: 1.0}}  # the fixture files are small: the strip is most of them
rules:
  - name: checkpoints
    select: {{kind: checkpoint}}
    tiers:
      - name: recent
        keep_last: 1
      - name: weights-only
        keep_every_steps: 1
        keep_components: [weights]
    otherwise: delete
"""

RUN = "runs/a/"

Builder = Callable[[Writer], Any]
BUILDERS: dict[str, Builder] = {
    "huggingface": lambda w: hf_run(w, RUN, steps=(500, 1000, 1500)),
    "huggingface-sharded": lambda w: hf_run(w, RUN, steps=(500, 1000, 1500), sharded=True),
    "orbax": lambda w: orbax_run(
        w, RUN, steps=(1000, 2000, 3000), tmp=False, items=("params", "opt_state")
    ),
    "deepspeed": lambda w: deepspeed_run(w, RUN, steps=(100, 200, 300)),
    "megatron": lambda w: megatron_run(w, RUN, iters=(1000, 2000, 3000)),
}
WITH_METADATA = {"huggingface", "huggingface-sharded", "orbax"}


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("framework", sorted(BUILDERS))
def test_a_weights_only_strip_keeps_what_loads_the_checkpoint(
    tmp_path: Path, framework: str
) -> None:
    storage = tmp_path / "storage"
    write = local_writer(storage)
    BUILDERS[framework](write)
    marker(write, RUN)
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY.format(url=storage))
    setup = Setup(f"sqlite:///{tmp_path / 'catalog.db'}", policy)
    base = storage.as_uri() + "/"

    first = setup.plan()
    stripped = [a for a in first["actions"] if a["action"] == "strip"]
    assert len(stripped) == 2, [(a["action"], a["artifact"]["uri"]) for a in first["actions"]]
    assert {a["action"] for a in first["actions"]} == {"strip"}
    reasons = {k["artifact"]["uri"]: k["reason"] for k in first["kept"]}
    for action in stripped:
        # DeepSpeed and Megatron checkpoints have no metadata files to keep, so no note.
        says_so = "metadata kept" in reasons[action["artifact"]["uri"]]
        assert says_so is (framework in WITH_METADATA), reasons[action["artifact"]["uri"]]
    before = _files(storage)
    setup.apply(first["plan_id"])
    removed = before - _files(storage)
    assert removed, "the strip removed nothing"

    second = setup.plan()
    assert second["actions"] == [], [(a["action"], a["artifact"]["uri"]) for a in second["actions"]]
    kept = {k["artifact"]["uri"][len(base) :]: k for k in second["kept"]}
    for action in stripped:
        key = action["artifact"]["uri"][len(base) :]
        assert key in kept, f"{key} is no longer a kept checkpoint after its strip"
        assert kept[key]["artifact"]["kind"] == "checkpoint"
