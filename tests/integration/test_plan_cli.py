"""`govern plan / plans / show / explain` end to end on a small tree on local disk.

The tree is written "now" (real mtimes), so the 3-day grace period protects everything
today and a far-future `--as-of` ages it all: both halves of the time model are exercised.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from governance.cli.main import cli
from tests.fixtures.builders import hf_run, local_writer, marker, residue

FUTURE = "2100-01-01"
STEPS = (1000, 2000, 3000, 4000, 5000)


def _policy(tmp_path: Path, storage: Path, extra: str = "") -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(
        f"""version: 1
storage:
  - name: local
    url: {storage}
layout:
  runs: ["runs/{{run}}/"]
rules:
  - name: residue
    select: {{kind: residue}}
    expire: {{after: 2d}}
  - name: checkpoints
    select: {{kind: checkpoint}}
    tiers:
      - name: recent
        keep_last: 2
    otherwise: delete
{extra}"""
    )
    return path


@pytest.fixture
def setup(tmp_path: Path) -> tuple[str, Path, Path]:
    """(catalog URL, policy path, storage folder) with two finished HF runs and residue."""
    return tree(tmp_path, datetime.now(UTC) - timedelta(hours=12))


def tree(tmp_path: Path, start: datetime) -> tuple[str, Path, Path]:
    """`setup`'s tree and policy, its runs started at `start`."""
    storage = tmp_path / "storage"
    write = local_writer(storage)
    for run in ("alpha", "beta"):
        hf_run(write, f"runs/{run}", steps=STEPS, start=start, every=timedelta(minutes=5))
        marker(write, f"runs/{run}", mtime=start + timedelta(hours=1))
    residue(write, "scratch", mtime=start)
    return f"sqlite:///{tmp_path / 'catalog.db'}", _policy(tmp_path, storage), storage


