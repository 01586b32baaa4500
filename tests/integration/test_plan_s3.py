"""`govern scan` + `govern plan` end to end on S3: moto's server over HTTP.

The tree is uploaded with `put_object` through the fixture builders. S3 sets
LastModified to the upload time, so ages come from `--as-of` in the future instead of
mtimes: one scan, then plans at +1, +5, +20 and +70 days on the same catalog. Unlike on
local disk, S3 has storage classes: log transitions and the long-term tier's archive to
DEEP_ARCHIVE are planned, and a stale multipart upload is aborted. Runs without a marker
are running at +5 days and abandoned at +20; DeepSpeed, Megatron and Lightning runs appear
completed, running/abandoned and failed, each live or failed one with an unfinished save.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from click.testing import CliRunner, Result

from governance.cli.main import cli
from governance.plan.build import DEDUPE_NOT_PLANNED
from tests.fixtures.builders import (
    Writer,
    deepspeed_run,
    hf_run,
    lightning_run,
    marker,
    megatron_run,
    residue,
)

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_POLICY = REPO / "policies" / "retention.yaml"
D = timedelta(days=1)
KIB = 1024
BIG_WEIGHTS = ("model.safetensors", "_model_states.pt", "model_optim_rng.pt")

HF_DONE = "nlp/llama/runs/hf-done/"
HF_LIVE = "nlp/llama/runs/hf-live/"
HF_FAILED = "nlp/llama/runs/hf-failed/"
PL_DONE = "cv/resnet/runs/pl-done/"
DS_DONE = "nlp/gpt/runs/ds-done/"
MG_DONE = "nlp/gpt/runs/mg-done/"
LOGS_ONLY = "nlp/gpt/runs/logs-only/"
# No marker: running at +5 days (last write within abandoned_after 7d), abandoned after.
DS_LIVE = "nlp/gpt/runs/ds-live/"
MG_LIVE = "nlp/gpt/runs/mg-live/"
PL_LIVE = "cv/resnet/runs/pl-live/"
PL_LIVE_CKPTS = PL_LIVE + "lightning_logs/version_0/checkpoints/"
DS_FAILED = "nlp/gpt/runs/ds-failed/"
MG_FAILED = "nlp/gpt/runs/mg-failed/"
PL_FAILED = "cv/resnet/runs/pl-failed/"
UPLOAD_KEY = "scratch/shard-00042.tar"
LIVE_LAST = "epoch=4-step=500-val_loss=0.60.ckpt"  # written empty: a save in progress
UNFINISHED = {
    DS_DONE + "global_step300/",
    MG_DONE + "iter_0003000/",
    DS_LIVE + "global_step500/",
    MG_LIVE + "iter_0005000/",
    PL_LIVE_CKPTS + LIVE_LAST,
    DS_FAILED + "global_step300/",
    MG_FAILED + "iter_0003000/",
    PL_FAILED + "lightning_logs/version_0/checkpoints/epoch=1-step=200-val_loss=0.90.ckpt",
}


def s3_writer(client: Any, bucket: str) -> Writer:
    """Upload each object with `put_object` (the mtime cannot be set: S3 stamps it).

    Weight files are padded to 128 KiB so that they are not under the size below which
    no object is moved to a class that bills a minimum size, and the archive to
    DEEP_ARCHIVE is really planned.
    """

    def write(key: str, content: bytes, mtime: datetime | None) -> None:
        if key.endswith(BIG_WEIGHTS):
            content = content.ljust(128 * KIB, b"\0")
        client.put_object(Bucket=bucket, Key=key, Body=content)

    return write


def put(client: Any, bucket: str) -> Writer:
    """Upload each object as it is (no padding)."""

    def write(key: str, content: bytes, mtime: datetime | None) -> None:
        client.put_object(Bucket=bucket, Key=key, Body=content)

    return write


def build_tree(w: Writer, client: Any, bucket: str) -> None:
    hf_run(w, HF_DONE, steps=tuple(range(2500, 20001, 2500)), best_step=5000)
    marker(w, HF_DONE)
    hf_run(w, HF_LIVE, steps=(1000, 2000, 3000, 4000))  # no marker: running, then abandoned
    hf_run(w, HF_FAILED, steps=(1000, 2000))
    marker(w, HF_FAILED, "FAILED")
    lightning_run(w, PL_DONE, epochs=3)
    marker(w, PL_DONE)
    deepspeed_run(w, DS_DONE, steps=(100, 200, 300), latest=200)
    marker(w, DS_DONE)
    megatron_run(w, MG_DONE, iters=(1000, 2000, 3000), tracker=2000)
    marker(w, MG_DONE)
    # Running, then abandoned; and failed: each with an unfinished newest save (past
    # `latest`, past the tracker, an empty .ckpt). Not padded (`put`): nothing of theirs is
    # archived, and their bytes must not push the +20 days plan over max_delete_fraction.
    plain = put(client, bucket)
    deepspeed_run(plain, DS_LIVE, steps=(100, 200, 300, 400, 500), latest=400)
    megatron_run(plain, MG_LIVE, iters=(1000, 2000, 3000, 4000, 5000), tracker=4000, tp=1)
    lightning_run(plain, PL_LIVE, epochs=5, last=False, empty_last_epoch=True)
    # failed, each with an unfinished newest save too
    deepspeed_run(plain, DS_FAILED, steps=(100, 200, 300), latest=200)
    marker(plain, DS_FAILED, "FAILED")
    megatron_run(plain, MG_FAILED, iters=(1000, 2000, 3000), tracker=2000, tp=1)
    marker(plain, MG_FAILED, "FAILED")
    lightning_run(plain, PL_FAILED, epochs=2, last=False, empty_last_epoch=True)
    marker(plain, PL_FAILED, "FAILED")
    # logs big enough for STANDARD_IA / GLACIER_IR (128 KiB minimum billable size)
    for prefix in (DS_DONE, LOGS_ONLY):
        w(prefix + "logs/train.log", b"step 1 loss 2.0\n" * 10_000, None)
        w(prefix + "logs/metrics.jsonl", b'{"step": 1, "loss": 2.0}\n' * 8_000, None)
    residue(w, "scratch")
    client.create_multipart_upload(Bucket=bucket, Key=UPLOAD_KEY)


@dataclass
class Bucket:
    name: str
    catalog: str
    policy: Path
    uploaded: datetime  # just after the last upload: LastModified of everything is <= this

    @property
    def base(self) -> str:
        return f"s3://{self.name}/"

    def plan(self, days: float, *extra: str, code: int | None = 0) -> Plan:
        as_of = (self.uploaded + timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")
        result = govern(
            self.catalog, "plan", "--policy", str(self.policy), "--no-scan", "--as-of", as_of,
            "--format", "json", *extra,
        )  # fmt: skip
        if code is not None:
            assert result.exit_code == code, (result.exit_code, result.stderr)
        return Plan(json.loads(result.stdout), self.base)


@dataclass
class Plan:
    doc: dict[str, Any]
    base: str

    def rel(self, uri: str) -> str:
        assert uri.startswith(self.base), uri
        return uri[len(self.base) :]

    def actions(self, key: str) -> list[dict[str, Any]]:
        return [a for a in self.doc["actions"] if self.rel(a["artifact"]["uri"]) == key]

    def kept(self, key: str) -> dict[str, Any]:
        (found,) = [k for k in self.doc["kept"] if self.rel(k["artifact"]["uri"]) == key]
        return found

    def outcome(self, key: str) -> tuple[str, ...]:
        acts = tuple(a["action"] for a in self.actions(key))
        kept = [k["how"] for k in self.doc["kept"] if self.rel(k["artifact"]["uri"]) == key]
        assert len(kept) <= 1
        return acts + (("kept", kept[0]) if kept else ())

    def by_rule(self, rule: str) -> set[str]:
        return {self.rel(a["artifact"]["uri"]) for a in self.doc["actions"] if a["rule"] == rule}


def govern(catalog: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--catalog", catalog, "-q", *args])


@pytest.fixture(scope="module")
def bucket(moto_server: str, tmp_path_factory: pytest.TempPathFactory) -> Bucket:
    """The tree uploaded once, scanned once through the example policy pointed at it."""
    tmp = tmp_path_factory.mktemp("s3plan")
    client = boto3.client("s3", endpoint_url=moto_server, region_name="us-east-1")
    name = f"plan-{uuid.uuid4().hex[:16]}"
    client.create_bucket(Bucket=name)
    build_tree(s3_writer(client, name), client, name)
    uploaded = datetime.now(UTC) + timedelta(seconds=1)
    text = EXAMPLE_POLICY.read_text(encoding="utf-8")
    text, n = re.subn(
        r"^storage:.*?\n\n",
        f"storage:\n  - name: artifacts\n    url: s3://{name}/\n    endpoint_url: {moto_server}\n\n",
        text, count=1, flags=re.S | re.M,
    )  # fmt: skip
    assert n == 1
    policy = tmp / "policy.yaml"
    policy.write_text(text, encoding="utf-8")
    catalog = f"sqlite:///{tmp / 'catalog.db'}"
    scanned = govern(catalog, "scan", "--policy", str(policy), "--format", "json")
    assert scanned.exit_code == 0, scanned.stderr
    assert json.loads(scanned.stdout)["scans"][0]["objects"] > 200
    return Bucket(name, catalog, policy, uploaded)


def test_nothing_is_touched_inside_the_grace_period(bucket: Bucket) -> None:
    p = bucket.plan(1)
    # moto reports every multipart upload as initiated on 2010-11-10 (a fixed date), so the
    # upload is stale whatever the as-of; everything uploaded today is protected
    assert [(p.rel(a["artifact"]["uri"]), a["action"]) for a in p.doc["actions"]] == [
        (UPLOAD_KEY, "abort_upload")
    ]
    how = {p.rel(k["artifact"]["uri"]): k for k in p.doc["kept"]}
    # every unfinished save, whatever its run's status, is in flight: never residue yet
    in_flight = {k for k, v in how.items() if v["how"] == "in_flight"}
    assert in_flight == UNFINISHED
    protected = [v for v in how.values() if v["how"] == "protected"]
    assert len(protected) == len(how) - len(UNFINISHED)
    assert all("protect.min_age" in v["reason"] for v in protected)


def test_five_days_on(bucket: Bucket) -> None:
    p = bucket.plan(5)
    assert p.doc["status"] == "what_if"  # five days ahead: read, never applied
    ck = HF_DONE + "checkpoint-{}/"
    # completed HF run, everything within 30d: recent 3 whole, mid-term buckets stripped,
    # best (5000) stripped and archived to DEEP_ARCHIVE in place, the rest deleted
    for step in (15000, 17500, 20000):
        assert p.outcome(ck.format(step)) == ("kept", "whole")
    for step in (2500, 7500, 12500):
        assert p.outcome(ck.format(step)) == ("strip", "kept", "stripped")
        assert p.actions(ck.format(step))[0]["tier"] == "mid-term"
    strip, archive = p.actions(ck.format(5000))
    assert (strip["tier"], strip["action"]) == ("long-term", "strip")
    assert (archive["action"], archive["storage_class"]) == ("archive", "DEEP_ARCHIVE")
    assert archive["dest_url"] is None
    assert {o["uri"].rsplit("/", 1)[1] for o in archive["objects"]} == {"model.safetensors"}
    # its cost (policy.md "Costs, exactly"): one DEEP_ARCHIVE lifecycle request ($0.05 per
    # 1,000), the 128 KiB priced at STANDARD 0.023 before, DEEP_ARCHIVE 0.00099 after (the
    # example policy's pricing), no minimum duration to break in STANDARD
    gib = 128 * KIB / 2**30
    assert archive["request_cost_usd"] == pytest.approx(0.05 / 1000)
    assert archive["monthly_cost_before_usd"] == pytest.approx(gib * 0.023)
    assert archive["monthly_cost_after_usd"] == pytest.approx(gib * 0.00099)
    assert archive["early_deletion_usd"] == 0
    assert p.doc["summary"]["request_cost_usd"] == pytest.approx(0.05 / 1000)  # the only one
    assert (
        "archived to DEEP_ARCHIVE; 7 objects under 128 KiB stay where they are"
        in (archive["reason"])
    )
    assert p.outcome(ck.format(10000)) == ("delete",)
    # running HF run: thinned by the tiers only
    assert p.outcome(HF_LIVE + "checkpoint-1000/") == ("delete",)
    assert p.actions(HF_LIVE + "checkpoint-1000/")[0]["rule"] == "checkpoints"
    assert p.by_rule("failed-runs") == set()  # the failed run's last write is 5d < 14d
    # residue: the temp files, the unfinished DeepSpeed tag and Megatron iteration, the upload
    assert p.by_rule("residue") == {
        "scratch/upload.tmp",
        "scratch/model.safetensors.partial",
        "scratch/blob.incomplete",
        DS_DONE + "global_step300/",
        MG_DONE + "iter_0003000/",
        UPLOAD_KEY,
    }
    (abort,) = p.actions(UPLOAD_KEY)
    assert abort["action"] == "abort_upload"
    assert abort["destructive"] is True
    assert abort["objects"][0]["upload_id"]
    # Lightning: last.ckpt has the bytes of epoch 2 and was uploaded with it: Lightning's
    # save_last copy, which takes no `recent` place: epochs 0-2 are the newest 3, kept
    # whole, and last.ckpt with epoch 2
    ckpts = PL_DONE + "lightning_logs/version_0/checkpoints/"
    for name in ("epoch=0-step=100-val_loss=1.00.ckpt", "epoch=1-step=200-val_loss=0.90.ckpt",
                 "epoch=2-step=300-val_loss=0.80.ckpt", "last.ckpt"):  # fmt: skip
        assert p.outcome(ckpts + name) == ("kept", "whole")
    assert "save_last copy of step 300" in p.kept(ckpts + "last.ckpt")["reason"]  # type: ignore[index]
    # running DeepSpeed, Megatron and Lightning runs: thinned by the tiers only, the newest 3
    # complete kept whole; the unfinished save, now past the grace period, is residue, but
    # of a running run: protected (protect.run_status), not expired by `residue` (above)
    for prefix, units in (
        (DS_LIVE, [f"global_step{s}/" for s in (100, 200, 300, 400, 500)]),
        (MG_LIVE, [f"iter_{i:07d}/" for i in (1000, 2000, 3000, 4000, 5000)]),
        (PL_LIVE_CKPTS, [f"epoch={e}-step={(e + 1) * 100}-val_loss={1.0 - e / 10:.2f}.ckpt"
                         for e in range(5)]),
    ):  # fmt: skip
        oldest, *newest3, unfinished = (prefix + u for u in units)
        (d,) = p.actions(oldest)
        assert (d["rule"], d["tier"], d["action"]) == ("checkpoints", None, "delete")
        for key in newest3:
            assert p.outcome(key) == ("kept", "whole"), key
        assert p.outcome(unfinished) == ("kept", "protected"), unfinished
        run = prefix.split("/")[3]
        assert f"run {run} is running (protect.run_status" in p.kept(unfinished)["reason"]
        assert {a["rule"] for a in p.doc["actions"] if prefix in a["artifact"]["uri"]} == {
            "checkpoints"
        }
    # failed runs, 5 days on: `failed-runs` owns every artifact (their residue too) and
    # keeps it until 14 days after the run's last write
    for prefix in (DS_FAILED, MG_FAILED, PL_FAILED):
        run = prefix.split("/")[3]
        assert not [a for a in p.doc["actions"] if prefix in a["artifact"]["uri"]]
        held = [k for k in p.doc["kept"] if prefix in k["artifact"]["uri"]]
        assert held
        for k in held:
            assert (k["rule"], k["how"]) == ("failed-runs", "rule_keeps")
            assert k["reason"] == (
                f"not expired yet: run {run} (failed) last written 5 days ago, "
                "rule failed-runs expires after 14d"
            )
        assert not {k for k in UNFINISHED if k.startswith(prefix)} & {
            p.rel(k["artifact"]["uri"]) for k in held
        }  # residue is not on the kept list (see summary.left): it is just not acted on
    # logs are 5 days old: no transition due yet; S3 has storage classes, so no
    # not-applicable notes
    assert not [a for a in p.doc["actions"] if a["action"] == "transition"]
    notes = p.doc["notes"]
    assert notes[0].startswith("what-if: made as of ")  # (planned as of 5 days on)
    notes = notes[1:]
    assert notes[-1] == DEDUPE_NOT_PLANNED  # the example policy has a dedupe block
    assert not [n for n in notes if "not applicable" in n]
    # the long-term tier keeps best by eval_loss: runs that report none are named
    [unmeasured] = notes[:-1]
    assert "tier long-term (rule checkpoints) keeps the best checkpoint by eval_loss" in unmeasured
    assert unmeasured.endswith("best keeps nothing there")


def test_twenty_days_on_expires_dead_runs_and_moves_logs_to_ia(bucket: Bucket) -> None:
    p = bucket.plan(20)
    expired = p.by_rule("failed-runs")
    assert {HF_LIVE + f"checkpoint-{s}/" for s in (1000, 2000, 3000, 4000)} <= expired
    assert {
        HF_FAILED + "checkpoint-1000/",
        HF_FAILED + "checkpoint-2000/",
        HF_FAILED + "FAILED",
    } <= expired
    # the unmarked runs are abandoned now (20d > abandoned_after 7d) and expired (> 14d):
    # everything under them goes, unfinished saves included; so do the failed runs
    for prefix, status in (
        (DS_LIVE, "abandoned"), (MG_LIVE, "abandoned"), (PL_LIVE, "abandoned"),
        (DS_FAILED, "failed"), (MG_FAILED, "failed"), (PL_FAILED, "failed"),
    ):  # fmt: skip
        run = prefix.split("/")[3]
        acts = [a for a in p.doc["actions"] if prefix in a["artifact"]["uri"]]
        assert {(a["rule"], a["action"], a["reason"]) for a in acts} == {
            (
                "failed-runs",
                "delete",
                f"expired: run {run} ({status}) last written 20 days ago, "
                "rule failed-runs expires after 14d",
            )
        }
        assert not [k for k in p.doc["kept"] if prefix in k["artifact"]["uri"]]
    assert {k for k in UNFINISHED if "-live/" in k or "-failed/" in k} <= expired
    moved = {
        p.rel(a["artifact"]["uri"]): a for a in p.doc["actions"] if a["action"] == "transition"
    }
    assert set(moved) == {
        DS_DONE + "logs/train.log",
        DS_DONE + "logs/metrics.jsonl",
        LOGS_ONLY + "logs/train.log",
        LOGS_ONLY + "logs/metrics.jsonl",
    }
    for a in moved.values():
        assert (a["rule"], a["storage_class"], a["destructive"]) == ("logs", "STANDARD_IA", False)
    assert p.doc["summary"]["bytes_transitioned"] == sum(a["bytes"] for a in moved.values())


def test_seventy_days_on_moves_logs_to_glacier_ir(bucket: Bucket) -> None:
    p = bucket.plan(70, code=None)  # most of the tree goes: may be refused, still listed
    moved = [a for a in p.doc["actions"] if a["action"] == "transition"]
    assert len(moved) == 4
    assert {a["storage_class"] for a in moved} == {"GLACIER_IR"}
    # completed runs beyond every max_age keep only final and best, archived
    kept = {p.rel(k["artifact"]["uri"]): k for k in p.doc["kept"]}
    done = {k: v["how"] for k, v in kept.items() if k.startswith(HF_DONE)}
    assert done == {
        HF_DONE + "checkpoint-20000/": "archived",
        HF_DONE + "checkpoint-5000/": "archived",
    }


@pytest.mark.parametrize(
    ("limit", "line", "tight"),
    [
        ("max_delete_bytes", "max_delete_bytes: 50TiB", "max_delete_bytes: 1KiB"),
        ("max_delete_fraction", "max_delete_fraction: 0.5", "max_delete_fraction: 0.01"),
    ],
)
def test_safety_limit_refuses_on_s3(
    bucket: Bucket, tmp_path: Path, limit: str, line: str, tight: str
) -> None:
    """Either limit, tightened, refuses the +5 days plan (which is within both limits of
    the example policy): exit 3, status refused, the limit and root named, and the plan
    saved as refused all the same (docs/cli.md)."""
    text = bucket.policy.read_text(encoding="utf-8")
    assert text.count(line) == 1
    policy = tmp_path / "tight.yaml"
    policy.write_text(text.replace(line, tight), encoding="utf-8")
    as_of = (bucket.uploaded + 5 * D).strftime("%Y-%m-%dT%H:%M:%SZ")
    result = govern(
        bucket.catalog, "plan", "--policy", str(policy), "--no-scan", "--as-of", as_of,
        "--format", "json",
    )  # fmt: skip
    assert result.exit_code == 3, result.stderr
    doc = json.loads(result.stdout)
    assert doc["status"] == "refused"
    assert f"over {limit} " in doc["refusal"]
    (other,) = {"max_delete_bytes", "max_delete_fraction"} - {limit}
    assert other not in doc["refusal"]  # the other limit holds: only this one is named
    assert bucket.base in doc["refusal"]
    assert doc["actions"]  # listed, not trimmed
    listed = govern(bucket.catalog, "plans", "--format", "json")
    assert listed.exit_code == 0, listed.stderr
    (saved,) = [p for p in json.loads(listed.stdout) if p["plan_id"] == doc["plan_id"]]
    assert saved["status"] == "refused"
    shown = govern(bucket.catalog, "show", doc["plan_id"], "--format", "json")
    assert shown.exit_code == 0, shown.stderr
    assert json.loads(shown.stdout)["status"] == "refused"
    assert json.loads(shown.stdout)["refusal"] == doc["refusal"]
