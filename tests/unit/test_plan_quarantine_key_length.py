"""A plan says which objects cannot be quarantined because the copy's key would pass
S3's 1,024 bytes (apply then fails their actions and leaves them): the plan said
nothing, and the failures came only at apply."""

from __future__ import annotations

import pytest

from governance.model.types import Kind
from tests.unit.plan_factories import ROOT, group, make_plan, policy, single

RESIDUE = """
rules:
  - {name: residue, select: {kind: residue}, expire: {after: 2d}}
safety: {max_delete_fraction: 1}
"""
PLAN_ID = "p-test"  # (make_plan's)


def copy_key(key: str, folder: str = ".govern-quarantine/") -> str:
    """The quarantine copy's key, as apply names it: its folder, the plan, the object's
    whole path (bucket and root prefix included)."""
    return f"{folder}{PLAN_ID}/{ROOT.split('://')[1]}{key}"


def long_key(total: int, tail: str = "x") -> str:
    """A residue key whose quarantine copy's key is `total` bytes (tail: its last char)."""
    head = "tmp/"
    room = total - len(copy_key(head).encode()) - len(tail.encode())
    return head + "a" * room + tail


def notes_for(key: str, extra: str = "") -> list[str]:
    plan = make_plan(
        [group(None, [single(key, Kind.RESIDUE, age_days=30)])], policy(RESIDUE + extra)
    )
    assert [a.artifact.uri for a in plan.actions] == [ROOT + key]
    return [n for n in plan.notes if "cannot be quarantined" in n]


def test_a_key_whose_copy_passes_1024_bytes_is_named_and_one_that_fits_is_not() -> None:
    fits, over = long_key(1024), long_key(1025)
    assert len(copy_key(fits).encode()) == 1024
    assert notes_for(fits) == []
    [note] = notes_for(over)
    assert note.startswith(f"root {ROOT}: 1 object (first {over}) with a key over ")
    assert "S3 keys are at most 1,024; apply fails their actions and leaves them" in note


def test_bytes_not_characters_are_counted() -> None:
    """`é` is two bytes in UTF-8: a key that fits by characters may not by bytes."""
    over = long_key(1025, tail="é")
    assert len(copy_key(over)) == 1024  # characters
    assert len(notes_for(over)) == 1


@pytest.mark.parametrize(
    ("extra", "noted"),
    [
        ("apply: {delete_mode: versioned}\n", False),  # no copy is made
        ("apply: {quarantine_url: 's3://q-bucket/'}\n", False),  # a shorter folder: fits
        ("apply: {quarantine_url: 's3://q-bucket/a/longer/quarantine/folder/'}\n", True),
    ],
)
def test_where_the_copy_goes_decides(extra: str, noted: bool) -> None:
    key = long_key(1024)  # fits under .govern-quarantine/ (19 bytes), not under 32
    assert notes_for(key) == []
    assert bool(notes_for(key, extra)) is noted
