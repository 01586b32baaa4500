"""The fast timestamp parser agrees with botocore's on every form S3 sends."""

from __future__ import annotations

from datetime import UTC, datetime

import botocore.utils
import pytest
from hypothesis import given
from hypothesis import strategies as st

from governance.storage.s3 import parse_timestamp


@pytest.mark.parametrize(
    "value",
    [
        "2026-11-30T18:07:10.000Z",  # ListObjectsV2 LastModified
        "2026-11-30T18:07:10Z",
        "2026-11-30T18:07:10.123456+00:00",
        "2026-11-30T20:07:10.5+02:00",
        "Mon, 30 Nov 2026 18:07:10 GMT",  # HeadObject's Last-Modified header
        1796061230,  # epoch seconds
        "1796061230.25",
    ],
)
def test_agrees_with_botocore(value: str | int) -> None:
    ours = parse_timestamp(value)
    theirs = botocore.utils.parse_timestamp(value)  # type: ignore[arg-type]  # also epochs
    assert ours == theirs
    assert ours.tzinfo is not None
    assert ours.utcoffset() == theirs.utcoffset()


@given(st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2999, 12, 31)))
def test_listing_form_round_trips_to_the_millisecond(moment: datetime) -> None:
    moment = moment.replace(microsecond=moment.microsecond // 1000 * 1000, tzinfo=UTC)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    assert parse_timestamp(text) == moment == botocore.utils.parse_timestamp(text)


def test_the_store_client_parses_listings_with_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto import mock_aws

    from governance.storage.s3 import S3Store

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    with mock_aws():
        store = S3Store("s3://bucket/", region="us-east-1")
        store._client.create_bucket(Bucket="bucket")
        store._client.put_object(Bucket="bucket", Key="k", Body=b"x")
        listed = store._client.list_objects_v2(Bucket="bucket")["Contents"][0]["LastModified"]
    # botocore's own parser gives dateutil's tzutc(); fromisoformat gives datetime's UTC.
    assert listed.tzinfo is UTC
