"""Range listings that answer precondition checks (ranges.list_run)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from governance.apply.ranges import list_run as _list_run

T = datetime(2026, 1, 1, tzinfo=UTC)


class FakeClient:
    """ListObjectsV2 over a sorted key list, pages of `page` keys; records requests."""

    def __init__(self, keys: list[str], page: int = 1000) -> None:
        self.keys = sorted(keys)
        self.page = page
        self.requests: list[dict[str, Any]] = []

    def list_objects_v2(self, **kw: Any) -> dict[str, Any]:
        self.requests.append(kw)
        after = kw.get("StartAfter", "")
        rest = [k for k in self.keys if k.startswith(kw["Prefix"]) and k > after]
        got = rest[: self.page]
        return {
            "Contents": [{"Key": k, "Size": len(k), "ETag": '"e"', "LastModified": T} for k in got],
            "IsTruncated": len(rest) > self.page,
        }


def test_dense_keys_take_one_request_per_page_and_missing_keys_are_absent() -> None:
    present = [f"p/run/part-{i:04d}.tmp" for i in range(2500)]
    client = FakeClient([*present, "p/other", "q/x"])
    wanted = [k[2:] for k in present] + ["run/part-9999.tmp", "run/gone.tmp"]
    found, left = _list_run(client, "b", "p/", sorted(wanted))
    assert set(found) == {k[2:] for k in present}
    assert found["run/part-0001.tmp"].size == len("p/run/part-0001.tmp")
    assert found["run/part-0001.tmp"].etag == "e"
    assert left == ()
    assert len(client.requests) == 3
    assert {r["Prefix"] for r in client.requests} == {"p/run/"}  # the keys' common prefix


def test_a_page_of_near_neighbours_before_a_key_hands_it_to_heads() -> None:
    # many keys between "a/k" and "a/kz" (both wanted): no endless loop
    neighbours = [f"a/k{c}{i:03d}" for c in "abc" for i in range(10)]
    client = FakeClient(["a/k", *neighbours, "a/kz"], page=5)
    found, left = _list_run(client, "b", "", ["a/k", "a/kz"])
    assert list(found) == ["a/k"]
    assert list(left) == ["a/kz"]
    assert len(client.requests) == 1
    assert client.requests[0]["Prefix"] == "a/k"


def test_a_single_key_is_listed_under_itself() -> None:
    client = FakeClient([f"a/k{c}{i:03d}" for c in "abc" for i in range(10)] + ["a/kz"], page=5)
    found, left = _list_run(client, "b", "", ["a/kz"])
    assert list(found) == ["a/kz"]
    assert left == ()
    assert client.requests == [{"Bucket": "b", "Prefix": "a/kz", "StartAfter": "a/k"}]


def test_sparse_keys_are_left_to_heads() -> None:
    keys = [f"d/{i:06d}" for i in range(5000)]
    client = FakeClient(keys, page=100)
    wanted = [keys[0], keys[1500], keys[3000], keys[4500]]
    found, left = _list_run(client, "b", "", wanted)
    assert list(found) == [keys[0]]
    assert list(left) == wanted[1:]
    assert len(client.requests) == 1
