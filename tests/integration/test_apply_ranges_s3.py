"""Range listings that answer precondition checks (`ranges.list_run`), against moto's
server over HTTP: which requests a check makes (Prefix, StartAfter), what each answers,
and, for folders a delete removes whole, that the listings see the whole folder. Small
pages (MaxKeys, set on the client's requests) stand in for S3's 1,000-key pages."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from governance.apply.ranges import Listed, list_run, list_states
from governance.storage.s3 import S3Store
from tests.integration.conftest import PutMany

pytestmark = pytest.mark.s3

PLANNED = ["ck-7/config.json", "ck-7/model.bin", "ck-7/optimizer.pt", "ck-7/scheduler.pt"]


class Lister:
    """A boto3 client on the moto server whose ListObjectsV2 pages hold `page` keys, with
    the parameters of each request it sends recorded."""

    def __init__(self, endpoint: str, page: int = 1000) -> None:
        self.client: Any = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        self.requests: list[dict[str, Any]] = []

        def params(params: dict[str, Any], **_: Any) -> None:
            self.requests.append(dict(params))
            params["MaxKeys"] = page

        self.client.meta.events.register("provide-client-params.s3.ListObjectsV2", params)


def test_dense_keys_take_one_request_per_page_and_missing_keys_are_absent(
    moto_server: str, s3_bucket: str, put_many: PutMany
) -> None:
    present = [f"p/run/part-{i:04d}.tmp" for i in range(2500)]
    put_many(s3_bucket, [*present, "p/other", "q/x"])
    lister = Lister(moto_server)
    wanted = [k[2:] for k in present] + ["run/part-9999.tmp", "run/gone.tmp"]
    found, left = list_run(lister.client, s3_bucket, "p/", sorted(wanted))
    assert set(found) == {k[2:] for k in present}
    assert found["run/part-0001.tmp"].size == 1
    assert found["run/part-0001.tmp"].etag  # S3's, unquoted
    assert '"' not in found["run/part-0001.tmp"].etag
    assert left == ()
    assert len(lister.requests) == 3  # 2,500 keys: three pages of 1,000
    assert {r["Prefix"] for r in lister.requests} == {"p/run/"}  # the keys' common prefix


def test_a_page_of_near_neighbours_before_a_key_hands_it_to_heads(
    moto_server: str, s3_bucket: str, put_many: PutMany
) -> None:
    # many keys between "a/k" and "a/kz" (both wanted): no endless loop
    neighbours = [f"a/k{c}{i:03d}" for c in "abc" for i in range(10)]
    put_many(s3_bucket, ["a/k", *neighbours, "a/kz"])
    lister = Lister(moto_server, page=5)
    found, left = list_run(lister.client, s3_bucket, "", ["a/k", "a/kz"])
    assert list(found) == ["a/k"]
    assert list(left) == ["a/kz"]
    assert len(lister.requests) == 1
    assert lister.requests[0]["Prefix"] == "a/k"


def test_a_single_key_is_listed_under_itself(
    moto_server: str, s3_bucket: str, put_many: PutMany
) -> None:
    put_many(s3_bucket, [f"a/k{c}{i:03d}" for c in "abc" for i in range(10)] + ["a/kz"])
    lister = Lister(moto_server, page=5)
    found, left = list_run(lister.client, s3_bucket, "", ["a/kz"])
    assert list(found) == ["a/kz"]
    assert left == ()
    assert lister.requests == [{"Bucket": s3_bucket, "Prefix": "a/kz", "StartAfter": "a/k"}]


def test_sparse_keys_are_left_to_heads(moto_server: str, s3_bucket: str, put_many: PutMany) -> None:
    keys = [f"d/{i:06d}" for i in range(5000)]
    put_many(s3_bucket, keys)
    lister = Lister(moto_server, page=100)
    wanted = [keys[0], keys[1500], keys[3000], keys[4500]]
    found, left = list_run(lister.client, s3_bucket, "", wanted)
    assert list(found) == [keys[0]]
    assert list(left) == wanted[1:]
    assert len(lister.requests) == 1


def test_a_range_listing_sees_the_whole_folder_of_a_delete_in_the_same_requests(
    moto_server: str, s3_bucket: str, put_many: PutMany
) -> None:
    """`NOTES.md` sorts before the first planned key and `zz.txt` after the last: a
    listing that starts just before the first wanted key would miss the one, and one
    that stops at the last the other."""
    added = ["p/ck-7/NOTES.md", "p/ck-7/zz.txt"]
    others = [f"p/run-{i}/model.bin" for i in range(4)]
    put_many(s3_bucket, ["p/ck-7", *added, *(f"p/{k}" for k in PLANNED), *others])
    wanted = sorted(PLANNED + [k[2:] for k in others])
    plain, _ = list_run(Lister(moto_server).client, s3_bucket, "p/", wanted)
    lister = Lister(moto_server)
    listed = Listed(frozenset({"ck-7/"}))
    found, left = list_run(lister.client, s3_bucket, "p/", wanted, listed)
    assert found.keys() == plain.keys() == set(wanted)
    assert left == ()
    assert len(lister.requests) == 1  # no request more than without the folder
    assert lister.requests[0]["StartAfter"] == "p/ck-7"  # before everything in the folder
    assert listed.covers("ck-7/")
    assert listed.keys_under("ck-7/") == sorted([k[2:] for k in added] + PLANNED)


def test_pages_inside_the_folder_follow_each_other_without_a_jump(
    moto_server: str, s3_bucket: str, put_many: PutMany
) -> None:
    """After a page that ends before the next wanted key, a listing jumps to just before
    that key (`d/b` for `d/b1`), past `d/a5`: inside a folder a delete removes whole, it
    goes on from the page's last key instead."""
    keys = ["d/a0", "d/a1", "d/a2", "d/a3", "d/a4", "d/a5", "d/b1"]
    put_many(s3_bucket, keys)
    wanted = [*keys[:4], "d/b1"]
    jumping = Lister(moto_server, page=5)
    list_run(jumping.client, s3_bucket, "", wanted)
    assert [r["StartAfter"] for r in jumping.requests] == ["d/a", "d/b"]  # d/a5 unseen

    lister = Lister(moto_server, page=5)
    listed = Listed(frozenset({"d/"}))
    found, _ = list_run(lister.client, s3_bucket, "", wanted, listed)
    assert set(found) == set(wanted)
    assert [r["StartAfter"] for r in lister.requests] == ["d", "d/a4"]
    assert listed.covers("d/")
    assert listed.keys_under("d/") == keys


def test_a_big_folder_deleted_whole_is_listed_by_one_run_without_heads(
    moto_server: str, s3_bucket: str, put_many: PutMany
) -> None:
    """A sharded step of 3,000 files that a delete removes whole: parallel runs split the
    keys by count, and one that started inside the folder listed it from its start (the
    run before's keys), found few of its own and asked 2,000 HEADs. No run starts inside
    such a folder now: the folder is listed page after page, and seen whole."""
    big = [f"step-1/shard-{i:04d}" for i in range(3000)]
    other = [f"step-2/shard-{i:04d}" for i in range(1500)]
    put_many(s3_bucket, [*big, *other])
    store = S3Store(f"s3://{s3_bucket}/", endpoint_url=moto_server)
    sent: list[str] = []
    store._client.meta.events.register(
        "before-call.s3.*", lambda model, **_: sent.append(model.name)
    )
    found, listed = list_states(store, sorted(big + other), 4, {"step-1/"})
    assert len(found) == 4500
    assert "HeadObject" not in sent
    assert listed.covers("step-1/")
    assert 5 <= sent.count("ListObjectsV2") <= 6  # 4,500 keys: five pages, one more at most
