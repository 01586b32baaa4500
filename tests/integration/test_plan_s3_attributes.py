"""Tags and Object Lock seen at plan time, end to end on S3: moto's server over HTTP.

A listing gives neither tags nor lock state; `govern plan` reads what the catalog lacks
(GetObjectTagging when the policy uses tags, HEAD when the bucket has Object Lock) and
protects what it could not read (policy.md invariant 2). Objects are uploaded with
`put_object`, so their ages come from `--as-of` in the future.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result
from sqlalchemy import text

from governance.catalog.engine import open_engine
from governance.cli.main import cli

TAG_POLICY = """\
version: 1
storage:
  - name: s3
    url: s3://{bucket}/
    endpoint_url: {endpoint}
safety: {{max_delete_fraction: 1.0}}
protect:
  min_age: 1d
  tags: {{retain: "true"}}
rules:
  - name: logs
    select: {{kind: log}}
    expire: {{after: 2d}}
"""

SELECT_POLICY = """\
version: 1
storage:
  - name: s3
    url: s3://{bucket}/
    endpoint_url: {endpoint}
safety: {{max_delete_fraction: 1.0}}
protect:
  min_age: 1d
rules:
  - name: nlp-logs
    select: {{kind: log, tags: {{team: nlp}}}}
    expire: {{after: 2d}}
"""

PLAIN_POLICY = """\
version: 1
storage:
  - name: s3
    url: s3://{bucket}/
    endpoint_url: {endpoint}
safety: {{max_delete_fraction: 1.0}}
protect:
  min_age: 1d
rules:
  - name: logs
    select: {{kind: log}}
    expire: {{after: 2d}}
