"""The quarantine copy's own ETag: taken by apply as it makes the copy on an object store,
kept in the journal (`removed_objects.copy_etag`), and what restore checks the copy by.

`modes.remove` in quarantine mode answers each removal with the copy's ETag as its
`etag` (None on local disk, where a copy is checked by size and modification time: a
content hash would read every byte removed). A copy whose ETag the store does not tell
fails its action (nothing is deleted, the copies made are removed again).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from governance.apply import StoreOpener
from governance.apply.modes import Item, copy_etag, remove
from governance.apply.restore import _rewritten
from governance.errors import GovernanceError
from governance.storage.base import KeyResult, ObjectState

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _root(path: Path) -> str:
    return path.as_uri() + "/"


def test_a_local_quarantine_records_no_copy_etag_and_moves_the_files(tmp_path: Path) -> None:
    """On local disk the copy's ETag is an mtime token, checked as the object's time."""
    root, quarantine = tmp_path / "root", tmp_path / "q"
    blobs = {"a/one.bin": os.urandom(2048), "a/two.bin": os.urandom(2048)}
    for key, data in blobs.items():
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(data)
    quarantine.mkdir()
    items = [
        Item(i, _root(root), key, _root(quarantine), f"p/{key}", len(data))
        for i, (key, data) in enumerate(blobs.items(), 1)
    ]
    results = remove(items, "quarantine", StoreOpener(), concurrency=2)
    assert {k: (r.ok, r.etag) for k, r in results.items()} == {
        (i.action_id, i.key): (True, None) for i in items
    }
    for key, data in blobs.items():
        assert (quarantine / "p" / key).read_bytes() == data
        assert not (root / key).exists()


class _Dest:
    """A destination whose HEAD answers as given (an object store's, for `copy_etag`)."""

    url = "s3://q/"

    def __init__(self, held: ObjectState | None) -> None:
        self.held = held
        self.heads = 0

    def head(self, keys: Any) -> dict[str, ObjectState]:
        self.heads += 1
        return {} if self.held is None else {keys[0]: self.held}

    def uri(self, key: str) -> str:
        return self.url + key


def test_copy_etag_is_the_copys_answer_else_one_head() -> None:
    dest: Any = _Dest(ObjectState("k", 3, '"head"', NOW))
    assert copy_etag(dest, "k", KeyResult("k", True, etag='"copy"')) == '"copy"'
    assert dest.heads == 0
    assert copy_etag(dest, "k", KeyResult("k", True)) == '"head"'
    assert dest.heads == 1


@pytest.mark.parametrize(
    ("held", "words"),
    [(None, "no such key right after the copy"), (ObjectState("k", 3, "", NOW), "no ETag")],
)
def test_copy_etag_refuses_a_copy_it_cannot_tell(held: ObjectState | None, words: str) -> None:
    dest: Any = _Dest(held)
    with pytest.raises(GovernanceError, match=words):
        copy_etag(dest, "k", KeyResult("k", True))


def _row(copy: str | None) -> dict[str, Any]:
    return {"mode": "quarantine", "copy_etag": copy, "quarantine_key": "p/k", "size": 3}


def test_restore_compares_the_copys_etag_with_the_recorded_one() -> None:
    assert _rewritten(_row('"abc"'), ObjectState("p/k", 3, '"abc"', NOW)) is None
    damage = _rewritten(_row('"abc"'), ObjectState("p/k", 3, '"def"', NOW))
    assert damage == 'was written after apply (its ETag is "def", the copy\'s was "abc")'


def test_rows_without_a_copy_etag_are_left_to_the_size_check() -> None:
    """An earlier release's row, a local one, or an object an interrupted apply removed."""
    assert _rewritten(_row(None), ObjectState("p/k", 3, '"def"', NOW)) is None
