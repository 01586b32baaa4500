"""`modes.remove` asks its fence before any delete it sends, and deletes nothing when the
fence says this apply may act no more (its lock was taken over: `journal.check_lock`).

A failed action's quarantine copies are removed again as strays; after a takeover the
other apply may have copied onto those very keys, of sources it then deleted, so the
clean-up is fenced too. Local disk, real stores.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from governance.apply.modes import Item, remove
from governance.errors import RefusedError
from governance.storage import normalize_url, open_store


class Fenced(RefusedError):
    pass


def _items(tmp_path: Path) -> tuple[str, str, list[Item]]:
    root = tmp_path / "root"
    (root / "ck").mkdir(parents=True)
    (root / "ck" / "a.bin").write_bytes(b"a")  # its companion b.bin is gone: copy fails
    root_url, quarantine = normalize_url(str(root)), normalize_url(str(tmp_path / "q"))
    items = [Item(1, root_url, f"ck/{n}", quarantine, f"p/ck/{n}", 1) for n in ("a.bin", "b.bin")]
    return root_url, quarantine, items


def test_a_fence_that_refuses_stops_the_stray_clean_up_and_every_delete(tmp_path: Path) -> None:
    _, _, items = _items(tmp_path)
    asked: list[str] = []

    def fence() -> None:
        asked.append("fence")
        raise Fenced("lost its lock")

    with pytest.raises(Fenced):
        remove(items, "quarantine", lambda url: open_store(url), 2, fence)
    assert asked == ["fence"]
    assert (tmp_path / "q" / "p" / "ck" / "a.bin").read_bytes() == b"a"  # the stray stays
    assert (tmp_path / "root" / "ck" / "a.bin").read_bytes() == b"a"


def test_a_fence_that_allows_lets_the_removal_go_as_before(tmp_path: Path) -> None:
    _, _, items = _items(tmp_path)
    calls: list[int] = []
    results = remove(items, "quarantine", lambda url: open_store(url), 2, lambda: calls.append(1))
    assert calls == [1, 1]  # before the stray clean-up, before the (empty) source delete
    assert not any(r.ok for r in results.values())  # the action failed whole
    assert not (tmp_path / "q" / "p" / "ck" / "a.bin").exists()  # its stray removed
    assert (tmp_path / "root" / "ck" / "a.bin").read_bytes() == b"a"  # the source stays
