"""`--format csv`: one row per object acted on, with the columns review tools need."""

from __future__ import annotations

import csv
import io
from dataclasses import replace

from governance.report import render
from tests.unit.plan_samples import sample_plan

REQUIRED = [
    "plan_id",
    "action_id",
    "rule",
    "tier",
    "action",
    "artifact_uri",
    "object_uri",
    "size",
    "etag",
    "last_modified",
    "reason",
]


def test_one_row_per_object_with_the_required_columns() -> None:
    plan = sample_plan()
    rows = list(csv.DictReader(io.StringIO(render(plan, "csv"))))
    assert len(rows) == sum(len(a.objects) for a in plan.actions) == 7
    assert set(REQUIRED) <= set(rows[0])
    assert [r["object_uri"] for r in rows] == [a.uri_of(o) for a in plan.actions for o in a.objects]
    first = rows[0]
    assert first["plan_id"] == plan.plan_id
    assert first["action_id"] == "1"
    assert first["action"] == "delete"
    assert first["size"] == "1000"
    assert first["etag"] == '"etag-1"'  # quotes survive
    assert first["last_modified"].endswith("Z")
    assert first["artifact_uri"] == plan.actions[0].artifact.uri
    assert rows[-1]["reason"] == "duplicate of s3://ml-artifacts/w.bin, a comma, here"
    assert rows[1]["tier"] == ""
    assert rows[2]["tier"] == "mid-term"


def test_a_key_with_a_carriage_return_stays_one_row() -> None:
    """The csv module quotes a field with '\n' but not one with '\r' (lines end in
    '\n'), which readers take for a line break: such a row is quoted whole."""
    plan = sample_plan()
    a = plan.actions[0]
    a.objects[0] = replace(a.objects[0], key=a.objects[0].key + "\rname.log")
    rows = list(csv.DictReader(io.StringIO(render(plan, "csv"), newline="")))
    assert [r["object_uri"] for r in rows] == [x.uri_of(o) for x in plan.actions for o in x.objects]
    assert rows[0]["object_uri"].endswith("\rname.log")


def test_empty_plan_is_just_a_header() -> None:
    plan = sample_plan()
    plan.actions = []
    assert render(plan, "csv").splitlines() == [",".join(csv_header())]


def csv_header() -> list[str]:
    from governance.report.csv_report import COLUMNS

    return list(COLUMNS)


def test_an_archive_to_another_location_names_where_it_goes() -> None:
    """An archive by copy had no destination in the CSV (only in its reason): its
    `dest_url` is a column, empty for the rest; an archive by class has its target class."""
    plan = sample_plan()
    archive = next(a for a in plan.actions if a.action == "archive")
    by_class = {r["action_id"]: r for r in csv.DictReader(io.StringIO(render(plan, "csv")))}
    assert by_class[str(archive.id)]["target_storage_class"] == "DEEP_ARCHIVE"
    assert {r["dest_url"] for r in by_class.values()} == {""}
    archive.storage_class, archive.dest_url = None, "s3://cold-archive/final/"
    rows = list(csv.DictReader(io.StringIO(render(plan, "csv"))))
    moved = [r for r in rows if r["action_id"] == str(archive.id)]
    assert moved
    assert {r["dest_url"] for r in moved} == {"s3://cold-archive/final/"}
    assert {r["dest_url"] for r in rows if r["action_id"] != str(archive.id)} == {""}
