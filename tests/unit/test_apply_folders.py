"""A delete of a whole folder artifact is stale when the folder holds an object added since
the plan (`governance.apply.folders`), seen from the range listings the check makes anyway
(`ranges.Listed`) or from one listing of the folder; a failed read fails the action."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from governance.apply import StoreOpener
from governance.apply.actions import outcome_for_check
from governance.apply.preconditions import Check, check_actions
from governance.apply.ranges import Listed, split_runs
from governance.apply.types import Outcome
from governance.errors import AccessDeniedError
from governance.plan.types import ActionType, ArtifactRef, ObjectRef, PlannedAction

T = datetime(2026, 1, 1, tzinfo=UTC)
PLANNED = ["ck-7/config.json", "ck-7/model.bin", "ck-7/optimizer.pt", "ck-7/scheduler.pt"]
# (what the range listings of a check see: tests/integration/test_apply_ranges_s3.py)


@pytest.mark.parametrize(
    ("spans", "covered"),
    [
        ([("", "a", None)], True),  # one listing to the end
        ([("", "a/", None)], False),  # started at the folder: the key `a/` itself unseen
        ([("", "a", "a/m"), ("", "a/m", "b")], True),  # pages one after the other
        ([("", "a", "a/m"), ("", "a/n", "b")], False),  # a jump inside the folder
        ([("", "a", "a/z")], False),  # stopped inside it: later keys unseen
        ([("a/c", "", None)], False),  # listed under a longer prefix than the folder
        ([("a/", "", None)], True),  # the folder's own listing
        # two listings from the same start, one to the end (`last` None): no TypeError
        ([("", "a", "a/m"), ("", "a", None)], True),
        ([("", "a", None), ("", "a", "a/m")], True),
    ],
)
def test_covers_needs_spans_that_hold_every_key_of_the_folder(
    spans: list[tuple[str, str, str | None]], covered: bool
) -> None:
    listed = Listed(frozenset({"a/"}), spans=spans)
    assert listed.covers("a/") is covered


def _action(
    aid: int, root: str, folder: str, keys: list[str], tmp: Path, kind: ActionType
) -> PlannedAction:
    objects = [ObjectRef(folder + k, (tmp / folder / k).stat().st_size, T, "") for k in keys]
    artifact = ArtifactRef(root + folder, "checkpoint", "r", 7, root)
    return PlannedAction(aid, "rule", None, kind, True, artifact, objects, "test")


def _tree(tmp_path: Path) -> str:
    for name in ("ck-7/model.bin", "ck-7/optimizer.pt", "ck-7/NOTES.md", "ck-8/model.bin",
                 "ck-8/optimizer.pt", "ck-8/NOTES.md", "logs/v0/events", "logs/v0/ck/x.ckpt"):  # fmt: skip
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * 10)
    return tmp_path.as_uri() + "/"


def test_new_files_stale_a_whole_folder_delete_only(tmp_path: Path) -> None:
    """On a filesystem (one walk of the folder): the delete of ck-7 is stale, the strip of
    ck-8 is not (a file beside what it strips changes nothing it does), and the log folder
    whose other files the catalog held at the plan's scan (another artifact's) is not."""
    root = _tree(tmp_path)
    actions = [
        _action(1, root, "ck-7/", ["model.bin", "optimizer.pt"], tmp_path, ActionType.DELETE),
        _action(2, root, "ck-8/", ["optimizer.pt"], tmp_path, ActionType.STRIP),
        _action(3, root, "logs/v0/", ["events"], tmp_path, ActionType.DELETE),
    ]
    asked: list[tuple[str, str]] = []

    def known(keys: object) -> set[tuple[str, str]]:
        asked.extend(keys)  # type: ignore[call-overload]
        return {(root, "logs/v0/ck/x.ckpt")}

    checks = check_actions(actions, StoreOpener(), now=T, pending={}, known=known)
    assert checks[0].skip == (
        "stale: unplanned object ck-7/NOTES.md in the artifact (written, restored or listed anew) since the plan was made"
    )
    assert (checks[0].final, checks[0].failed, checks[0].todo) == (False, False, [])
    assert (checks[1].skip, len(checks[1].todo)) == (None, 1)
    assert (checks[2].skip, len(checks[2].todo)) == (None, 1)
    assert sorted(asked) == [(root, "ck-7/NOTES.md"), (root, "logs/v0/ck/x.ckpt")]

    unknown = check_actions(actions[2:], StoreOpener(), now=T, pending={})
    assert unknown[0].skip is not None
    assert "unplanned object logs/v0/ck/x.ckpt" in unknown[0].skip


class Unlistable:
    """A folder whose listing is refused."""

    def __init__(self, url: str) -> None:
        self.url = url

    def list(self) -> Iterator[object]:
        raise AccessDeniedError(self.url, "listing denied")


def test_a_folder_that_cannot_be_listed_fails_its_delete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether the folder holds something new is not known: not acted on, and a failure
    (exit 1, retried by the next apply), not a skip."""
    root = _tree(tmp_path)
    action = _action(1, root, "ck-7/", ["model.bin", "optimizer.pt"], tmp_path, ActionType.DELETE)
    monkeypatch.setattr("governance.apply.folders.open_store", Unlistable)
    [check] = check_actions([action], StoreOpener(), now=T, pending={})
    assert check.skip is not None
    assert check.skip.startswith(f"{root}ck-7/ cannot be listed (")
    assert check.skip.endswith("): not acted on")
    assert (check.failed, check.final, check.todo) == (True, False, [])
    outcome = outcome_for_check(check)
    assert (outcome.outcome, outcome.final) == (Outcome.FAILED, False)


def test_a_check_not_made_is_a_failure_and_a_lock_a_final_skip() -> None:
    artifact = ArtifactRef("s3://b/x.tmp", "residue", None, None, "s3://b/")
    action = PlannedAction(1, "r", None, ActionType.DELETE, True, artifact, [], "test")
    unread = outcome_for_check(Check(action).block(("tags of x.tmp cannot be read", False)))
    assert (unread.outcome, unread.final) == (Outcome.FAILED, False)
    locked = outcome_for_check(Check(action).block(("legal hold: x.tmp", True)))
    assert (locked.outcome, locked.final) == (Outcome.SKIPPED, True)


def test_runs_are_split_at_folder_ends_only_inside_whole_deletes() -> None:
    keys = ["a/1", "a/2", "d/1", "d/2", "d/3", "d/4", "e/1", "e/2"]
    folder_of = Listed(frozenset({"d/"})).folder_of
    assert split_runs(keys, 4, folder_of) == [
        ["a/1", "a/2"],
        ["d/1", "d/2", "d/3", "d/4"],
        ["e/1", "e/2"],
    ]
    assert split_runs(keys, 2, folder_of) == [keys[:6], keys[6:]]
    assert split_runs(keys, 4, Listed().folder_of) == [keys[i : i + 2] for i in range(0, 8, 2)]
    assert split_runs([], 3, folder_of) == []
