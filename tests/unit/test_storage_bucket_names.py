"""S3 bucket names: what is wrong with one is said in words, where URLs are checked (only
what no bucket can have) and where an endpoint answers that there is no such bucket (the
rules for new buckets: a legacy name of a bucket that exists is never refused)."""

from __future__ import annotations

from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from governance.errors import EXIT_BAD_INPUT, ArgumentError, NoSuchRootError, PolicyError
from governance.policy import load_policy
from governance.storage import normalize_url, s3_bucket_problem
from governance.storage.errors import BadBucketNameError, translate


def _client_error(code: str, message: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, "ListObjectsV2")


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("Bad_Bucket", "uppercase letters and underscores are not allowed in S3 bucket names"),
        ("bad_bucket", "underscores are not allowed in S3 bucket names"),
        ("BadBucket", "uppercase letters are not allowed in S3 bucket names"),
        ("ab", "S3 bucket names are 3 to 63 characters long; this one has 2"),
        ("a" * 64, "S3 bucket names are 3 to 63 characters long; this one has 64"),
        ("-bucket", "must begin and end with a letter or digit"),
        ("bucket.", "must begin and end with a letter or digit"),
        ("my..bucket", "must not have two periods in a row"),
        ("192.168.5.4", "must not be formatted as an IP address"),
        ("my bucket", "' ' is not allowed in S3 bucket names"),
        ("caf\u00e9-data", "'\u00e9' is not allowed in S3 bucket names"),
    ],
)
def test_a_name_against_the_rules_for_new_buckets_says_what_is_wrong(name: str, why: str) -> None:
    problem = s3_bucket_problem(name)
    assert problem is not None
    assert why in problem


@pytest.mark.parametrize(
    "name", ["ml-artifacts", "test-0123456789abcdef0123", "a.b-c", "123", "x" * 63, "9lives"]
)
def test_valid_names_have_no_problem(name: str) -> None:
    assert s3_bucket_problem(name) is None
    assert s3_bucket_problem(name, legacy=True) is None


@pytest.mark.parametrize("name", ["Bad_Bucket", "Legacy_Bucket", "x" * 200, "-x-", "a..b"])
def test_legacy_names_are_not_a_problem_where_urls_are_checked(name: str) -> None:
    """Buckets made in us-east-1 before March 2018 (and some S3-compatible stores) have
    uppercase letters, '_' and up to 255 characters, and are still read today."""
    assert s3_bucket_problem(name, legacy=True) is None
    assert normalize_url(f"s3://{name}/runs") == f"s3://{name}/runs/"


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("s3://ab/", "'ab' is not a valid bucket name: S3 bucket names are at least 3"),
        ("s3://my bucket/", "'my bucket' is not a valid bucket name: ' ' is not allowed"),
        ("s3://a!b#c/", "'!' and '#' are not allowed in S3 bucket names"),
        ("s3://" + "x" * 256 + "/", "at most 63 characters long (255 for buckets made in"),
    ],
)
def test_a_url_whose_bucket_no_bucket_can_have_is_refused_saying_why(url: str, why: str) -> None:
    with pytest.raises(ArgumentError) as info:
        normalize_url(url)
    assert why in str(info.value)
    assert str(info.value).startswith(f"storage URL {url!r}: ")
    assert info.value.exit_code == EXIT_BAD_INPUT


def test_no_such_bucket_for_an_invalid_name_says_the_name_is_not_valid() -> None:
    error = translate("s3://Bad_Bucket/", _client_error("NoSuchBucket", "does not exist"))
    assert isinstance(error, BadBucketNameError)
    assert isinstance(error, NoSuchRootError)
    assert error.exit_code == EXIT_BAD_INPUT
    assert str(error) == (
        "s3://Bad_Bucket/: 'Bad_Bucket' is not a valid bucket name: uppercase letters and "
        "underscores are not allowed in S3 bucket names "
        "(and no bucket of that name exists: NoSuchBucket)"
    )


def test_no_such_bucket_for_a_valid_name_still_says_it_does_not_exist() -> None:
    error = translate("s3://no-such-bucket/x/", _client_error("NoSuchBucket", "nope"))
    assert not isinstance(error, BadBucketNameError)
    assert isinstance(error, NoSuchRootError)
    assert "does not exist (NoSuchBucket: nope)" in str(error)


def test_an_endpoint_refusing_the_name_is_bad_input_even_for_a_valid_name() -> None:
    """An S3-compatible store may have stricter rules: exit 2, not "operation failed"."""
    refused = _client_error("InvalidBucketName", "The specified bucket is not valid.")
    error = translate("s3://fine-name/", refused)
    assert isinstance(error, BadBucketNameError)
    assert error.exit_code == EXIT_BAD_INPUT
    assert "the endpoint refuses the bucket name 'fine-name'" in str(error)
    error = translate("s3://Bad_Bucket/", refused)
    assert "'Bad_Bucket' is not a valid bucket name: uppercase letters" in str(error)
    assert "the endpoint says InvalidBucketName" in str(error)


def test_a_missing_key_is_not_blamed_on_a_legacy_bucket_name() -> None:
    """Only answers about the bucket itself are read as a bad name: a 404 of a key of a
    legacy-named bucket that exists is not."""
    error = translate("s3://Legacy_Bucket/", _client_error("404", "Not Found"))
    assert not isinstance(error, BadBucketNameError)


def test_a_policy_root_no_bucket_can_have_is_a_policy_error_saying_why(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("version: 1\nstorage:\n  - {name: a, url: 's3://my bucket/'}\nrules: []\n")
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    (problem,) = info.value.problems
    assert problem.endswith(
        "storage[0].url: storage URL 's3://my bucket/': 'my bucket' is not a valid bucket "
        "name: ' ' is not allowed in S3 bucket names (lowercase letters, digits, '.' and '-' "
        "only)"
    )


def test_a_policy_root_with_a_legacy_bucket_name_loads(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("version: 1\nstorage:\n  - {name: a, url: 's3://Legacy_Bucket/'}\nrules: []\n")
    assert load_policy(path).storage[0].url == "s3://Legacy_Bucket/"
