"""`govern scan` of a root that lists nothing (a warning on stderr, exit 0, the JSON as it
was) and of an S3 root whose bucket name is not valid (exit 2, one line saying what is
wrong, nothing recorded): through the moto server over HTTP, and on local disk."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import text

from governance.catalog.engine import open_engine
from governance.cli.main import cli
from governance.storage import s3_bucket_problem
from tests.integration.conftest import PutMany

pytestmark = pytest.mark.s3

SCAN_KEYS = {
    *("root", "scan_id", "status", "objects", "bytes", "new", "changed", "gone"),
    *("seconds", "error"),
}
"""A scan's JSON keys (docs/cli.md), unchanged: no warning goes into the JSON."""


@pytest.fixture
def endpoint(moto_server: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """`--root` takes no endpoint: boto3 reads it from AWS_ENDPOINT_URL, as a user's would."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server)
    return moto_server


def _scan(tmp_path: Path, *args: str, quiet: bool = False) -> Result:
    catalog = f"sqlite:///{tmp_path / 'c.db'}"
    flags = ["-q"] if quiet else []
    return CliRunner().invoke(cli, ["--catalog", catalog, *flags, "scan", *args])


def _roots(tmp_path: Path) -> int:
    engine = open_engine(f"sqlite:///{tmp_path / 'c.db'}")
    try:
        with engine.connect() as conn:
            return int(conn.execute(text("SELECT count(*) FROM roots")).scalar_one())
    finally:
        engine.dispose()


def _warnings(result: Result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("warning:")]


def test_a_mistyped_prefix_warns_naming_what_the_bucket_holds(
    tmp_path: Path, endpoint: str, s3_bucket: str, put_many: PutMany
) -> None:
    put_many(s3_bucket, ["runs/r1/model.pt", "datasets/d1/part-0", "README"])
    root = f"s3://{s3_bucket}/nope/"
    result = _scan(tmp_path, "--root", root, "--format", "json")
    assert result.exit_code == 0, result.output
    assert _warnings(result) == [
        f"warning: {root}: no objects under this prefix "
        "(is it spelled right? the bucket holds: README, datasets/, runs/)"
    ]
    document = json.loads(result.stdout)  # stdout is the JSON alone, shaped as before
    assert set(document) == {"scans", "errors"}
    (scan,) = document["scans"]
    assert set(scan) == SCAN_KEYS
    assert (scan["root"], scan["status"], scan["objects"]) == (root, "complete", 0)
    assert document["errors"] == []

    quiet = _scan(tmp_path, "--root", root, "--format", "json", quiet=True)
    assert quiet.exit_code == 0
    assert quiet.stderr == ""  # -q silences warnings, as it does logged ones and notes


def test_a_mistyped_nested_prefix_of_a_policy_root_names_its_folder(
    tmp_path: Path, moto_server: str, s3_bucket: str, put_many: PutMany
) -> None:
    put_many(s3_bucket, [f"runs/r{i}/model.pt" for i in range(7)])
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "version: 1\nstorage:\n"
        f"  - {{name: a, url: 's3://{s3_bucket}/runs/r9/', endpoint_url: '{moto_server}'}}\n"
        "rules: []\n"
    )
    result = _scan(tmp_path, "--policy", str(policy))
    assert result.exit_code == 0, result.output
    assert _warnings(result) == [
        f"warning: s3://{s3_bucket}/runs/r9/: no objects under this prefix (is it spelled "
        f"right? s3://{s3_bucket}/runs/ holds: r0/, r1/, r2/, r3/, r4/, …)"
    ]
    assert "objects" in result.stdout  # the table is still printed, on stdout
    # the scan `govern plan` runs first warns alike
    catalog = f"sqlite:///{tmp_path / 'c.db'}"
    planned = CliRunner().invoke(cli, ["--catalog", catalog, "plan", "--policy", str(policy)])
    assert planned.exit_code == 0, planned.output
    assert _warnings(planned) == _warnings(result)


def test_the_hint_costs_one_request_and_only_when_nothing_was_listed(
    tmp_path: Path, endpoint: str, s3_bucket: str, put_many: PutMany, monkeypatch: Any
) -> None:
    import governance.storage.s3 as s3_module

    real = s3_module.nearest_entries
    requests: list[dict[str, Any]] = []

    def counting(client: Any, *args: Any) -> Any:
        def list_objects_v2(**params: Any) -> Any:
            requests.append(params)
            return client.list_objects_v2(**params)

        spy = type("Spy", (), {"list_objects_v2": staticmethod(list_objects_v2)})()
        return real(spy, *args)

    monkeypatch.setattr(s3_module, "nearest_entries", counting)
    put_many(s3_bucket, ["runs/r1/model.pt"])
    assert _scan(tmp_path, "--root", f"s3://{s3_bucket}/runs/").exit_code == 0
    assert requests == []
    assert _scan(tmp_path, "--root", f"s3://{s3_bucket}/nope/").exit_code == 0
    assert [(r["Prefix"], r["Delimiter"]) for r in requests] == [("", "/")]


def test_an_empty_bucket_and_a_prefix_in_it_warn(
    tmp_path: Path, endpoint: str, s3_bucket: str
) -> None:
    result = _scan(tmp_path, "--root", f"s3://{s3_bucket}/", "--root", f"s3://{s3_bucket}x/")
    assert result.exit_code == 2  # the second bucket does not exist; the first still scans
    assert _warnings(result) == [f"warning: s3://{s3_bucket}/: no objects to scan in this bucket"]
    result = _scan(tmp_path, "--root", f"s3://{s3_bucket}/a/b/")
    assert result.exit_code == 0
    assert _warnings(result) == [
        f"warning: s3://{s3_bucket}/a/b/: no objects under this prefix (the bucket is empty)"
    ]


def test_a_root_emptied_since_the_last_scan_says_its_objects_are_gone(
    tmp_path: Path, endpoint: str, s3_bucket: str, s3_client: Any, put_many: PutMany
) -> None:
    put_many(s3_bucket, ["runs/r1/a", "runs/r1/b"])
    root = f"s3://{s3_bucket}/runs/"
    first = _scan(tmp_path, "--root", root)
    assert first.exit_code == 0
    assert _warnings(first) == []
    s3_client.delete_objects(
        Bucket=s3_bucket, Delete={"Objects": [{"Key": "runs/r1/a"}, {"Key": "runs/r1/b"}]}
    )
    second = _scan(tmp_path, "--root", root)
    assert second.exit_code == 0
    assert _warnings(second) == [
        f"warning: {root}: no objects any more (the 2 objects the last scan listed are gone)"
    ]


def test_an_empty_local_folder_warns_that_it_is_empty(tmp_path: Path) -> None:
    empty = tmp_path / "new-root"
    empty.mkdir()
    result = _scan(tmp_path, "--root", str(empty), "--format", "json")
    assert result.exit_code == 0, result.output
    assert _warnings(result) == [f"warning: file://{empty}/: the folder is empty"]
    assert json.loads(result.stdout)["scans"][0]["objects"] == 0
    (empty / "runs").mkdir()
    result = _scan(tmp_path, "--root", str(empty))
    assert _warnings(result) == [f"warning: file://{empty}/: no files under this folder"]
    assert _scan(tmp_path, "--root", str(empty), quiet=True).stderr == ""


def test_an_invalid_bucket_name_is_bad_input_saying_what_is_wrong(
    tmp_path: Path, endpoint: str
) -> None:
    result = _scan(tmp_path, "--root", "s3://Bad_Bucket/", "--format", "json")
    assert result.exit_code == 2
    message = (
        "s3://Bad_Bucket/: 'Bad_Bucket' is not a valid bucket name: uppercase letters and "
        "underscores are not allowed in S3 bucket names "
        "(and no bucket of that name exists: NoSuchBucket)"
    )
    assert result.stderr.splitlines() == [f"error: {message}"]
    assert "does not exist" not in result.stderr
    assert json.loads(result.stdout) == {"scans": [], "errors": [message]}
    assert _roots(tmp_path) == 0


def test_a_bucket_name_no_bucket_can_have_is_refused_before_any_request(tmp_path: Path) -> None:
    result = _scan(tmp_path, "--root", "s3://ab/")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "error: storage URL 's3://ab/': 'ab' is not a valid bucket name: "
        "S3 bucket names are at least 3 characters long; this one has 2"
    ]
    assert not (tmp_path / "c.db").exists()


def test_a_legacy_bucket_name_that_exists_is_scanned(
    tmp_path: Path, endpoint: str, s3_client: Any
) -> None:
    """A bucket made in us-east-1 before March 2018 may have uppercase letters and '_'
    (moto, like S3 there, still makes one): it is read, never refused by its name."""
    name = f"Legacy_{uuid.uuid4().hex[:12]}"
    s3_client.create_bucket(Bucket=name)
    s3_client.put_object(Bucket=name, Key="runs/r1/model.pt", Body=b"x")
    result = _scan(tmp_path, "--root", f"s3://{name}/", "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["scans"][0]["objects"] == 1
    assert result.stderr == ""


def test_the_test_buckets_have_valid_names(s3_bucket: str) -> None:
    assert s3_bucket_problem(s3_bucket) is None


def test_a_prefix_that_is_there_but_sorts_past_its_neighbours_is_not_called_misspelled(
    tmp_path: Path, endpoint: str, s3_bucket: str, put_many: PutMany
) -> None:
    """The parent's page of `limit` + 2 entries ended before `data/zz/`: its own folder
    marker went unseen and the warning asked whether it was spelled right."""
    put_many(s3_bucket, [f"data/a{i}/x" for i in range(9)] + ["data/zz/"])
    result = _scan(tmp_path, "--root", f"s3://{s3_bucket}/data/zz/")
    assert result.exit_code == 0, result.output
    assert [w for w in _warnings(result) if "spelled right" in w] == []
