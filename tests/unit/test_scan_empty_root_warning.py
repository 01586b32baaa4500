"""What a scan says of a root that listed no object (`scan.service.empty_root_warning`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from governance.scan.runner import ScanSummary
from governance.scan.service import empty_root_warning
from governance.storage import open_store
from governance.storage.base import Store


def _summary(url: str, gone: int = 0) -> ScanSummary:
    return ScanSummary(url, 1, 2, "complete", 0, 0, 0, 0, gone, 0.1)


@dataclass
class _S3Like:
    """Only what the warning reads of an S3Store: its URL and `nearest_entries`."""

    url: str
    found: tuple[str, list[str], bool] | None
    asked: list[int] = field(default_factory=list)

    def nearest_entries(self, limit: int = 5) -> tuple[str, list[str], bool] | None:
        self.asked.append(limit)
        return self.found


def _warn(store: Any, gone: int = 0) -> str:
    return empty_root_warning(cast(Store, store), _summary(store.url, gone))


def test_an_empty_local_folder_says_it_is_empty(tmp_path: Path) -> None:
    store = open_store(str(tmp_path))
    assert _warn(store) == f"file://{tmp_path}/: the folder is empty"


def test_a_local_folder_of_empty_folders_says_it_holds_no_files(tmp_path: Path) -> None:
    (tmp_path / "runs" / "r1").mkdir(parents=True)
    store = open_store(str(tmp_path))
    assert _warn(store) == f"file://{tmp_path}/: no files under this folder"


def test_a_root_whose_objects_went_says_so_and_asks_nothing() -> None:
    store = _S3Like("s3://b-1/runs/", ("s3://b-1/", ["x/"], False))
    assert _warn(store, gone=3) == (
        "s3://b-1/runs/: no objects any more (the 3 objects the last scan listed are gone)"
    )
    assert store.asked == []


def test_an_s3_prefix_names_what_the_bucket_holds() -> None:
    store = _S3Like("s3://ml-artifacts/nope/", ("s3://ml-artifacts/", ["datasets/", "runs/"], True))
    assert _warn(store) == (
        "s3://ml-artifacts/nope/: no objects under this prefix "
        "(is it spelled right? the bucket holds: datasets/, runs/, …)"
    )
    assert store.asked == [5]


def test_a_nested_s3_prefix_names_the_folder_it_lists() -> None:
    store = _S3Like("s3://ml-artifacts/runs/nope/", ("s3://ml-artifacts/runs/", ["r1/"], False))
    assert _warn(store) == (
        "s3://ml-artifacts/runs/nope/: no objects under this prefix "
        "(is it spelled right? s3://ml-artifacts/runs/ holds: r1/)"
    )


def test_an_s3_prefix_in_an_empty_bucket_or_without_a_hint() -> None:
    empty = _S3Like("s3://b-1/x/", ("s3://b-1/", [], False))
    assert _warn(empty) == "s3://b-1/x/: no objects under this prefix (the bucket is empty)"
    unknown = _S3Like("s3://b-1/x/", None)
    assert _warn(unknown) == "s3://b-1/x/: no objects under this prefix"


def test_an_s3_bucket_root_asks_nothing() -> None:
    store = _S3Like("s3://b-1/", ("s3://b-1/", ["x/"], False))
    assert _warn(store) == "s3://b-1/: no objects to scan in this bucket"
    assert store.asked == []


def test_another_store_says_it_plainly() -> None:
    assert _warn(open_store("memory://govern-empty-root-test/")) == (
        "memory://govern-empty-root-test/: no objects under this root"
    )
