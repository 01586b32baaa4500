"""`govern plan` end to end on realistic trees on local disk (real files, real mtimes).

One "zoo" tree holds a run of every framework in every status (Hugging Face, Lightning,
DeepSpeed, Megatron; completed, running, failed, abandoned) plus residue and logs, written
with the fixture builders and fixed mtimes relative to `AS_OF`. A *run* with checkpoints is
never of unknown status (governance/model/runs.py: unknown means "no checkpoints and no
status markers"; a run folder outside the layout templates is still found from its
checkpoints and gets running/abandoned): the zoo's unknown statuses are a logs-only run and
checkpoint files at the root, outside every run (an artifact outside every run has status
unknown to the selectors). It is planned with a copy of the shipped example policy
(`policies/retention.yaml`) whose storage points at the tree; the normalized plan (actions
and kept list with their reasons, costs to 4 significant digits, `summary.left`) is
compared with `tests/golden/example_policy_plan.json` (regenerate with
`GOVERN_UPDATE_GOLDEN=1 pytest tests/integration/test_plan_e2e.py -k golden`, then read the
diff), and the decisions are asserted one by one so a failure says which rule went wrong.

Also here: `--as-of` in the future ages everything predictably, every kind of policy
validation error (exit 2, file:line:col, nothing planned), and refusal by each safety
limit (exit 3, status refused, the limit named).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from governance.cli.main import cli
from tests.fixtures.builders import (
    deepspeed_run,
    hf_run,
    lightning_files,
    lightning_run,
    local_writer,
    logs,
    marker,
    megatron_run,
    residue,
)

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_POLICY = REPO / "policies" / "retention.yaml"
GOLDEN = REPO / "tests" / "golden" / "example_policy_plan.json"
AS_OF = datetime(2026, 11, 30, tzinfo=UTC)
AS_OF_TEXT = "2026-11-30T00:00:00Z"
D = timedelta(days=1)
H = timedelta(hours=1)

HF_DONE = "nlp/llama/runs/hf-done/"
HF_RUNNING = "nlp/llama/runs/hf-running/"
HF_INFLIGHT = "nlp/llama/runs/hf-inflight/"
HF_FAILED = "nlp/llama/runs/hf-failed/"
HF_FAILED_RECENT = "nlp/llama/runs/hf-failed-recent/"
HF_ABANDONED = "cv/resnet/runs/hf-abandoned/"
PL_DONE = "cv/resnet/runs/pl-done/"
PL_CKPTS = PL_DONE + "lightning_logs/version_0/checkpoints/"
DS_DONE = "nlp/gpt/runs/ds-done/"
MG_DONE = "nlp/gpt/runs/mg-done/"
LOGS_ONLY = "nlp/gpt/runs/logs-only/"
DS_RUNNING = "nlp/gpt/runs/ds-running/"
DS_FAILED = "nlp/gpt/runs/ds-failed/"
DS_ABANDONED = "nlp/gpt/runs/ds-abandoned/"
MG_RUNNING = "nlp/gpt/runs/mg-running/"
MG_FAILED = "nlp/gpt/runs/mg-failed/"
MG_ABANDONED = "nlp/gpt/runs/mg-abandoned/"
PL_RUNNING = "cv/resnet/runs/pl-running/"
PL_RUNNING_CKPTS = PL_RUNNING + "lightning_logs/version_0/checkpoints/"
PL_FAILED = "cv/resnet/runs/pl-failed/"
PL_ABANDONED = "cv/resnet/runs/pl-abandoned/"
ROOT_CKPT = "epoch={}-step={}.ckpt"  # bare Lightning files at the root: outside every run


def build_zoo(root: Path) -> None:
    """The fixed tree. Ages (at AS_OF) avoid every policy boundary by at least 12 hours."""
    w = local_writer(root)
    # Completed HF run: 8 checkpoints 6 days apart, 50.5d .. 8.5d old; best eval_loss at 7500.
    hf_run(
        w, HF_DONE, steps=tuple(range(2500, 20001, 2500)), best_step=7500,
        start=AS_OF - 56 * D - 12 * H, every=6 * D,
    )  # fmt: skip
    marker(w, HF_DONE, mtime=AS_OF - 8 * D)
    # Running (last write 3.5d ago, within abandoned_after 7d), with a staging folder.
    hf_run(
        w, HF_RUNNING, steps=(1000, 2000, 3000, 4000, 5000, 6000), tmp_checkpoint=True,
        start=AS_OF - 10 * D - 12 * H, every=D,
    )  # fmt: skip
    # Running, newest checkpoint still being written (0.5d), the one before in the grace period.
    hf_run(
        w, HF_INFLIGHT, steps=(1000, 2000, 3000), sharded=True, incomplete_last=True,
        start=AS_OF - 6 * D - 12 * H, every=2 * D,
    )  # fmt: skip
    # Failed 20 days ago (expired), failed 10 days ago (not yet).
    hf_run(w, HF_FAILED, steps=(1000, 2000), start=AS_OF - 23 * D, every=D)
    marker(w, HF_FAILED, "FAILED", mtime=AS_OF - 20 * D)
    hf_run(w, HF_FAILED_RECENT, steps=(1000, 2000), start=AS_OF - 13 * D - 12 * H, every=D)
    marker(w, HF_FAILED_RECENT, "FAILED", mtime=AS_OF - 10 * D - 12 * H)
    # Abandoned: no marker, no write for 31.5 days.
    hf_run(w, HF_ABANDONED, steps=(1000, 2000, 3000), start=AS_OF - 34 * D - 12 * H, every=D)
    # Lightning, completed: 6 epochs 25.5d .. 10.5d old, last.ckpt 7.5d old.
    lightning_run(
        w, PL_DONE, epochs=6, steps_per_epoch=2500, start=AS_OF - 28 * D - 12 * H, every=3 * D
    )
    marker(w, PL_DONE, mtime=AS_OF - 7 * D)
    # DeepSpeed, completed: `latest` names global_step2000, global_step3000 never finished.
    deepspeed_run(
        w, DS_DONE, steps=(1000, 2000, 3000), latest=2000, start=AS_OF - 41 * D, every=5 * D
    )
    marker(w, DS_DONE, mtime=AS_OF - 25 * D)
    # Megatron, completed: the tracker says 10000, iter_0015000 never finished.
    megatron_run(
        w, MG_DONE, iters=(5000, 10000, 15000), tracker=10000,
        start=AS_OF - 20 * D - 12 * H, every=5 * D,
    )  # fmt: skip
    marker(w, MG_DONE, mtime=AS_OF - 5 * D)
    # Logs only: status unknown.
    logs(w, LOGS_ONLY, mtime=AS_OF - 20 * D)
    # DeepSpeed, running: tags 12.5d .. 0.5d old; `latest` names 4000, so global_step5000
    # (0.5d, inside the grace period) is a save in flight.
    deepspeed_run(
        w, DS_RUNNING, steps=(1000, 2000, 3000, 4000, 5000), latest=4000,
        start=AS_OF - 15 * D - 12 * H, every=3 * D,
    )  # fmt: skip
    # DeepSpeed, failed 20 days ago (expired); global_step3000 never finished (residue).
    deepspeed_run(
        w, DS_FAILED, steps=(1000, 2000, 3000), latest=2000, start=AS_OF - 25 * D, every=D
    )
    marker(w, DS_FAILED, "FAILED", mtime=AS_OF - 20 * D)
    # DeepSpeed, abandoned but not expired: no marker, last write 10.5d ago (7d < 10.5d < 14d).
    deepspeed_run(w, DS_ABANDONED, steps=(1000, 2000), start=AS_OF - 12 * D - 12 * H, every=D)
    # Megatron, running after a stall: iter_0005000 (31.5d, past every tier's max_age) is the
    # newest complete one; iter_0010000 is being written (0.5d, past the tracker).
    megatron_run(
        w, MG_RUNNING, iters=(5000, 10000), tracker=5000,
        start=AS_OF - 62 * D - 12 * H, every=31 * D,
    )  # fmt: skip
    # Megatron, failed 10.5 days ago (not expired), with an unfinished iter_0003000 (residue).
    megatron_run(
        w, MG_FAILED, iters=(1000, 2000, 3000), tracker=2000,
        start=AS_OF - 16 * D - 12 * H, every=D,
    )  # fmt: skip
    marker(w, MG_FAILED, "FAILED", mtime=AS_OF - 10 * D - 12 * H)
    # Megatron, abandoned 20.5 days ago (expired).
    megatron_run(w, MG_ABANDONED, iters=(1000, 2000), start=AS_OF - 22 * D - 12 * H, every=D)
    # Lightning, running: epochs 10.5d .. 4.5d old, the newest epoch's file still empty
    # (2.5d, inside the grace period), metrics written 0.5d ago; no last.ckpt.
    lightning_run(
        w, PL_RUNNING, epochs=5, steps_per_epoch=1000, last=False, empty_last_epoch=True,
        start=AS_OF - 12 * D - 12 * H, every=2 * D,
    )  # fmt: skip
    # Lightning, failed 20 days ago (expired); abandoned 31.5 days ago (expired).
    lightning_run(
        w, PL_FAILED, epochs=3, steps_per_epoch=1000, start=AS_OF - 24 * D - 12 * H, every=D
    )
    marker(w, PL_FAILED, "FAILED", mtime=AS_OF - 20 * D)
    lightning_run(
        w, PL_ABANDONED, epochs=2, steps_per_epoch=1000, start=AS_OF - 34 * D - 12 * H, every=D
    )
    # Checkpoints outside every run (status unknown): bare .ckpt files at the root,
    # 42.5d .. 33.5d old, past every tier's max_age.
    lightning_files(w, "", steps=(100, 200, 300, 400), start=AS_OF - 45 * D - 12 * H, every=3 * D)
    # Residue outside runs: old (expired) and fresh (inside the grace period).
    residue(w, "scratch", mtime=AS_OF - 10 * D)
    residue(w, "scratch/fresh", mtime=AS_OF - 1 * D)


def example_policy(tree: Path, dest: Path, extra: str = "") -> Path:
    """policies/retention.yaml with its storage block replaced by the local tree."""
    text = EXAMPLE_POLICY.read_text(encoding="utf-8")
    text, n = re.subn(
        r"^storage:.*?\n\n", f"storage:\n  - name: zoo\n    url: {tree}/\n\n", text,
        count=1, flags=re.S | re.M,
    )  # fmt: skip
    assert n == 1, "the example policy's storage block moved: update example_policy()"
    if extra:
        text = re.sub(r"^safety:.*?\n\n", "", text, count=1, flags=re.S | re.M) + extra
    dest.write_text(text, encoding="utf-8")
    return dest


def govern(catalog: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--catalog", catalog, "-q", *args])


def plan_json(catalog: str, policy: Path, *args: str, code: int = 0) -> dict[str, Any]:
    result = govern(catalog, "plan", "--policy", str(policy), "--format", "json", *args)
    assert result.exit_code == code, (result.exit_code, result.stderr, result.stdout[-2000:])
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


@dataclass
class Planned:
    """One plan document, indexed by artifact key relative to the root."""

    doc: dict[str, Any]
    base: str

    def rel(self, uri: str) -> str:
        assert uri.startswith(self.base), uri
        return uri[len(self.base) :]

    def actions(self, key: str) -> list[dict[str, Any]]:
        return [a for a in self.doc["actions"] if self.rel(a["artifact"]["uri"]) == key]

    def kept(self, key: str) -> dict[str, Any] | None:
        found = [k for k in self.doc["kept"] if self.rel(k["artifact"]["uri"]) == key]
        assert len(found) <= 1
        return found[0] if found else None

    def outcome(self, key: str) -> tuple[str, ...]:
        """('delete',), ('strip',), ('kept', how), ... for one artifact."""
        acts = tuple(a["action"] for a in self.actions(key))
        k = self.kept(key)
        return acts + (("kept", k["how"]) if k is not None else ())

    def by_rule(self, rule: str) -> set[str]:
        return {self.rel(a["artifact"]["uri"]) for a in self.doc["actions"] if a["rule"] == rule}


@dataclass
class Zoo:
    tree: Path
    catalog: str
    policy: Path
    tmp: Path

    @property
    def base(self) -> str:
        return self.tree.as_uri() + "/"

    def plan(self, *args: str, policy: Path | None = None, code: int = 0) -> Planned:
        doc = plan_json(self.catalog, policy or self.policy, *args, code=code)
        return Planned(doc, self.base)


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> Zoo:
    tmp = tmp_path_factory.mktemp("zoo")
    tree = tmp / "tree"
    build_zoo(tree)
    z = Zoo(tree, f"sqlite:///{tmp / 'catalog.db'}", example_policy(tree, tmp / "policy.yaml"), tmp)
    scanned = govern(z.catalog, "scan", "--policy", str(z.policy))
    assert scanned.exit_code == 0, scanned.stderr
    return z


@pytest.fixture(scope="module")
def golden_plan(zoo: Zoo) -> Planned:
    return zoo.plan("--no-scan", "--as-of", AS_OF_TEXT)


# ----------------------------------------------------------------------------- golden


COSTS = ("early_deletion_usd", "request_cost_usd", "monthly_cost_before_usd",
         "monthly_cost_after_usd")  # fmt: skip


def usd(x: float) -> float:
    """A cost, to 4 significant digits. Not to the cent (nor to 6 decimals): the zoo's
    files are bytes, so its costs are ~1e-8 USD and either would round every one to 0;
    4 significant digits keep them visible and absorb any last-bit difference in float
    sums across platforms."""
    return float(f"{x:.4g}")


def project(doc: dict[str, Any], base: str) -> dict[str, Any]:
    """The deterministic part of a plan: no ids, paths, hashes or creation times; reasons,
    costs (see `usd`) and the artifacts left untouched (`summary.left`) included."""

    def rel(uri: str) -> str:
        assert uri.startswith(base), uri
        return uri[len(base) :]

    def text(t: str) -> str:
        return t.replace(base, "<root>/")

    def art(a: dict[str, Any]) -> dict[str, Any]:
        return {"uri": rel(a["uri"]), "kind": a["kind"], "run": a["run"], "step": a["step"]}

    keys = ("actions", "objects", "bytes_deleted", "bytes_transitioned", "bytes_archived")
    summary = doc["summary"]
    return {
        "as_of": doc["as_of"],
        "status": doc["status"],
        "refusal": doc["refusal"],
        "notes": [text(n) for n in doc["notes"]],
        "summary": {
            **{k: summary[k] for k in keys},
            **{k: usd(summary[k]) for k in COSTS},
            "by_rule": {
                rule: {k: v for k, v in r.items() if k in keys}
                for rule, r in sorted(summary["by_rule"].items())
            },
            "left": [
                {
                    "rule": x["rule"],
                    "kind": x["kind"],
                    "artifacts": x["artifacts"],
                    "bytes": x["bytes"],
                    "example": {
                        "uri": rel(x["example"]["uri"]),
                        "reason": text(x["example"]["reason"]),
                    },
                }
                for x in summary["left"]
            ],
        },
        "actions": [
            {
                "rule": a["rule"],
                "tier": a["tier"],
                "action": a["action"],
                "artifact": art(a["artifact"]),
                "objects": [rel(o["uri"]) for o in a["objects"]],
                "bytes": a["bytes"],
                "storage_class": a["storage_class"],
                "reason": text(a["reason"]),
                **{k: usd(a[k]) for k in COSTS},
            }
            for a in doc["actions"]
        ],
        "kept": [
            {
                "artifact": art(k["artifact"]),
                "rule": k["rule"],
                "tier": k["tier"],
                "how": k["how"],
                "reason": text(k["reason"]),
            }
            for k in doc["kept"]
        ],
    }


def test_example_policy_plan_matches_golden(golden_plan: Planned) -> None:
    got = project(golden_plan.doc, golden_plan.base)
    text = json.dumps(got, indent=1, sort_keys=True) + "\n"
    if os.environ.get("GOVERN_UPDATE_GOLDEN") == "1":
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(text, encoding="utf-8")
        pytest.skip(f"rewrote {GOLDEN.relative_to(REPO)}")
    assert GOLDEN.exists(), f"missing {GOLDEN}: run with GOVERN_UPDATE_GOLDEN=1"
    want = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert got == want


def test_same_inputs_same_plan(zoo: Zoo, golden_plan: Planned) -> None:
    """Invariant 6 end to end: re-planning gives the same fingerprint and projection."""
    again = zoo.plan("--no-scan", "--as-of", AS_OF_TEXT)
    assert again.doc["plan_id"] != golden_plan.doc["plan_id"]
    assert again.doc["fingerprint"] == golden_plan.doc["fingerprint"]
    assert project(again.doc, zoo.base) == project(golden_plan.doc, zoo.base)


# ----------------------------------------------------------------------------- per framework


def test_hf_completed_run_thins_strips_and_keeps_final_and_best(golden_plan: Planned) -> None:
    p = golden_plan
    ck = HF_DONE + "checkpoint-{}/"
    # recent: the newest 3 within 30d, whole (20000 is also the final)
    for step in (15000, 17500, 20000):
        assert p.outcome(ck.format(step)) == ("kept", "whole")
        assert p.kept(ck.format(step))["tier"] == "recent"  # type: ignore[index]
    # mid-term: newest of bucket 10000-14999 within 30d, stripped of optimizer/scheduler/rng
    (strip,) = p.actions(ck.format(12500))
    assert (strip["tier"], strip["action"]) == ("mid-term", "strip")
    dropped = {o["uri"].rsplit("/", 1)[1] for o in strip["objects"]}
    assert dropped == {"optimizer.pt", "scheduler.pt", "rng_state.pth", "scaler.pt"}
    # long-term: best eval_loss (7500, 38.5d old) stripped; archive not applicable on disk
    (best,) = p.actions(ck.format(7500))
    assert (best["tier"], best["action"]) == ("long-term", "strip")
    assert "best eval_loss" in best["reason"]
    assert "not applicable" in best["reason"]
    assert p.kept(ck.format(7500))["how"] == "stripped"  # type: ignore[index]
    # the rest is deleted whole by `otherwise: delete`
    for step in (2500, 5000, 10000):
        (d,) = p.actions(ck.format(step))
        assert (d["rule"], d["tier"], d["action"]) == ("checkpoints", None, "delete")
        names = {o["uri"].rsplit("/", 1)[1] for o in d["objects"]}
        assert {"model.safetensors", "optimizer.pt", "trainer_state.json"} <= names
    assert p.outcome(HF_DONE + "COMPLETED") == ()  # the marker is no checkpoint: no rule acts


def test_running_run_is_thinned_never_expired(golden_plan: Planned) -> None:
    p = golden_plan
    ck = HF_RUNNING + "checkpoint-{}/"
    for step in (1000, 2000, 3000):
        assert p.outcome(ck.format(step)) == ("delete",)
        assert p.actions(ck.format(step))[0]["rule"] == "checkpoints"
    for step in (4000, 5000, 6000):
        assert p.outcome(ck.format(step)) == ("kept", "whole")
    # the staging folder is residue, 3.5d old, but the run is running: never expired
    staging = HF_RUNNING + "tmp-checkpoint-7000/"
    assert p.outcome(staging) == ("kept", "protected")
    assert "running" in p.kept(staging)["reason"]  # type: ignore[index]
    assert not any(a["rule"] in ("failed-runs", "residue") for a in p.actions(staging))


def test_in_flight_checkpoint_never_counts(golden_plan: Planned) -> None:
    """Invariant 8: the incomplete newest checkpoint is in flight; the complete ones count."""
    p = golden_plan
    ck = HF_INFLIGHT + "checkpoint-{}/"
    assert p.outcome(ck.format(3000)) == ("kept", "in_flight")
    assert p.outcome(ck.format(2000)) == ("kept", "protected")  # 2.5d old: inside min_age
    assert p.outcome(ck.format(1000)) == ("kept", "whole")  # one of the newest 3 complete
    assert p.kept(ck.format(1000))["tier"] == "recent"  # type: ignore[index]


def test_failed_and_abandoned_runs_expire_after_14d(golden_plan: Planned) -> None:
    p = golden_plan
    expired = p.by_rule("failed-runs")
    pl_dead = "lightning_logs/version_0/"
    assert expired == {
        HF_FAILED + "FAILED",
        HF_FAILED + "checkpoint-1000/",
        HF_FAILED + "checkpoint-2000/",
        HF_ABANDONED + "checkpoint-1000/",
        HF_ABANDONED + "checkpoint-2000/",
        HF_ABANDONED + "checkpoint-3000/",
        # a dead run expires whole: checkpoints, residue, tracker files, logs, marker
        DS_FAILED + "FAILED",
        DS_FAILED + "global_step1000/",
        DS_FAILED + "global_step2000/",
        DS_FAILED + "global_step3000/",
        DS_FAILED + "latest",
        DS_FAILED + "zero_to_fp32.py",
        MG_ABANDONED + "iter_0001000/",
        MG_ABANDONED + "iter_0002000/",
        MG_ABANDONED + "latest_checkpointed_iteration.txt",
        PL_FAILED + "FAILED",
        PL_FAILED + pl_dead,  # the logger's folder: event files, hparams.yaml, metrics.csv
        PL_FAILED + pl_dead + "checkpoints/epoch=0-step=1000-val_loss=1.00.ckpt",
        PL_FAILED + pl_dead + "checkpoints/epoch=1-step=2000-val_loss=0.90.ckpt",
        PL_FAILED + pl_dead + "checkpoints/epoch=2-step=3000-val_loss=0.80.ckpt",
        PL_FAILED + pl_dead + "checkpoints/last.ckpt",
        PL_ABANDONED + pl_dead,
        PL_ABANDONED + pl_dead + "checkpoints/epoch=0-step=1000-val_loss=1.00.ckpt",
        PL_ABANDONED + pl_dead + "checkpoints/epoch=1-step=2000-val_loss=0.90.ckpt",
        PL_ABANDONED + pl_dead + "checkpoints/last.ckpt",
    }
    # the status each reason names is the run's: failed by marker, abandoned by silence
    for prefix, status in (
        (HF_FAILED, "failed"), (HF_ABANDONED, "abandoned"), (DS_FAILED, "failed"),
        (MG_ABANDONED, "abandoned"), (PL_FAILED, "failed"), (PL_ABANDONED, "abandoned"),
    ):  # fmt: skip
        reasons = {
            a["reason"] for a in p.doc["actions"] if p.rel(a["artifact"]["uri"]).startswith(prefix)
        }
        run = prefix.rstrip("/").rsplit("/", 1)[1]
        assert len(reasons) == 1, reasons
        assert reasons.pop().startswith(f"expired: run {run} ({status}) last written "), prefix
        assert not [k for k in p.doc["kept"] if p.rel(k["artifact"]["uri"]).startswith(prefix)]
    for a in p.doc["actions"]:
        if a["rule"] == "failed-runs":
            assert a["action"] == "delete"
            assert "run" in a["reason"]
            assert "14d" in a["reason"]
    # failed 10.5 days ago: owned by failed-runs but not due; nothing acted on
    for step in (1000, 2000):
        key = HF_FAILED_RECENT + f"checkpoint-{step}/"
        assert p.outcome(key) == ("kept", "rule_keeps")
        kept = p.kept(key)
        assert kept is not None
        assert kept["rule"] == "failed-runs"
        assert "not expired yet" in kept["reason"]


def test_failed_runs_rule_owns_a_dead_runs_residue(golden_plan: Planned) -> None:
    """`failed-runs` comes before `residue`: a dead run's unfinished save goes with the run
    (DeepSpeed, expired), or waits for it (Megatron, failed 10.5 days ago), however old."""
    p = golden_plan
    (gone,) = p.actions(DS_FAILED + "global_step3000/")
    assert (gone["rule"], gone["action"], gone["artifact"]["kind"]) == (
        "failed-runs", "delete", "residue",
    )  # fmt: skip
    # iter_0003000 (past the tracker, 13.5d old) is residue, but not the residue rule's
    assert p.outcome(MG_FAILED + "iter_0003000/") == ()
    left = {(x["rule"], x["kind"]): x for x in p.doc["summary"]["left"]}
    held = left[("failed-runs", "residue")]
    assert held["artifacts"] == 1
    assert p.rel(held["example"]["uri"]) == MG_FAILED + "iter_0003000/"
    assert held["example"]["reason"] == (
        "not expired yet: run mg-failed (failed) last written 10 days ago, "
        "rule failed-runs expires after 14d"
    )
    for it in ("iter_0001000/", "iter_0002000/"):
        kept = p.kept(MG_FAILED + it)
        assert kept is not None
        assert (kept["rule"], kept["how"]) == ("failed-runs", "rule_keeps")
        assert "run mg-failed (failed)" in kept["reason"]
    assert not [a for a in p.doc["actions"] if p.rel(a["artifact"]["uri"]).startswith(MG_FAILED)]


def test_abandoned_run_waits_between_abandoned_after_and_expiry(golden_plan: Planned) -> None:
    """Silent 10.5 days: abandoned (> 7d), so `checkpoints` no longer thins it, but
    `failed-runs` expires it only after 14d: both tags are kept by that rule, untouched."""
    p = golden_plan
    for tag in ("global_step1000/", "global_step2000/"):
        kept = p.kept(DS_ABANDONED + tag)
        assert kept is not None
        assert (kept["rule"], kept["tier"], kept["how"]) == ("failed-runs", None, "rule_keeps")
        assert kept["reason"] == (
            "not expired yet: run ds-abandoned (abandoned) last written 10 days ago, "
            "rule failed-runs expires after 14d"
        )
    assert not [a for a in p.doc["actions"] if p.rel(a["artifact"]["uri"]).startswith(DS_ABANDONED)]


def test_lightning_checkpoints_are_kept_whole_not_stripped(golden_plan: Planned) -> None:
    p = golden_plan
    ck = PL_CKPTS + "epoch={}-step={}-val_loss={:.2f}.ckpt"
    key = {s: ck.format(e, s, 1.0 - e / 10) for e, s in enumerate(range(2500, 15001, 2500))}
    # newest 3 by age (last.ckpt has no step): last.ckpt, 15000, 12500
    for k in (PL_CKPTS + "last.ckpt", key[15000], key[12500]):
        assert p.outcome(k) == ("kept", "whole")
        assert p.kept(k)["tier"] == "recent"  # type: ignore[index]
    # mid-term selects 2500 and 7500 but cannot strip a single .ckpt: kept whole, says so
    for step in (2500, 7500):
        kept = p.kept(key[step])
        assert kept is not None
        assert (kept["tier"], kept["how"]) == ("mid-term", "whole")
        assert "kept whole" in kept["reason"]
        assert p.actions(key[step]) == []
    for step in (5000, 10000):
        assert p.outcome(key[step]) == ("delete",)
    assert not [
        a for a in p.doc["actions"] if PL_DONE in a["artifact"]["uri"] and a["action"] == "strip"
    ]


def test_lightning_keep_reason_says_it_cannot_be_stripped(golden_plan: Planned) -> None:
    kept = golden_plan.kept(PL_CKPTS + "epoch=0-step=2500-val_loss=1.00.ckpt")
    assert kept is not None
    assert "cannot be stripped" in kept["reason"]


def test_deepspeed_tag_beyond_latest_is_residue(golden_plan: Planned) -> None:
    p = golden_plan
    (res,) = p.actions(DS_DONE + "global_step3000/")
    assert (res["rule"], res["action"], res["artifact"]["kind"]) == ("residue", "delete", "residue")
    # 2000 is what `latest` names: the final, >30d old, kept by long-term stripped of ZeRO state
    (strip,) = p.actions(DS_DONE + "global_step2000/")
    assert (strip["tier"], strip["action"]) == ("long-term", "strip")
    assert all("optim_states" in o["uri"] for o in strip["objects"])
    assert p.kept(DS_DONE + "global_step2000/")["how"] == "stripped"  # type: ignore[index]
    assert p.outcome(DS_DONE + "global_step1000/") == ("delete",)


def test_deepspeed_running_run_thinned_and_tag_past_latest_in_flight(
    golden_plan: Planned,
) -> None:
    """A running DeepSpeed run is thinned by the tiers only; the tag newer than `latest`
    (0.5d old) is a save in flight: neither counted (invariant 8) nor residue nor deleted."""
    p = golden_plan
    tag = DS_RUNNING + "global_step{}/"
    (d,) = p.actions(tag.format(1000))
    assert (d["rule"], d["tier"], d["action"]) == ("checkpoints", None, "delete")
    assert d["reason"].endswith(
        "is not kept by any tier (recent, mid-term, long-term); otherwise: delete"
    )
    # the newest 3 *complete* tags (4000 is what `latest` names and what it resumes from)
    for step in (2000, 3000, 4000):
        kept = p.kept(tag.format(step))
        assert kept is not None
        assert (kept["rule"], kept["tier"], kept["how"]) == ("checkpoints", "recent", "whole")
        assert p.actions(tag.format(step)) == []
    flying = p.kept(tag.format(5000))
    assert flying is not None
    assert (flying["how"], p.actions(tag.format(5000))) == ("in_flight", [])
    assert "newer than latest (global_step4000)" in flying["reason"]
    assert p.outcome(DS_RUNNING + "latest") == ("kept", "protected")
    assert {a["rule"] for a in p.doc["actions"] if DS_RUNNING in a["artifact"]["uri"]} == {
        "checkpoints"
    }


def test_megatron_running_run_resumes_from_old_newest_checkpoint(golden_plan: Planned) -> None:
    """Invariant 1 on a running run: its newest complete iteration (31.5d old, past every
    tier's max_age, so `otherwise: delete`) is kept whole where it is; the iteration past
    the tracker is in flight."""
    p = golden_plan
    kept = p.kept(MG_RUNNING + "iter_0005000/")
    assert kept is not None
    assert (kept["rule"], kept["tier"], kept["how"]) == ("checkpoints", None, "whole")
    assert kept["reason"] == (
        "invariant 1: step 5000 is the newest complete checkpoint of run mg-running (running), "
        "which it resumes from, kept whole instead of: checkpoints: step 5000 is not kept by "
        "any tier (recent, mid-term, long-term); otherwise: delete"
    )
    assert p.outcome(MG_RUNNING + "iter_0010000/") == ("kept", "in_flight")
    flying = p.kept(MG_RUNNING + "iter_0010000/")
    assert flying is not None
    assert "past latest_checkpointed_iteration.txt (5000)" in flying["reason"]
    assert not [a for a in p.doc["actions"] if MG_RUNNING in a["artifact"]["uri"]]


def test_lightning_running_run_thinned_empty_newest_file_in_flight(golden_plan: Planned) -> None:
    p = golden_plan
    ck = PL_RUNNING_CKPTS + "epoch={}-step={}-val_loss={:.2f}.ckpt"
    key = {s: ck.format(e, s, 1.0 - e / 10) for e, s in enumerate(range(1000, 5001, 1000))}
    (d,) = p.actions(key[1000])
    assert (d["rule"], d["tier"], d["action"]) == ("checkpoints", None, "delete")
    for step in (2000, 3000, 4000):  # the newest 3 complete, whole (a .ckpt is never stripped)
        kept = p.kept(key[step])
        assert kept is not None
        assert (kept["tier"], kept["how"]) == ("recent", "whole")
    # the empty epoch=4 file is a partial write inside the grace period: in flight
    flying = p.kept(key[5000])
    assert flying is not None
    assert (flying["how"], p.actions(key[5000])) == ("in_flight", [])
    assert "empty" in flying["reason"]
    assert {a["action"] for a in p.doc["actions"] if PL_RUNNING in a["artifact"]["uri"]} == {
        "delete"
    }


def test_checkpoints_outside_every_run_are_thinned_not_expired(golden_plan: Planned) -> None:
    """Bare .ckpt files at the root belong to no run (status unknown to the selectors):
    `failed-runs` does not select them, `checkpoints` does, over the group of root files;
    none is within a tier's max_age, so all go but the newest complete one (invariant 1:
    as for a run of unknown status, kept whole and in place)."""
    p = golden_plan
    for step, i in ((100, 0), (200, 1), (300, 2)):
        (d,) = p.actions(ROOT_CKPT.format(i, step))
        assert (d["rule"], d["tier"], d["action"]) == ("checkpoints", None, "delete")
        assert d["artifact"]["run"] is None
    newest = p.kept(ROOT_CKPT.format(3, 400))
    assert newest is not None
    assert (newest["rule"], newest["how"]) == ("checkpoints", "whole")
    assert newest["reason"].startswith(
        "invariant 1: step 400 is the newest complete checkpoint of its group (outside any run), "
        "which a writer may resume from, kept whole instead of: "
    )
    assert p.actions(ROOT_CKPT.format(3, 400)) == []


def test_megatron_iteration_beyond_tracker_is_residue(golden_plan: Planned) -> None:
    p = golden_plan
    (res,) = p.actions(MG_DONE + "iter_0015000/")
    assert (res["rule"], res["action"], res["artifact"]["kind"]) == ("residue", "delete", "residue")
    for it in ("iter_0005000/", "iter_0010000/"):
        assert p.outcome(MG_DONE + it) == ("kept", "whole")


def test_residue_expires_after_2d_fresh_residue_is_protected(golden_plan: Planned) -> None:
    p = golden_plan
    for name in ("upload.tmp", "model.safetensors.partial", "blob.incomplete"):
        assert p.outcome("scratch/" + name) == ("delete",)
        assert p.actions("scratch/" + name)[0]["rule"] == "residue"
        assert p.outcome("scratch/fresh/" + name) == ("kept", "protected")


def test_logs_transitions_are_not_applicable_on_local_disk(golden_plan: Planned) -> None:
    p = golden_plan
    assert not [a for a in p.doc["actions"] if a["action"] in ("transition", "archive")]
    notes = " | ".join(p.doc["notes"])
    assert "transition to STANDARD_IA (rule logs) is not applicable" in notes
    assert "archive to DEEP_ARCHIVE (rule checkpoints) is not applicable" in notes
    assert p.outcome(LOGS_ONLY + "logs/train.log") == ()


def test_invariants_hold(golden_plan: Planned) -> None:
    """Every action has a rule and reason; the newest complete checkpoint of live runs stays."""
    p = golden_plan
    for a in p.doc["actions"]:
        assert a["rule"]
        assert a["reason"]
        assert a["bytes"] == sum(o["size"] for o in a["objects"])
    deleted = {p.rel(a["artifact"]["uri"]) for a in p.doc["actions"] if a["action"] == "delete"}
    for newest in (
        HF_DONE + "checkpoint-20000/",
        HF_RUNNING + "checkpoint-6000/",
        HF_INFLIGHT + "checkpoint-2000/",
        DS_DONE + "global_step2000/",
        MG_DONE + "iter_0010000/",
        PL_CKPTS + "last.ckpt",
        DS_RUNNING + "global_step4000/",
        MG_RUNNING + "iter_0005000/",
        PL_RUNNING_CKPTS + "epoch=3-step=4000-val_loss=0.70.ckpt",
        ROOT_CKPT.format(3, 400),
    ):
        assert newest not in deleted
    # a running run's newest complete checkpoint is not stripped or archived either
    for newest in (
        HF_RUNNING + "checkpoint-6000/",
        DS_RUNNING + "global_step4000/",
        MG_RUNNING + "iter_0005000/",
        PL_RUNNING_CKPTS + "epoch=3-step=4000-val_loss=0.70.ckpt",
    ):
        assert p.outcome(newest) == ("kept", "whole"), newest
    assert golden_plan.doc["status"] == "pending_approval"


# ----------------------------------------------------------------------------- time


def test_future_as_of_ages_everything_predictably(zoo: Zoo) -> None:
    """400 days on: every unmarked run is abandoned and expired, completed runs keep only
    final and best (tiers with max_age 30d see nothing), all residue is expired."""
    p = zoo.plan("--no-scan", "--as-of", "2027-12-31", code=3)
    assert p.doc["as_of"] == "2027-12-31T00:00:00Z"
    # deleting most of the tree is itself refused (the actions are still all listed)
    assert p.doc["status"] == "refused"
    assert "max_delete_fraction" in p.doc["refusal"]
    assert p.by_rule("failed-runs") >= {
        HF_RUNNING + f"checkpoint-{s}/" for s in (1000, 2000, 3000, 4000, 5000, 6000)
    } | {HF_RUNNING + "tmp-checkpoint-7000/", HF_INFLIGHT + "checkpoint-3000/"}
    assert p.by_rule("failed-runs") >= {HF_FAILED_RECENT + "checkpoint-1000/"}
    assert p.by_rule("residue") >= {"scratch/fresh/upload.tmp", "scratch/upload.tmp"}
    kept = {p.rel(k["artifact"]["uri"]): (k["tier"], k["how"]) for k in p.doc["kept"]}
    assert {k: v for k, v in kept.items() if k.startswith(HF_DONE)} == {
        HF_DONE + "checkpoint-20000/": ("long-term", "stripped"),  # final
        HF_DONE + "checkpoint-7500/": ("long-term", "stripped"),  # best
    }
    assert not [a for a in p.doc["actions"] if a["tier"] in ("recent", "mid-term")]
    assert not p.doc["kept"] or all(k["how"] != "protected" for k in p.doc["kept"])


def test_tree_written_now_is_untouched_until_as_of_moves_on(tmp_path: Path) -> None:
    """Real "now" mtimes: the grace period protects everything; +20 days ages it all."""
    tree = tmp_path / "tree"
    w = local_writer(tree)
    now = datetime.now(UTC) - H
    hf_run(w, "nlp/x/runs/a", steps=(1000, 2000, 3000, 4000), start=now - 4 * H, every=H)
    marker(w, "nlp/x/runs/a", mtime=now)
    hf_run(w, "nlp/x/runs/b", steps=(1000, 2000), start=now - 2 * H, every=H)
    residue(w, "scratch", mtime=now)
    policy = example_policy(tree, tmp_path / "policy.yaml")
    catalog = f"sqlite:///{tmp_path / 'c.db'}"
    today = Planned(plan_json(catalog, policy), tree.as_uri() + "/")
    assert today.doc["actions"] == []
    assert {k["how"] for k in today.doc["kept"]} == {"protected"}

    later = (now + 20 * D).strftime("%Y-%m-%dT%H:%M:%SZ")
    p = Planned(plan_json(catalog, policy, "--no-scan", "--as-of", later), tree.as_uri() + "/")
    assert p.by_rule("failed-runs") == {
        "nlp/x/runs/b/checkpoint-1000/",
        "nlp/x/runs/b/checkpoint-2000/",
    }
    assert p.by_rule("residue") == {"scratch/upload.tmp", "scratch/model.safetensors.partial",
                                    "scratch/blob.incomplete"}  # fmt: skip
    assert p.outcome("nlp/x/runs/a/checkpoint-1000/") == ("delete",)
    assert p.outcome("nlp/x/runs/a/checkpoint-4000/") == ("kept", "whole")


# ----------------------------------------------------------------------------- validation

HEAD = "version: 1\nstorage:\n  - name: zoo\n    url: {tree}\n"  # 4 lines: bodies start at 5

VALIDATION_CASES = [
    pytest.param(
        "rules:\n  - name: c\n    select: {kind: checkpoint}\n    tiers:\n"
        "      - {name: recent, kep_last: 3}\n    otherwise: delete\n",
        "9:24: rules[0].tiers[0].kep_last: unknown key 'kep_last' (did you mean 'keep_last'?)",
        id="unknown-key",
    ),
    pytest.param(
        "rules:\n  - {name: r, expire: {after: 14days}}\n",
        "6:31: rules[0].expire.after: invalid duration '14days'",
        id="bad-duration",
    ),
    pytest.param(
        "safety:\n  max_delete_bytes: 5 TQ\n",
        "6:21: safety.max_delete_bytes: invalid size unit 'TQ'",
        id="bad-size",
    ),
    pytest.param(
        "approval:\n  approvers: two\n",
        "6:14: approval.approvers: expected a whole number, got a string",
        id="wrong-type",
    ),
    pytest.param(
        "safety:\n  - 1\n", "6:3: safety: expected a mapping, got a list", id="list-for-map"
    ),
    pytest.param(
        "pricing:\n  GLACIR: 0.004\n",
        "6:3: pricing.GLACIR: unknown storage class 'GLACIR' (did you mean 'GLACIER'?)",
        id="storage-class",
    ),
    pytest.param(
        "rules:\n  - name: c\n    tiers:\n      - {name: empty, max_age: 30d}\n"
        "    otherwise: keep\n",
        "8:9: rules[0].tiers[0]: tier 'empty' keeps nothing",
        id="tier-keeps-nothing",
    ),
    pytest.param(
        "rules:\n  - name: c\n    tiers:\n      - {name: recent, keep_last: 3}\n",
        "7:5: rules[0].tiers: 'otherwise: delete|keep' is required with tiers",
        id="otherwise-missing",
    ),
    pytest.param(
        "rules:\n  - name: logs\n    transition:\n      - {after: 14d, storage_class: GLACIER_IR}\n"
        "      - {after: 60d, storage_class: STANDARD_IA}\n",
        "9:37: rules[0].transition[1].storage_class: transition to STANDARD_IA goes up",
        id="up-the-waterfall",
    ),
    pytest.param(
        "rules:\n  - name: logs\n    transition: [{after: 60d, storage_class: STANDARD_IA}]\n"
        "    expire: {after: 30d}\n",
        "8:21: rules[0].expire.after: expire after 30d comes before the last transition (60d)",
        id="expire-before-transition",
    ),
    pytest.param(
        'layout:\n  runs: ["{team}/runs/{run}/"]\nrules:\n'
        "  - {name: nlp, select: {kind: log, teem: nlp}, expire: {after: 7d}}\n",
        "8:37: rules[0].select.teem: unknown select key 'teem' (did you mean 'team'?)",
        id="select-placeholder",
    ),
    pytest.param(
        "rules:\n  - name: c\n    tiers:\n      - {name: lt, keep: [final, best]}\n"
        "    otherwise: delete\n",
        "8:20: rules[0].tiers[0].keep: keep: [best] needs best_metric",
        id="best-without-metric",
    ),
    pytest.param(
        "rules:\n  - {name: logs, expire: {after: 7d}}\n  - {name: logs, expire: {after: 9d}}\n",
        "7:12: rules[1].name: duplicate rule name 'logs' (also rules[0])",
        id="duplicate-rule",
    ),
    pytest.param(
        'layout:\n  runs: ["runs/{name}/"]\n',
        "6:10: layout.runs[0]: template 'runs/{name}/' has no {run} placeholder",
        id="layout-template",
    ),
    pytest.param(
        "safety: {max_delete_fraction: 1.5}\n",
        "5:31: safety.max_delete_fraction",
        id="fraction-range",
    ),
    pytest.param("rules:\n  - name: [unclosed\n", "7:1: YAML syntax error", id="yaml-syntax"),
    pytest.param(
        "rules: []\nrules: []\n", "6:1: rules: duplicate key 'rules'", id="duplicate-yaml-key"
    ),
    pytest.param("bogus: 1\n", "5:1: bogus: unknown key 'bogus'", id="unknown-top-level"),
]


@pytest.mark.parametrize(("body", "expected"), VALIDATION_CASES)
def test_every_validation_error_is_exit_2_and_plans_nothing(
    tmp_path: Path, body: str, expected: str
) -> None:
    tree = tmp_path / "tree"
    hf_run(local_writer(tree), "runs/r", steps=(1000, 2000, 3000, 4000))  # 2024: old
    policy = tmp_path / "policy.yaml"
    policy.write_text(HEAD.format(tree=tree) + body, encoding="utf-8")
    catalog = f"sqlite:///{tmp_path / 'c.db'}"
    result = govern(catalog, "plan", "--policy", str(policy), "--format", "json")
    assert result.exit_code == 2, (result.stderr, result.stdout)
    assert f"{policy}:{expected}" in result.stderr
    assert result.stdout == ""
    validated = govern(catalog, "policy", "validate", str(policy))
    assert validated.exit_code == 2
    assert f"{policy}:{expected}" in validated.stderr
    assert not (tmp_path / "c.db").exists()  # refused before the catalog was even opened
    assert (tree / "runs/r/checkpoint-1000/optimizer.pt").exists()


def test_missing_policy_file_and_empty_policy_are_exit_2(tmp_path: Path) -> None:
    catalog = f"sqlite:///{tmp_path / 'c.db'}"
    missing = govern(catalog, "plan", "--policy", str(tmp_path / "nope.yaml"))
    assert missing.exit_code == 2
    assert "nope.yaml" in missing.stderr
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing\n", encoding="utf-8")
    result = govern(catalog, "plan", "--policy", str(empty))
    assert result.exit_code == 2
    assert f"{empty}:1:1: the policy is empty" in result.stderr


# ----------------------------------------------------------------------------- safety limits


@pytest.mark.parametrize(
    ("safety", "limit", "other"),
    [
        ("safety:\n  max_delete_bytes: 4KiB\n", "max_delete_bytes", "max_delete_fraction"),
        ("safety:\n  max_delete_fraction: 0.05\n", "max_delete_fraction", "max_delete_bytes"),
    ],
)
def test_each_safety_limit_refuses_end_to_end(
    zoo: Zoo, safety: str, limit: str, other: str
) -> None:
    policy = example_policy(zoo.tree, zoo.tmp / f"policy-{limit}.yaml", extra=safety)
    refused = govern(
        zoo.catalog, "plan", "--policy", str(policy), "--no-scan", "--as-of", AS_OF_TEXT,
        "--format", "json",
    )  # fmt: skip
    assert refused.exit_code == 3, refused.stderr
    doc = json.loads(refused.stdout)
    assert doc["status"] == "refused"
    assert limit in doc["refusal"]
    assert other not in doc["refusal"]
    assert f"plan {doc['plan_id']} refused" in refused.stderr
    assert limit in refused.stderr
    assert doc["actions"], "a refused plan is shown in full, not trimmed"
    listed = {
        p["plan_id"]: p["status"]
        for p in json.loads(govern(zoo.catalog, "plans", "--format", "json").stdout)
    }
    assert listed[doc["plan_id"]] == "refused"
    # the same plan under the example policy's limits (50TiB, 0.5) is not refused
    fine = zoo.plan("--no-scan", "--as-of", AS_OF_TEXT)
    assert fine.doc["status"] == "pending_approval"
    assert fine.doc["summary"]["bytes_deleted"] == doc["summary"]["bytes_deleted"]