"""


def govern(catalog: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--catalog", catalog, "-q", *args])


@dataclass
class Setup:
    bucket: str
    catalog: str
    policy: Path

    def scan(self) -> None:
        result = govern(self.catalog, "scan", "--policy", str(self.policy))
        assert result.exit_code == 0, result.stderr

    def plan(self, days: float = 10, *extra: str) -> Outcomes:
        as_of = datetime.now(UTC) + timedelta(days=days)
        result = govern(
            self.catalog, "plan", "--policy", str(self.policy), "--format", "json",
            "--as-of", as_of.strftime("%Y-%m-%dT%H:%M:%SZ"), *extra,
        )  # fmt: skip
        assert result.exit_code == 0, (result.stderr, result.output)
        return Outcomes(json.loads(result.stdout), f"s3://{self.bucket}/")

    def rows(self) -> dict[str, tuple[Any, ...]]:
        """key -> (tags, lock_read, lock_mode, retain until µs, legal_hold) in the catalog."""
        engine = open_engine(self.catalog)
        try:
            with engine.connect() as conn:
                rows = conn.execute(
                    text(
                        "SELECT key, tags, lock_read, lock_mode, lock_retain_until_us, "
                        "legal_hold FROM objects WHERE gone_scan_id IS NULL"
                    )
                ).all()
        finally:
            engine.dispose()
        return {
            r[0]: (None if r[1] is None else json.loads(r[1]), bool(r[2]), *r[3:]) for r in rows
        }

    def object_lock(self) -> bool | None:
        engine = open_engine(self.catalog)
        try:
            with engine.connect() as conn:
                value = conn.execute(text("SELECT object_lock FROM roots")).scalar_one()
        finally:
            engine.dispose()
        return None if value is None else bool(value)


@dataclass
class Outcomes:
    doc: dict[str, Any]
    base: str

    def of(self, key: str) -> tuple[str, str]:
        """(action or kept-how, reason) of the artifact at `key`."""
        uri = self.base + key
        for a in self.doc["actions"]:
            if a["artifact"]["uri"] == uri:
                return a["action"], a["reason"]
        for k in self.doc["kept"]:
            if k["artifact"]["uri"] == uri:
                return k["how"], k["reason"]
        return "nothing", ""


def _setup(tmp_path: Path, endpoint: str, client: Any, policy: str, *, lock: bool = False) -> Setup:
    bucket = f"attrs-{uuid.uuid4().hex[:16]}"
    if lock:
        client.create_bucket(Bucket=bucket, ObjectLockEnabledForBucket=True)
    else:
        client.create_bucket(Bucket=bucket)
    path = tmp_path / "policy.yaml"
    path.write_text(policy.format(bucket=bucket, endpoint=endpoint), encoding="utf-8")
    return Setup(bucket, f"sqlite:///{tmp_path / 'catalog.db'}", path)


def test_a_tagged_object_is_protected_end_to_end(
    tmp_path: Path, moto_server: str, s3_client: Any
) -> None:
    # the review's repro: a log tagged retain=true, a policy protecting that tag, logs expiring
    s = _setup(tmp_path, moto_server, s3_client, TAG_POLICY)
    s3_client.put_object(Bucket=s.bucket, Key="logs/keep-me.log", Body=b"k", Tagging="retain=true")
    s3_client.put_object(Bucket=s.bucket, Key="logs/drop-me.log", Body=b"d")
    s3_client.put_object(Bucket=s.bucket, Key="logs/other.log", Body=b"o", Tagging="retain=no")
    plan = s.plan()
    how, reason = plan.of("logs/keep-me.log")
    assert how == "protected"
    assert "protected tag retain=true" in reason
    assert plan.of("logs/drop-me.log")[0] == "delete"
    assert plan.of("logs/other.log")[0] == "delete"
    # read once, into the catalog: `{}` is "read, none"
    rows = s.rows()
    assert rows["logs/keep-me.log"][0] == {"retain": "true"}
    assert rows["logs/drop-me.log"][0] == {}
    assert rows["logs/other.log"][0] == {"retain": "no"}
    # the bucket was asked about Object Lock (none), so no lock state is read
    assert s.object_lock() is False
    assert {r[1] for r in rows.values()} == {False}
    # planned again from the catalog alone: the same answer
    again = s.plan(10, "--no-scan")
    assert again.of("logs/keep-me.log")[0] == "protected"
    assert again.of("logs/drop-me.log")[0] == "delete"


def test_a_select_tags_rule_acts_on_matching_objects_only(
    tmp_path: Path, moto_server: str, s3_client: Any
) -> None:
    s = _setup(tmp_path, moto_server, s3_client, SELECT_POLICY)
    s3_client.put_object(Bucket=s.bucket, Key="logs/nlp.log", Body=b"a", Tagging="team=nlp")
    s3_client.put_object(Bucket=s.bucket, Key="logs/cv.log", Body=b"b", Tagging="team=cv")
    s3_client.put_object(Bucket=s.bucket, Key="logs/none.log", Body=b"c")
    plan = s.plan()
    assert plan.of("logs/nlp.log")[0] == "delete"
    assert plan.of("logs/cv.log")[0] != "delete"
    assert plan.of("logs/none.log")[0] != "delete"
    assert {a["rule"] for a in plan.doc["actions"]} == {"nlp-logs"}


def test_tags_that_cannot_be_read_protect_their_artifact(
    tmp_path: Path, moto_server: str, s3_client: Any
) -> None:
    s = _setup(tmp_path, moto_server, s3_client, TAG_POLICY)
    s3_client.put_object(Bucket=s.bucket, Key="logs/vanishing.log", Body=b"v")
    s3_client.put_object(Bucket=s.bucket, Key="logs/plain.log", Body=b"p")
    s.scan()
    # gone from the bucket after the scan: GetObjectTagging fails (NoSuchKey), the
    # catalog still lists it, and its tags are unknown
    s3_client.delete_object(Bucket=s.bucket, Key="logs/vanishing.log")
    plan = s.plan(10, "--no-scan")
    how, reason = plan.of("logs/vanishing.log")
    assert how == "protected"
    assert "tags of logs/vanishing.log not read" in reason
    assert "protect.tags/select.tags" in reason
    assert plan.of("logs/plain.log")[0] == "delete"
    rows = s.rows()
    assert rows["logs/vanishing.log"][0] is None  # still not read: the next plan tries again
    assert rows["logs/plain.log"][0] == {}


def test_a_select_tags_rule_does_not_hand_unread_tags_to_a_later_rule(
    tmp_path: Path, moto_server: str, s3_client: Any
) -> None:
    # nlp logs expire fast, every other log slowly: an nlp log whose tags are unknown
    # must not fall through to the catch-all rule either
    policy = (
        SELECT_POLICY + "  - name: all-logs\n    select: {{kind: log}}\n    expire: {{after: 5d}}\n"
    )
    s = _setup(tmp_path, moto_server, s3_client, policy)
    s3_client.put_object(Bucket=s.bucket, Key="logs/nlp.log", Body=b"a", Tagging="team=nlp")
    s3_client.put_object(Bucket=s.bucket, Key="logs/any.log", Body=b"b")
    s.scan()
    s3_client.delete_object(Bucket=s.bucket, Key="logs/nlp.log")
    plan = s.plan(10, "--no-scan")
    assert plan.of("logs/nlp.log")[0] == "protected"
    assert plan.of("logs/any.log")[0] == "delete"
    assert {a["rule"] for a in plan.doc["actions"]} == {"all-logs"}


def test_a_legal_hold_or_a_running_retention_keeps_an_artifact_out_of_the_plan(
    tmp_path: Path, moto_server: str, s3_client: Any
) -> None:
    s = _setup(tmp_path, moto_server, s3_client, PLAIN_POLICY, lock=True)
    for key in ("held", "retained", "lapsed", "free"):
        s3_client.put_object(Bucket=s.bucket, Key=f"logs/{key}.log", Body=key.encode())
    s3_client.put_object_legal_hold(
        Bucket=s.bucket, Key="logs/held.log", LegalHold={"Status": "ON"}
    )
    now = datetime.now(UTC)
    s3_client.put_object_retention(
        Bucket=s.bucket,
        Key="logs/retained.log",
        Retention={"Mode": "GOVERNANCE", "RetainUntilDate": now + timedelta(days=60)},
    )
    s3_client.put_object_retention(
        Bucket=s.bucket,
        Key="logs/lapsed.log",
        Retention={"Mode": "GOVERNANCE", "RetainUntilDate": now + timedelta(days=2)},
    )
    s.scan()
    assert s.object_lock() is True  # the scan asked the bucket
    # planned without a scan: the root is opened to read the lock state the catalog lacks
    plan = s.plan(10, "--no-scan")
    how, reason = plan.of("logs/held.log")
    assert (how, reason) == ("protected", "protected: legal hold on logs/held.log")
    how, reason = plan.of("logs/retained.log")
    assert how == "protected"
    assert reason.startswith("protected: object lock on logs/retained.log until ")
    assert "governance mode" in reason
    # retained until a date before as_of: no longer protected
    assert plan.of("logs/lapsed.log")[0] == "delete"
    assert plan.of("logs/free.log")[0] == "delete"
    rows = s.rows()
    assert rows["logs/held.log"][1:] == (True, None, None, True)
    assert rows["logs/retained.log"][1:3] == (True, "GOVERNANCE")
    assert rows["logs/free.log"][1:] == (True, None, None, False)
    assert {r[0] for r in rows.values()} == {None}  # the policy uses no tags: none read


def test_a_changed_object_has_its_tags_read_again(
    tmp_path: Path, moto_server: str, s3_client: Any
) -> None:
    s = _setup(tmp_path, moto_server, s3_client, TAG_POLICY)
    s3_client.put_object(Bucket=s.bucket, Key="logs/x.log", Body=b"first")
    s3_client.put_object(Bucket=s.bucket, Key="logs/y.log", Body=b"same")
    assert s.plan().of("logs/x.log")[0] == "delete"
    assert s.rows()["logs/x.log"][0] == {}
    # overwritten with a protecting tag (a new object: new ETag, new LastModified)
    s3_client.put_object(Bucket=s.bucket, Key="logs/x.log", Body=b"second", Tagging="retain=true")
    s.scan()
    rows = s.rows()
    assert rows["logs/x.log"][0] is None  # reset by the scan: not read
    assert rows["logs/y.log"][0] == {}  # unchanged: kept
    plan = s.plan(10, "--no-scan")
    assert plan.of("logs/x.log")[0] == "protected"
    assert s.rows()["logs/x.log"][0] == {"retain": "true"}


def test_a_bucket_without_object_lock_and_a_policy_without_tags_read_nothing(
    tmp_path: Path, moto_server: str, s3_client: Any
) -> None:
    s = _setup(tmp_path, moto_server, s3_client, PLAIN_POLICY)
    s3_client.put_object(Bucket=s.bucket, Key="logs/a.log", Body=b"a", Tagging="retain=true")
    plan = s.plan()
    assert plan.of("logs/a.log")[0] == "delete"  # no protect.tags: tags do not matter
    assert s.rows()["logs/a.log"][:2] == (None, False)
    assert s.object_lock() is False


def test_an_unknown_object_lock_configuration_is_read_as_locked(
    tmp_path: Path, moto_server: str, s3_client: Any
) -> None:
    """A catalog scanned before Object Lock was asked (or a scan denied the question),
    planned with --no-scan: each object's lock state is read, so a legal hold is seen."""
    s = _setup(tmp_path, moto_server, s3_client, PLAIN_POLICY, lock=True)
    s3_client.put_object(Bucket=s.bucket, Key="logs/held.log", Body=b"h")
    s3_client.put_object(Bucket=s.bucket, Key="logs/free.log", Body=b"f")
    s3_client.put_object_legal_hold(
        Bucket=s.bucket, Key="logs/held.log", LegalHold={"Status": "ON"}
    )
    s.scan()
    engine = open_engine(s.catalog)
    with engine.begin() as conn:
        conn.execute(text("UPDATE roots SET object_lock = NULL"))
        conn.execute(text("UPDATE objects SET lock_read = false"))
    engine.dispose()
    out = s.plan(10, "--no-scan")
    assert out.of("logs/held.log") == ("protected", "protected: legal hold on logs/held.log")
    assert out.of("logs/free.log")[0] == "delete"


def test_a_tag_put_on_an_unchanged_object_is_seen_by_the_next_plan(
    tmp_path: Path, moto_server: str, s3_client: Any
) -> None:
    """S3 keeps an object's ETag, LastModified and version when its tags change, so no
    scan sees it: a plan reads again the tags of what it would act on before it is saved
    (invariant 2), and whatever is protected now is not in it."""
    s = _setup(tmp_path, moto_server, s3_client, TAG_POLICY)
    s3_client.put_object(Bucket=s.bucket, Key="logs/a.log", Body=b"a")
    s3_client.put_object(Bucket=s.bucket, Key="logs/b.log", Body=b"b")
    first = s.plan()
    assert first.of("logs/a.log")[0] == "delete"
    tag = {"TagSet": [{"Key": "retain", "Value": "true"}]}
    s3_client.put_object_tagging(Bucket=s.bucket, Key="logs/a.log", Tagging=tag)
    second = s.plan()
    assert second.of("logs/a.log") == (
        "protected",
        "protected: object logs/a.log has protected tag retain=true",
    )
    assert second.of("logs/b.log")[0] == "delete"
    assert s.rows()["logs/a.log"][0] == {"retain": "true"}
