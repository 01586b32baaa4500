"""Files and folders whose names are not valid UTF-8 on local disk, end to end.

A legacy Latin-1 name (`latin1-\\xe9.txt`) reaches Python with surrogate escapes, which no
catalog can store: it once made `govern scan` (and `govern plan`, which scans first) fail
with a UnicodeEncodeError. Such a file is now skipped as a symbolic link is (neither listed
nor, for a folder, entered), counted and noted; plans cannot touch it, and apply leaves it
where it is, with its folder, when it removes the rest of a checkpoint.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from governance.cli.main import cli
from tests.fixtures.builders import hf_run, local_writer, marker
from tests.integration.test_apply_support import Setup, policy_text

RUN = "runs/a/"
LATIN1 = b"latin1-\xe9.txt"  # "latin1-é.txt" written in Latin-1: not UTF-8
FOLDER = b"r\xe9sultats"  # a folder so named, with a file in it


def bad(directory: Path, name: bytes) -> bytes:
    """The path (bytes) of `name` under `directory`."""
    return os.fsencode(directory) + b"/" + name


def write_bad(directory: Path) -> None:
    """A file and a folder (holding a file) whose names are not UTF-8, in `directory`."""
    with open(bad(directory, LATIN1), "wb") as handle:
        handle.write(b"legacy")
    os.mkdir(bad(directory, FOLDER))
    with open(bad(directory, FOLDER) + b"/inner.txt", "wb") as handle:
        handle.write(b"inside")


def scan(catalog: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--catalog", catalog, *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("beside", [True, False])
def test_scan_skips_counts_and_notes_names_that_are_not_utf8(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, beside: bool
) -> None:
    monkeypatch.setattr("governance.storage.fs.can_walk_beside", lambda: beside)
    root = tmp_path / "data"
    (root / "runs/a").mkdir(parents=True)
    (root / "runs/a/ok.txt").write_bytes(b"ok")
    (root / "runs/a/café.txt").write_bytes(b"utf8")  # a UTF-8 name is listed as ever
    write_bad(root / "runs/a")
    catalog = f"sqlite:///{tmp_path / 'c.db'}"

    code, out, err = scan(catalog, "scan", "--root", str(root), "--format", "json")

    assert code == 0, err
    [entry] = json.loads(out)["scans"]
    assert (entry["objects"], entry["bytes"]) == (2, 6)  # neither the file nor the folder's
    assert entry["unreadable_names"] == 2
    assert entry["links"] == 0
    assert (
        f"note: {root.as_uri()}/: 2 files or folders not listed: their names are not valid "
        "UTF-8 (such a folder is not entered; rename them to have them scanned)"
    ) in err
    code, out, err = scan(catalog, "ls", "objects", "--format", "json")
    assert code == 0, err
    assert sorted(o["uri"].rsplit("/", 1)[1] for o in json.loads(out)) == ["café.txt", "ok.txt"]

    code, out, err = scan(catalog, "scan", "--root", str(root))  # the table
    assert code == 0, err
    assert "non-UTF-8" in out
    code, out, err = scan(catalog, "-q", "scan", "--root", str(root))
    assert (code, out, err) == (0, "", "")


def test_a_root_without_such_names_says_nothing_of_them(tmp_path: Path) -> None:
    root = tmp_path / "data"
    root.mkdir()
    (root / "a.txt").write_bytes(b"a")
    code, out, err = scan(
        f"sqlite:///{tmp_path / 'c.db'}", "scan", "--root", str(root), "--format", "json"
    )
    assert code == 0, err
    assert json.loads(out)["scans"][0]["unreadable_names"] == 0
    assert "UTF-8" not in err
    code, out, err = scan(f"sqlite:///{tmp_path / 'c.db'}", "scan", "--root", str(root))
    assert "non-UTF-8" not in out


def test_apply_deletes_a_checkpoint_around_such_a_file_and_leaves_it_with_its_folder(
    tmp_path: Path,
) -> None:
    storage = tmp_path / "storage"
    hf_run(local_writer(storage), RUN, steps=(500, 1000, 1500, 2000))
    marker(local_writer(storage), RUN)
    doomed = storage / RUN / "checkpoint-1000"
    write_bad(doomed)
    policy = tmp_path / "policy.yaml"
    policy.write_text(policy_text(str(storage)))
    setup = Setup(f"sqlite:///{tmp_path / 'catalog.db'}", policy)
    base = storage.as_uri() + "/"

    doc = setup.plan()  # scans first: once a UnicodeEncodeError

    [delete] = [a for a in doc["actions"] if a["artifact"]["uri"] == f"{base}{RUN}checkpoint-1000/"]
    assert delete["action"] == "delete"
    named = {o["uri"] for o in delete["objects"]}
    assert named
    assert all(k.isascii() for k in named)
    report = json.loads(setup.apply(doc["plan_id"]).stdout)
    assert {r["outcome"] for r in report["results"]} == {"ok"}
    # the checkpoint's listed files are gone; the file and folder with the bad names stay,
    # and so does the folder that holds them (it is not empty)
    assert sorted(os.listdir(os.fsencode(doomed))) == sorted([LATIN1, FOLDER])
    with open(bad(doomed, LATIN1), "rb") as handle:
        assert handle.read() == b"legacy"
    with open(bad(doomed, FOLDER) + b"/inner.txt", "rb") as handle:
        assert handle.read() == b"inside"
    again = setup.plan()  # and the next scan and plan go on without them
    assert not [a for a in again["actions"] if "checkpoint-1000" in a["artifact"]["uri"]]


def test_a_link_with_such_a_name_still_keeps_what_it_points_at(tmp_path: Path) -> None:
    storage = tmp_path / "storage"
    hf_run(local_writer(storage), RUN, steps=(500, 1000, 1500, 2000))
    marker(local_writer(storage), RUN)
    os.symlink(b"checkpoint-1000", bad(storage / RUN, b"best-\xe9"))
    policy = tmp_path / "policy.yaml"
    policy.write_text(policy_text(str(storage)))
    setup = Setup(f"sqlite:///{tmp_path / 'catalog.db'}", policy)
    base = storage.as_uri() + "/"

    doc = setup.plan()

    kept = {k["artifact"]["uri"][len(base) :]: k["reason"] for k in doc["kept"]}
    assert "the symbolic link runs/a/best-\\xe9 points at it" in kept[f"{RUN}checkpoint-1000/"]
    assert f"{base}{RUN}checkpoint-1000/" not in {a["artifact"]["uri"] for a in doc["actions"]}


@pytest.mark.parametrize("columns", [80, 200])
def test_the_table_shows_the_count_beside_the_links_without_cutting_a_header(
    tmp_path: Path, columns: int
) -> None:
    root = tmp_path / "x" / "storage" / "shared-training-area" / "nlp"
    (root / "run").mkdir(parents=True)
    (root / "run" / "model.bin").write_bytes(b"w" * 5000)
    (root / "run" / "best").symlink_to("model.bin")
    write_bad(root / "run")
    result = CliRunner().invoke(
        cli,
        ["--catalog", f"sqlite:///{tmp_path / 'c.db'}", "scan", "--root", str(root)],
        env={"COLUMNS": str(columns)},
    )
    assert result.exit_code == 0, result.output
    lines = [line.rstrip() for line in result.stdout.splitlines()]
    assert "…" not in result.stdout
    assert max(map(len, lines)) <= columns
    header = next(line for line in lines if "objects" in line)
    assert header.replace("┃", " ").split() == [
        "root", "objects", "bytes", "new", "changed", "gone", "links", "non-UTF-8", "seconds"
    ]  # fmt: skip
    row = next(line for line in lines if "4.9 KiB" in line)
    assert row.replace("│", " ").split()[-3:-1] == ["1", "2"]  # 1 link, 2 names
