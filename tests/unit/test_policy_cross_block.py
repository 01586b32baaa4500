"""Checks across blocks (unique names, overlapping roots, versioned deletes on a
filesystem, archive urls at a root) are reported in the same run as every other error."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from governance.cli.main import cli
from governance.errors import EXIT_BAD_INPUT, PolicyError
from governance.policy import Policy, load_policy

FOUR_PROBLEMS = """\
version: 1
storage:
  - name: artifacts
    url: s3://ml-artifacts/
  - name: scratch
    url: /mnt/shared/scratch/
rules:
  - name: logs
    expire: {after: 7d}
  - name: logs
    select: {kind: checkpoint}
    tiers:
      - name: cold
        keep: [final]
        archive: {url: s3://ml-artifacts/archive/}
    otherwise: delete
apply: {delete_mode: versioned}
safety: {max_delete_fraction: 2}
"""

DUPLICATE_RULE = "10:11: rules[1].name: duplicate rule name 'logs' (also rules[0])"
ARCHIVE_AT_ROOT = (
    "15:24: rules[1].tiers[0].archive.url: archive.url s3://ml-artifacts/archive/ overlaps "
    "root s3://ml-artifacts/: archived copies must go outside every root (a copy there "
    "would overwrite its original, or be planned again as the root's data)"
)
VERSIONED_ON_DISK = (
    "17:22: apply.delete_mode: delete_mode versioned needs versioned S3 buckets; "
    "file:///mnt/shared/scratch/ cannot keep old versions: use quarantine or permanent"
)
BAD_FRACTION = "18:31: safety.max_delete_fraction: must be at most 1.0, got 2"

FIXES = {
    DUPLICATE_RULE: ("  - name: logs\n    select", "  - name: ckpt\n    select"),
    ARCHIVE_AT_ROOT: ("s3://ml-artifacts/archive/", "s3://cold-archive/"),
    VERSIONED_ON_DISK: ("delete_mode: versioned", "delete_mode: quarantine"),
    BAD_FRACTION: ("max_delete_fraction: 2", "max_delete_fraction: 1"),
}
"""For each problem, the edit that fixes it alone (keeping every line and column)."""


def problems(tmp_path: Path, text: str) -> list[str]:
    """The problems of a policy file, without the file name they all start with."""
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    assert info.value.exit_code == EXIT_BAD_INPUT
    assert all(p.startswith(f"{path}:") for p in info.value.problems)
    return [p[len(f"{path}:") :] for p in info.value.problems]


def fixed(text: str, *keep: str) -> str:
    """FOUR_PROBLEMS with every problem fixed except those in `keep`."""
    for problem, (old, new) in FIXES.items():
        if problem not in keep:
            assert old in text
            text = text.replace(old, new)
    return text


def test_four_independent_problems_are_reported_in_one_run(tmp_path: Path) -> None:
    assert problems(tmp_path, FOUR_PROBLEMS) == [
        DUPLICATE_RULE,
        ARCHIVE_AT_ROOT,
        VERSIONED_ON_DISK,
        BAD_FRACTION,
    ]


def test_the_fixed_policy_validates(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(fixed(FOUR_PROBLEMS))
    assert [r.name for r in load_policy(path).rules] == ["logs", "ckpt"]


@pytest.mark.parametrize("problem", list(FIXES))
def test_each_problem_is_reported_alone(tmp_path: Path, problem: str) -> None:
    assert problems(tmp_path, fixed(FOUR_PROBLEMS, problem)) == [problem]


@pytest.mark.parametrize("problem", [DUPLICATE_RULE, ARCHIVE_AT_ROOT, VERSIONED_ON_DISK])
def test_each_cross_block_check_survives_an_error_elsewhere(tmp_path: Path, problem: str) -> None:
    assert problems(tmp_path, fixed(FOUR_PROBLEMS, problem, BAD_FRACTION)) == [
        problem,
        BAD_FRACTION,
    ]


def test_roots_and_tier_names_are_checked_beside_other_errors(tmp_path: Path) -> None:
    text = """\
version: 1
storage:
  - {name: a, url: s3://data/}
  - {name: a, url: s3://data/nlp/}
rules:
  - name: ckpt
    tiers:
      - {name: recent, keep_last: "3"}
      - {name: recent, keep_daily: 7}
"""
    assert problems(tmp_path, text) == [
        "4:12: storage[1].name: duplicate storage name 'a'",
        "4:20: storage[1].url: root s3://data/nlp/ is inside root s3://data/: roots must "
        "not overlap (their objects would be planned, counted and acted on twice)",
        "7:5: rules[0].tiers: 'otherwise: delete|keep' is required with tiers "
        "(what happens to a checkpoint no tier keeps)",
        "8:35: rules[0].tiers[0].keep_last: expected a whole number, got a string '3'",
        "9:16: rules[0].tiers[1].name: duplicate tier name 'recent'",
    ]


def test_every_repeat_is_reported_not_only_the_first(tmp_path: Path) -> None:
    text = """\
version: 1
storage: [{name: a, url: s3://data/}]
rules:
  - {name: x, expire: {after: 1d}}
  - {name: x, expire: {after: 2d}}
  - {name: x, expire: {after: 3d}}
  - name: y
    tiers:
      - {name: one, keep_last: 1, archive: {url: s3://data/a/}}
      - {name: two, keep_last: 2, archive: {url: s3://data/b/}}
    otherwise: keep
"""
    found = problems(tmp_path, text)
    assert [p.split(": ")[0:2] for p in found] == [
        ["5:12", "rules[1].name"],
        ["6:12", "rules[2].name"],
        ["9:50", "rules[3].tiers[0].archive.url"],
        ["10:50", "rules[3].tiers[1].archive.url"],
    ]


def test_an_unparseable_archive_url_is_not_also_said_to_overlap_a_root(tmp_path: Path) -> None:
    text = fixed(FOUR_PROBLEMS, ARCHIVE_AT_ROOT).replace("s3://ml-artifacts/archive/", "foo://x/")
    assert problems(tmp_path, text) == [
        "15:24: rules[1].tiers[0].archive.url: storage URL 'foo://x/': unknown scheme 'foo'"
    ]


def test_a_root_that_cannot_be_opened_is_left_out_of_the_checks_across_roots(
    tmp_path: Path,
) -> None:
    """The scratch root was the one that cannot keep versions: once its URL is unreadable,
    nothing is said about versions; the archive still overlaps the valid root."""
    text = fixed(FOUR_PROBLEMS, ARCHIVE_AT_ROOT, VERSIONED_ON_DISK)
    text = text.replace("/mnt/shared/scratch/", "s3://")
    assert problems(tmp_path, text) == [
        "6:10: storage[1].url: storage URL 's3://': no bucket name",
        ARCHIVE_AT_ROOT,
    ]


def test_invalid_rule_names_are_not_also_duplicates(tmp_path: Path) -> None:
    text = fixed(FOUR_PROBLEMS, DUPLICATE_RULE).replace("name: logs", "name: ''")
    found = problems(tmp_path, text)
    assert [p.split(": ")[:2] for p in found] == [
        ["8:11", "rules[0].name"],
        ["10:11", "rules[1].name"],
    ]
    assert not any("duplicate" in p for p in found)


def test_the_cli_prints_every_problem_and_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(FOUR_PROBLEMS)
    result = CliRunner().invoke(cli, ["policy", "validate", str(path)])
    assert result.exit_code == EXIT_BAD_INPUT == 2
    assert f"invalid policy {path}: 4 problems" in result.stderr
    for problem in (DUPLICATE_RULE, ARCHIVE_AT_ROOT, VERSIONED_ON_DISK, BAD_FRACTION):
        assert f"{path}:{problem}" in result.stderr


# ----------------------------------------------------------------------------- in code


def base() -> dict[str, Any]:
    return {
        "version": 1,
        "storage": [
            {"name": "a", "url": "s3://data/"},
            {"name": "b", "url": "/mnt/scratch/"},
        ],
        "rules": [
            {
                "name": "ckpt",
                "tiers": [{"name": "cold", "keep_last": 1, "archive": {"url": "s3://cold/"}}],
                "otherwise": "keep",
            }
        ],
    }


def _dup_rule(d: dict[str, Any]) -> None:
    d["rules"].append({"name": "ckpt", "expire": {"after": "1d"}})


def _dup_tier(d: dict[str, Any]) -> None:
    d["rules"][0]["tiers"].append({"name": "cold", "keep_last": 2})


def _versioned(d: dict[str, Any]) -> None:
    d["apply"] = {"delete_mode": "versioned"}


def _archive_at_root(d: dict[str, Any]) -> None:
    d["rules"][0]["tiers"][0]["archive"] = {"url": "s3://data/archive/"}


def _root_inside(d: dict[str, Any]) -> None:
    d["storage"].append({"name": "c", "url": "s3a://data/x/"})


def _quarantine_at_root(d: dict[str, Any]) -> None:
    d["apply"] = {"quarantine_url": "s3a://data"}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (_dup_rule, "duplicate rule name 'ckpt' (also rules[0])"),
        (_dup_tier, "duplicate tier name 'cold'"),
        (_versioned, "delete_mode versioned needs versioned S3 buckets; file:///mnt/scratch/"),
        (_archive_at_root, "archive.url s3://data/archive/ overlaps root s3://data/"),
        (_root_inside, "root s3://data/x/ is inside root s3://data/"),
        (_quarantine_at_root, "s3://data/ is the root s3://data/: quarantined copies"),
    ],
)
def test_a_policy_built_in_code_is_still_refused(change: Any, message: str) -> None:
    data = base()
    assert Policy.model_validate(data).rules[0].name == "ckpt"
    change(data)
    with pytest.raises(ValidationError, match=re.escape(message)):
        Policy.model_validate(data)


@pytest.mark.parametrize(
    ("quarantine", "refused"),
    [
        ("s3://data/", True),
        ("/mnt/scratch", True),  # the other root: its plans would expire the copies
        ("s3://data/.govern-quarantine/", False),  # in a folder of the root: left out
        ("s3://quarantine/", False),
    ],
)
def test_a_quarantine_that_is_a_root_is_refused_with_the_other_problems(
    tmp_path: Path, quarantine: str, refused: bool
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(
        "version: 1\n"
        "storage: [{name: a, url: s3://data/}, {name: b, url: /mnt/scratch/}]\n"
        "rules: [{name: logs, select: {kind: lgo}, expire: {after: 1d}}]\n"
        f"apply: {{quarantine_url: '{quarantine}'}}\n"
    )
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    found = [p.removeprefix(f"{path}:") for p in info.value.problems]
    assert found[0].startswith("3:37: rules[0].select.kind: expected one of")
    if refused:
        assert len(found) == 2
        assert found[1].startswith("4:25: apply.quarantine_url: ")
        assert "quarantined copies would be that root's data" in found[1]
    else:
        assert len(found) == 1