def _run(catalog: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--catalog", catalog, "-q", *args])


def _json(result: Result) -> Any:
    assert result.exit_code == 0, (result.exit_code, result.stderr, result.stdout)
    return json.loads(result.stdout)


def test_plan_saves_and_plans_show_agree(setup: tuple[str, Path, Path]) -> None:
    catalog, policy, storage = setup
    doc = _json(_run(catalog, "plan", "--policy", str(policy), "--format", "json"))
    assert doc["plan_id"].startswith("p-")
    assert doc["summary"]["actions"] == 0  # everything is inside the 3-day grace period
    assert doc["as_of"].endswith("Z")

    listed = _json(_run(catalog, "plans", "--format", "json"))
    assert [p["plan_id"] for p in listed] == [doc["plan_id"]]
    assert listed[0]["status"] == doc["status"]
    assert listed[0]["policy"] == doc["policy"]
    assert listed[0]["summary"] == doc["summary"]
    assert set(listed[0]) >= {"plan_id", "status", "created_at", "as_of", "policy", "summary"}

    shown = _json(_run(catalog, "show", doc["plan_id"], "--format", "json"))
    history = shown.pop("history")  # `show` adds what happened since: nothing yet
    assert (history["decisions"], history["executions"]) == ([], [])
    assert shown == doc
    assert (storage / "runs/alpha/checkpoint-1000/optimizer.pt").exists()  # planning never deletes


def test_far_future_as_of_ages_everything(setup: tuple[str, Path, Path]) -> None:
    catalog, policy, storage = setup
    doc = _json(
        _run(catalog, "plan", "--policy", str(policy), "--as-of", FUTURE, "--format", "json")
    )
    assert doc["as_of"] == "2100-01-01T00:00:00Z"
    deleted = {a["artifact"]["uri"] for a in doc["actions"] if a["action"] == "delete"}
    for run in ("alpha", "beta"):
        for step in (1000, 2000, 3000):
            assert f"{storage.as_uri()}/runs/{run}/checkpoint-{step}/" in deleted
        for step in (4000, 5000):
            assert f"{storage.as_uri()}/runs/{run}/checkpoint-{step}/" not in deleted
    for action in doc["actions"]:
        assert action["reason"]
        for obj in action["objects"]:
            assert obj["uri"].startswith("file://")
            assert obj["size"] >= 0
            assert obj["etag"]
    assert doc["summary"]["bytes_deleted"] > 0
    assert doc["status"] == "what_if"  # made as of a time after it was made: never applied

    # the second plan lists after the first, and `show` renders every other format
    _run(catalog, "plan", "--policy", str(policy), "--no-scan", "--format", "json")
    listed = _json(_run(catalog, "plans", "--format", "json"))
    assert listed[0]["plan_id"] == doc["plan_id"]
    assert len(listed) == 2
    for fmt in ("table", "md", "csv", "html"):
        shown = _run(catalog, "show", doc["plan_id"], "--format", fmt)
        assert shown.exit_code == 0, shown.stderr
        assert doc["plan_id"] in shown.stdout or fmt == "csv"
        assert "checkpoint-1000" in shown.stdout or fmt == "table"  # a table folds long URIs
    table = _run(catalog, "plans")
    assert table.exit_code == 0
    assert doc["plan_id"] in table.stdout


def test_out_file_takes_its_format_from_the_suffix(
    setup: tuple[str, Path, Path], tmp_path: Path
) -> None:
    catalog, policy, _ = setup
    out = tmp_path / "reports" / "plan.html"
    result = _run(
        catalog,
        "plan",
        "--policy",
        str(policy),
        "--as-of",
        FUTURE,
        "--out",
        str(out),
        "--format",
        "md",
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("# Plan ")
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert "alpha" in page
    assert "beta" in page

    bad = _run(catalog, "plan", "--policy", str(policy), "--out", str(tmp_path / "x.txt"))
    assert bad.exit_code == 2
    assert "--out" in bad.stderr

    # the same format on stdout and in the file: the file alone (not 58 KB of HTML twice)
    again = _run(catalog, "plan", "--policy", str(policy), "--format", "html", "--out", str(out))
    assert again.exit_code == 0, again.stderr
    assert again.stdout == ""
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")

    # but JSON goes to stdout whatever `--out` is (cli.md: `| jq` always works), and to
    # the file too
    data = tmp_path / "plan.json"
    both = _run(catalog, "plan", "--policy", str(policy), "--format", "json", "--out", str(data))
    assert both.exit_code == 0, both.stderr
    assert json.loads(both.stdout) == json.loads(data.read_text(encoding="utf-8"))


def test_a_report_that_fails_part_way_leaves_the_previous_one(
    setup: tuple[str, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--out` is written beside itself and renamed over: a write that fails (or is
    interrupted) part-way leaves the report that was there, whole, and no temporary file;
    a new report gets the mode a new file gets (not a temporary file's 0600)."""
    catalog, policy, _ = setup
    out = tmp_path / "reports" / "plan.json"
    args = ["plan", "--policy", str(policy), "--as-of", FUTURE, "--out", str(out)]
    first = _run(catalog, *args)
    assert first.exit_code == 0, first.stderr
    before = out.read_text(encoding="utf-8")
    assert json.loads(before)["actions"]
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask

    def broken(*_: object) -> dict[str, object]:
        raise KeyboardInterrupt  # an interruption in the middle of writing the report

    monkeypatch.setattr("governance.report.json_report.kept_dict", broken)
    second = _run(catalog, *args)
    assert second.exit_code != 0
    assert out.read_text(encoding="utf-8") == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["plan.json"]


def test_refused_plan_is_saved_printed_and_exits_3(tmp_path: Path) -> None:
    storage = tmp_path / "storage"
    hf_run(local_writer(storage), "runs/r", steps=STEPS)  # 2024 mtimes: old already
    policy = _policy(tmp_path, storage, "safety:\n  max_delete_fraction: 0.01\n")
    catalog = f"sqlite:///{tmp_path / 'c.db'}"
    result = _run(catalog, "plan", "--policy", str(policy), "--format", "json")
    assert result.exit_code == 3, result.stderr
    doc = json.loads(result.stdout)
    assert doc["status"] == "refused"
    assert doc["refusal"]
    assert "refused" in result.stderr
    assert _json(_run(catalog, "plans", "--format", "json"))[0]["status"] == "refused"


@pytest.mark.parametrize(
    "value",
    [
        "yesterday",
        "2026-13-01",
        "2026-12-01T25:00",
        "9999-12-31T23:59:59-01:00",  # a valid time whose UTC form is past year 9999
        "0001-01-01",  # valid times whose ages and windows fall off the calendar: these
        "1969-12-31T23:59:59Z",  # crashed (OverflowError, exit 1) in plan and explain
        "9000-01-01",
    ],
)
def test_bad_as_of_is_exit_2_naming_the_option(setup: tuple[str, Path, Path], value: str) -> None:
    catalog, policy, root = setup
    for args in (
        ["plan", "--policy", str(policy)],
        ["explain", str(root), "--policy", str(policy)],
    ):
        result = _run(catalog, *args, "--as-of", value)
        assert result.exit_code == 2, (args, result.stderr)
        assert "--as-of" in result.stderr
        assert "Traceback" not in result.stderr


def test_an_out_file_that_cannot_be_written_stops_before_anything_is_saved(
    setup: tuple[str, Path, Path], tmp_path: Path
) -> None:
    catalog, policy, _ = setup
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    result = _run(catalog, "plan", "--policy", str(policy), "--out", str(blocker / "plan.html"))
    assert result.exit_code == 2
    assert "--out" in result.stderr
    assert result.stdout == ""  # no report: nothing was planned
    # and nothing saved to wait for approval unseen: the catalog was not even created
    assert not Path(catalog.removeprefix("sqlite:///")).exists()


@pytest.mark.parametrize(
    ("out", "why"),
    [
        ("reports", "'reports' is a directory"),  # an existing folder (click says so)
        ("a-file/plan.html", "a-file is a file, not a folder"),
        ("a-file/deeper/plan.html", "a-file is a file, not a folder"),
        ("/proc/govern-plan.html", "cannot write"),  # root may, by os.access; Linux says no
        ("/proc/govern-missing/plan.html", "cannot write"),
    ],
)
def test_an_out_file_is_tried_for_real_before_anything_is_saved(
    setup: tuple[str, Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    out: str,
    why: str,
) -> None:
    if out.startswith("/proc/") and not Path("/proc/self").is_dir():
        pytest.skip("no /proc here")
    catalog, policy, _ = setup
    assert _run(catalog, "scan", "--policy", str(policy)).exit_code == 0  # a catalog to look in
    monkeypatch.chdir(tmp_path)
    (tmp_path / "reports").mkdir()
    (tmp_path / "a-file").write_text("x")
    result = _run(catalog, "plan", "--policy", str(policy), "--out", out)
    assert result.exit_code == 2, result.stderr
    assert "--out" in result.stderr
    assert why in result.stderr
    assert result.stdout == ""
    assert _json(_run(catalog, "plans", "--format", "json")) == []
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == []  # no probe left


def test_folders_made_for_a_refused_out_file_are_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno
    import tempfile

    from governance.cli.plan_cmd import _check_writable
    from governance.errors import ArgumentError

    def full(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tempfile, "NamedTemporaryFile", full)
    with pytest.raises(ArgumentError, match="No space left on device") as info:
        _check_writable(tmp_path / "new" / "deeper" / "plan.html")
    assert info.value.exit_code == 2
    assert list(tmp_path.iterdir()) == []


def test_a_root_without_its_filesystem_package_is_exit_2(tmp_path: Path) -> None:
    pytest.importorskip("fsspec")
    try:
        import gcsfs  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("gcsfs is installed here")
    result = _run(f"sqlite:///{tmp_path / 'c.db'}", "scan", "--root", "gs://bucket/x")
    assert result.exit_code == 2
    assert "gs://" in result.stderr
    assert "gcsfs" in result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_plan_id_is_exit_2(tmp_path: Path) -> None:
    catalog = f"sqlite:///{tmp_path / 'c.db'}"
    (tmp_path / "empty").mkdir()
    assert _run(catalog, "scan", "--root", str(tmp_path / "empty")).exit_code == 0
    result = _run(catalog, "show", "p-20260101-000000-beef")
    assert result.exit_code == 2
    assert "p-20260101-000000-beef" in result.stderr


def test_no_scan_on_an_unscanned_root_says_what_to_do(
    setup: tuple[str, Path, Path], tmp_path: Path
) -> None:
    catalog, policy, _ = setup
    (tmp_path / "other").mkdir()
    assert _run(catalog, "scan", "--root", str(tmp_path / "other")).exit_code == 0  # a catalog
    result = _run(catalog, "plan", "--policy", str(policy), "--no-scan")
    assert result.exit_code == 2
    assert "has not been scanned" in result.stderr
    assert "govern scan --policy" in result.stderr


def test_no_scan_without_a_catalog_says_so_and_creates_none(
    setup: tuple[str, Path, Path], tmp_path: Path
) -> None:
    _, policy, _ = setup
    path = tmp_path / "nowhere" / "catalog.db"
    result = _run(f"sqlite:///{path}", "plan", "--policy", str(policy), "--no-scan")
    assert result.exit_code == 2
    assert "does not exist" in result.stderr
    assert str(path) in result.stderr
    assert not path.exists()
    assert not path.parent.exists()


def test_explain_says_why(setup: tuple[str, Path, Path]) -> None:
    catalog, policy, storage = setup
    assert _run(catalog, "scan", "--policy", str(policy)).exit_code == 0
    uri = f"{storage.as_uri()}/runs/alpha/checkpoint-1000/"
    doc = _json(
        _run(
            catalog, "explain", uri, "--policy", str(policy), "--as-of", FUTURE, "--format", "json"
        )
    )
    assert doc["uri"] == uri
    assert doc["kind"] == "checkpoint"
    assert doc["rule"] == "checkpoints"
    assert doc["decision"]
    assert doc["reason"]
    # a plain path works too, and the table form prints the same reason
    plain = _run(
        catalog,
        "explain",
        str(storage / "runs/alpha/checkpoint-5000") + "/",
        "--policy",
        str(policy),
        "--as-of",
        FUTURE,
    )
    assert plain.exit_code == 0, plain.stderr
    assert "checkpoint-5000" in plain.stdout
    # in words, not Python's: "complete  yes"; each rule considered indented under its head
    lines = plain.stdout.splitlines()
    assert any(line.split() == ["complete", "yes"] for line in lines), plain.stdout
    head = lines.index("rules considered:")
    first = lines[head + 1]
    assert first.startswith("  ")
    assert first[2] != " "
    outside = _run(catalog, "explain", "/elsewhere/x", "--policy", str(policy))
    assert outside.exit_code == 2


def test_an_as_of_before_the_scan_says_what_the_plan_is(setup: tuple[str, Path, Path]) -> None:
    """A plan as of a past time judges the catalog as scanned now: objects written since
    count as young (protected), and a reader must not take it for a plan of that day."""
    catalog, policy, storage = setup
    doc = _json(
        _run(catalog, "plan", "--policy", str(policy), "--as-of", "2001-01-01", "--format", "json")
    )
    root = storage.as_uri() + "/"
    [past] = [n for n in doc["notes"] if "before its scan began" in n]
    assert past.startswith(f"root {root}: planned as of 2001-01-01T00:00:00Z, before its scan")
    assert past.endswith(
        "objects written after 2001-01-01T00:00:00Z count as younger than protect.min_age (kept)"
    )
    assert doc["summary"]["actions"] == 0
    now = _json(_run(catalog, "plan", "--policy", str(policy), "--no-scan", "--format", "json"))
    assert not [n for n in now["notes"] if "before its scan began" in n]


@pytest.mark.parametrize(
    ("typed", "why"),
    [("s3:/bucket/runs/x.pt", "did you mean 's3://bucket/runs/x.pt'?"), ("file://runs/x", "host")],
)
def test_explain_and_restore_name_a_malformed_url_as_typed(
    setup: tuple[str, Path, Path], typed: str, why: str
) -> None:
    catalog, policy, _ = setup
    plan_id = _json(_run(catalog, "plan", "--policy", str(policy), "--format", "json"))["plan_id"]
    for args in (["explain", typed, "--policy", str(policy)], ["restore", plan_id, "--uri", typed]):
        result = _run(catalog, *args)
        assert result.exit_code == 2, (args, result.stderr)
        assert f"URL {typed!r}" in result.stderr, args
        assert why in result.stderr, args
