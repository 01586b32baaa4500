"""How an S3 listing splits its key space, over HTTP against moto's server.

A listing starts flat and splits the rest of the key space into ranges only once it has
gone `split_after_pages` pages; small page sizes make that happen on small buckets here.
Whatever the pages, bounds and excludes, every key must come exactly once: a missed key
could make a checkpoint look incomplete to the planner.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governance.errors import NoSuchRootError
from governance.scan.listing import start_listing
from governance.storage.s3 import S3Store

pytestmark = pytest.mark.s3


def listing_requests(store: S3Store) -> list[dict[str, Any]]:
    """Record the parameters of every ListObjectsV2 request `store` sends."""
    seen: list[dict[str, Any]] = []
    store._client.meta.events.register(
        "before-parameter-build.s3.ListObjectsV2",
        lambda params, **_: seen.append(dict(params)),
    )
    return seen


def listed_keys(store: S3Store, excludes: list[str] | None = None) -> list[str]:
    return [o.key for o in store.list(excludes or [])]


def test_a_small_listing_is_one_flat_pass(moto_server: str, s3_bucket: str, put_many: Any) -> None:
    keys = [f"runs/r{i:03d}/ckpt/model.bin" for i in range(120)] + ["top.txt"]
    put_many(s3_bucket, keys)
    store = S3Store(f"s3://{s3_bucket}", endpoint_url=moto_server, concurrency=4)
    requests = listing_requests(store)
    assert sorted(listed_keys(store)) == sorted(keys)
    assert len(requests) == 1  # no split-point discovery below split_after_pages
    assert "Delimiter" not in requests[0]


def test_a_long_listing_splits_into_ranges(moto_server: str, s3_bucket: str, put_many: Any) -> None:
    keys = [
        f"run-{r}/step-{s}/shard-{i:03d}" for r in range(6) for s in range(4) for i in range(25)
    ]
    put_many(s3_bucket, keys)
    store = S3Store(
        f"s3://{s3_bucket}",
        endpoint_url=moto_server,
        concurrency=4,
        list_page_size=40,
        split_after_pages=2,
    )
    requests = listing_requests(store)
    listed = listed_keys(store)
    assert Counter(listed) == Counter(keys)  # every key once, none twice
    ranges = {r["StartAfter"] for r in requests if "StartAfter" in r and "Delimiter" not in r}
    assert len(ranges) >= 4  # the rest of the key space went to range workers
    assert any("Delimiter" in r for r in requests)  # split points were looked up
    flat_pages = sum(1 for r in requests if "Delimiter" not in r)
    assert flat_pages <= len(keys) // 40 + 1 + len(ranges)  # at most one page past each end


def test_keys_equal_to_a_bound_and_past_it_are_listed_once(
    moto_server: str, s3_bucket: str, put_many: Any
) -> None:
    # After "a/x" the split finds the common prefix "b/", which is also a folder marker
    # key: the first worker's range (start, "b/"] ends with it, the next begins after it.
    keys = ["a/", "a/x", "b/", "b/y", "b/z/", "b/z/w", "c", "q/1", "q/2", "z/a", "z/b/"]
    put_many(s3_bucket, keys)
    store = S3Store(
        f"s3://{s3_bucket}",
        endpoint_url=moto_server,
        concurrency=3,
        list_page_size=2,
        split_after_pages=1,
    )
    requests = listing_requests(store)
    assert Counter(listed_keys(store)) == Counter(keys)
    assert {"b/"} <= {r.get("StartAfter") for r in requests if "Delimiter" not in r}


def test_an_excluded_prefix_is_jumped_not_paged_through(
    moto_server: str, s3_bucket: str, put_many: Any
) -> None:
    put_many(s3_bucket, [f"a-{i}" for i in range(5)])
    put_many(s3_bucket, [f"quarantine/{i:04d}" for i in range(400)])
    put_many(s3_bucket, [f"z-{i}" for i in range(5)])
    store = S3Store(f"s3://{s3_bucket}", endpoint_url=moto_server, concurrency=1, list_page_size=10)
    requests = listing_requests(store)
    assert sorted(listed_keys(store, ["quarantine/"])) == sorted(
        [f"a-{i}" for i in range(5)] + [f"z-{i}" for i in range(5)]
    )
    assert len(requests) <= 3  # not the 41 pages of the excluded prefix
    assert requests[-1]["StartAfter"] == "quarantine/\U0010ffff"


def test_a_server_that_ignores_start_after_still_lists_each_key_once(
    moto_server: str, s3_bucket: str, put_many: Any
) -> None:
    keys = [f"run-{r}/step-{s}/x" for r in range(8) for s in range(5)]
    keys += [f"q/{i}" for i in range(30)]
    put_many(s3_bucket, keys)
    store = S3Store(
        f"s3://{s3_bucket}",
        endpoint_url=moto_server,
        concurrency=3,
        list_page_size=4,
        split_after_pages=2,
    )
    dropped: list[str] = []

    def drop_start_after(params: dict[str, Any], **_: Any) -> None:
        if "StartAfter" in params:
            dropped.append(params.pop("StartAfter"))

    store._client.meta.events.register("before-parameter-build.s3.ListObjectsV2", drop_start_after)
    listed = listed_keys(store, ["q/"])
    assert dropped  # ranges and the jump past q/ asked for StartAfter, and did not get it
    assert Counter(listed) == Counter(k for k in keys if not k.startswith("q/"))


def test_the_first_answer_is_the_check(moto_server: str, s3_bucket: str, put_many: Any) -> None:
    put_many(s3_bucket, ["a", "b"])
    store = S3Store(f"s3://{s3_bucket}", endpoint_url=moto_server)
    requests = listing_requests(store)
    started = start_listing(store)
    try:
        assert sorted(row[0] for row in started.rows) == ["a", "b"]
    finally:
        started.close()
    assert len(requests) == 1  # no separate 1-key check request


def test_a_missing_bucket_fails_the_checked_listing(moto_server: str) -> None:
    store = S3Store(f"s3://missing-{uuid.uuid4().hex[:12]}", endpoint_url=moto_server)
    with pytest.raises(NoSuchRootError, match="missing-"):
        start_listing(store)


KEY_PARTS = st.sampled_from(["a", "b", "b-1", "ck", "q", "z", "ü", "日"])
KEY = st.builds(
    lambda parts, marker: "/".join(parts) + ("/" if marker else ""),  # folder markers
    st.lists(KEY_PARTS, min_size=1, max_size=4),  # equal the common prefixes used as bounds
    st.booleans(),
)
KEYS = st.lists(KEY, min_size=0, max_size=80)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    keys=KEYS,
    page_size=st.integers(1, 7),
    split_after=st.integers(1, 3),
    concurrency=st.integers(1, 5),
    excludes=st.lists(st.sampled_from(["q/", "b/", "a/b", "z"]), max_size=2),
    prefix=st.sampled_from(["", "a/", "b"]),
)
def test_every_key_is_listed_exactly_once(
    moto_server: str,
    s3_client: Any,
    put_many: Any,
    keys: list[str],
    page_size: int,
    split_after: int,
    concurrency: int,
    excludes: list[str],
    prefix: str,
) -> None:
    bucket = f"prop-{uuid.uuid4().hex[:20]}"
    s3_client.create_bucket(Bucket=bucket)
    put_many(bucket, set(keys))
    store = S3Store(
        f"s3://{bucket}/{prefix}",
        endpoint_url=moto_server,
        concurrency=concurrency,
        list_page_size=page_size,
        split_after_pages=split_after,
    )
    expected = Counter(
        k[len(prefix) :]
        for k in set(keys)
        if k.startswith(prefix) and k != prefix and not k[len(prefix) :].startswith(tuple(excludes))
    )
    assert Counter(listed_keys(store, excludes)) == expected


def test_a_versioned_bucket_lists_each_current_version_once_with_its_id(
    moto_server: str, s3_client: Any, s3_bucket: str, put_many: Any
) -> None:
    """On a bucket with versioning the listing reads versions (ListObjectVersions): each
    key's current version, with its version id (a plan's precondition), once, page after
    page (one flat pass: no range split or jump, which would need a marker that is not a
    key); keys whose current version is a delete marker are gone, excluded ones too."""
    s3_client.put_bucket_versioning(Bucket=s3_bucket, VersioningConfiguration={"Status": "Enabled"})
    keys = [
        f"run-{r}/step-{s}/shard-{i:02d}" for r in range(4) for s in range(3) for i in range(12)
    ]
    put_many(s3_bucket, keys, b"v1")
    rewritten = keys[::5]  # a second version of some: still one key each
    put_many(s3_bucket, rewritten, b"v2")
    deleted = keys[3::7]  # a delete marker on top: not live
    for key in deleted:
        s3_client.delete_object(Bucket=s3_bucket, Key=key)
    store = S3Store(
        f"s3://{s3_bucket}",
        endpoint_url=moto_server,
        concurrency=4,
        list_page_size=25,
        split_after_pages=2,
    )
    requests = []
    store._client.meta.events.register(
        "before-parameter-build.s3.ListObjectVersions",
        lambda params, **_: requests.append(dict(params)),
    )
    plain = listing_requests(store)  # ListObjectsV2: the split-point look-ups
    listed = list(store.list(["run-3/step-2/"]))
    assert len(requests) > 2  # (a probe, then several pages)
    assert plain == []  # no split
    live = [k for k in keys if k not in set(deleted) and not k.startswith("run-3/step-2/")]
    assert Counter(o.key for o in listed) == Counter(live)  # each once, deleted ones gone
    current = {k: s3_client.head_object(Bucket=s3_bucket, Key=k)["VersionId"] for k in live[::9]}
    by_key = {o.key: o for o in listed}
    assert {k: by_key[k].version_id for k in current} == current
    assert all(o.version_id for o in listed)
    rows = {row[0]: row[6] for row in store.list_rows()}  # the scanner's staging rows
    assert {k: rows[k] for k in current} == current
