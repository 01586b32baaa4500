"""`govern scan --root` refuses overlapping roots as a policy's `storage` block does: the
outer root would list the inner one's quarantined copies and even a catalog file kept
there, and a plan would count and act on its objects twice."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from governance.cli.main import cli


def _scan(tmp_path: Path, *roots: str) -> tuple[int, str]:
    catalog = f"sqlite:///{tmp_path / 'catalog.db'}"
    args = ["--catalog", catalog, "-q", "scan"]
    for root in roots:
        args += ["--root", root]
    result = CliRunner().invoke(cli, args)
    return result.exit_code, result.stderr


def test_a_root_inside_another_is_refused_naming_both(tmp_path: Path) -> None:
    outer, inner = tmp_path / "two", tmp_path / "two" / "a"
    inner.mkdir(parents=True)
    code, err = _scan(tmp_path, f"{inner}/", f"{outer}/")
    assert code == 2
    assert err.splitlines() == [
        f"error: --root: root {inner.as_uri()}/ is inside root {outer.as_uri()}/: roots must "
        "not overlap (their objects would be planned, counted and acted on twice)"
    ]
    assert not (tmp_path / "catalog.db").exists()  # refused before anything was scanned


def test_one_root_given_twice_in_two_spellings_is_refused(tmp_path: Path) -> None:
    (tmp_path / "two").mkdir()
    code, err = _scan(tmp_path, str(tmp_path / "two"), (tmp_path / "two").as_uri() + "/")
    assert code == 2
    assert f"root {(tmp_path / 'two').as_uri()}/ is listed twice" in err


def test_roots_side_by_side_are_scanned(tmp_path: Path) -> None:
    for name in ("ab", "a"):  # `a` is a prefix of `ab`'s name, not a folder above it
        (tmp_path / name).mkdir()
    assert _scan(tmp_path, str(tmp_path / "ab"), str(tmp_path / "a")) == (0, "")


def test_a_root_nested_in_one_scanned_before_is_scanned_with_a_note(tmp_path: Path) -> None:
    """Across scans (a policy whose storage moved to a subfolder) the catalog holds both:
    allowed, since plans read the policy's roots alone, but said, since `ls` lists the
    shared objects under each."""
    outer, inner = tmp_path / "two", tmp_path / "two" / "a"
    inner.mkdir(parents=True)
    (inner / "f.bin").write_bytes(b"x")
    catalog = f"sqlite:///{tmp_path / 'catalog.db'}"
    first = CliRunner().invoke(cli, ["--catalog", catalog, "scan", "--root", str(outer)])
    assert first.exit_code == 0
    assert "note: root" not in first.stderr
    second = CliRunner().invoke(cli, ["--catalog", catalog, "scan", "--root", str(inner)])
    assert second.exit_code == 0, second.stderr
    assert (
        f"note: root {inner.as_uri()}/ lies inside root {outer.as_uri()}/, which the catalog "
        "holds from an earlier scan"
    ) in second.stderr
    third = CliRunner().invoke(cli, ["--catalog", catalog, "scan", "--root", str(outer)])
    assert f"note: root {outer.as_uri()}/ holds root {inner.as_uri()}/" in third.stderr
    assert _scan(tmp_path, str(inner))[1] == ""  # (-q: no notes)
