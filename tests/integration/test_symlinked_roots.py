"""Local roots reached through a symbolic link are where the link points
(`storage.real_place`): two roots overlapping only through a link are refused, and one
root's quarantine reached through a link is never planned on by another root."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from governance.cli.main import cli
from governance.scan.targets import prefixes_under
from tests.fixtures.builders import hf_run, local_writer

SAFE = "safety: {max_delete_fraction: 1.0}\n"


def _govern(tmp_path: Path, *args: str, identity: str = "alice") -> tuple[int, str, str]:
    catalog = f"sqlite:///{tmp_path / 'catalog.db'}"
    result = CliRunner().invoke(cli, ["--catalog", catalog, "--as", identity, "-q", *args])
    return result.exit_code, result.stdout, result.stderr


def _linked(tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "data"
    (data / "team-a" / "runs").mkdir(parents=True)
    link = tmp_path / "datalink"  # e.g. /scratch -> /lustre/scratch
    link.symlink_to(data, target_is_directory=True)
    return data, link


def test_roots_that_overlap_through_a_link_are_refused(tmp_path: Path) -> None:
    data, link = _linked(tmp_path)
    policy = tmp_path / "p.yaml"
    policy.write_text(
        f"version: 1\nstorage:\n  - {{name: all, url: {data}/}}\n"
        f"  - {{name: team, url: {link}/team-a/}}\nrules: []\n"
    )
    code, _, err = _govern(tmp_path, "policy", "validate", str(policy))
    assert code == 2
    assert f"root {link.as_uri()}/team-a/ is inside root {data.as_uri()}/" in err
    assert (
        f"through a symbolic link: {(data / 'team-a').as_uri()}/ is inside {data.as_uri()}/"
    ) in err

    code, _, err = _govern(tmp_path, "scan", "--root", f"{link}/", "--root", f"{data}/")
    assert code == 2
    # both roots named (the message named the real folder twice, never the link)
    assert (
        f"root {data.as_uri()}/ is root {link.as_uri()}/ again "
        f"(through a symbolic link, both are {data.resolve().as_uri()}/)"
    ) in err
    assert not (tmp_path / "catalog.db").exists()


def test_a_quarantine_reached_through_a_link_is_under_the_root_it_really_is_in(
    tmp_path: Path,
) -> None:
    data, link = _linked(tmp_path)
    quarantine = f"{link.as_uri()}/team-a/.govern-quarantine/"
    assert prefixes_under(data.as_uri() + "/", [quarantine]) == ("team-a/.govern-quarantine/",)
    assert prefixes_under("s3://b/", ["s3://b/q/", quarantine]) == ("q/",)


def test_another_roots_plan_leaves_a_linked_roots_quarantine_alone(tmp_path: Path) -> None:
    """A team governs its run through the link; the platform governs the real folder.
    The team's apply quarantines what it deletes beside its root (through the link); the
    platform's plan must not plan that quarantine, the team's only way back."""
    data, link = _linked(tmp_path)
    hf_run(local_writer(data), "team-a/runs/r1/", steps=(100, 200))
    team, platform = tmp_path / "team.yaml", tmp_path / "platform.yaml"
    team.write_text(
        f"version: 1\nstorage: [{{name: team, url: {link}/team-a/runs/r1/}}]\nrules:\n"
        "  - {name: ck, select: {kind: checkpoint}, tiers: [{name: r, keep_last: 1}], "
        "otherwise: delete}\n" + SAFE
    )
    platform.write_text(
        f"version: 1\nstorage: [{{name: all, url: {data}/}}]\nrules:\n"
        "  - {name: old, select: {older_than: 7d}, expire: {after: 7d}}\n" + SAFE
    )
    code, out, err = _govern(tmp_path, "plan", "--policy", str(team), "--format", "json")
    assert code == 0, err
    plan_id = json.loads(out)["plan_id"]
    assert _govern(tmp_path, "approve", plan_id, identity="lead")[0] == 0
    code, _, err = _govern(tmp_path, "apply", plan_id, "--policy", str(team))
    assert code == 0, err
    held = list((data / "team-a" / "runs" / ".govern-quarantine").rglob("*.safetensors"))
    assert held  # the checkpoint the team deleted, in its quarantine

    code, out, err = _govern(tmp_path, "plan", "--policy", str(platform), "--format", "json")
    assert code == 0, err
    uris = [a["artifact"]["uri"] for a in json.loads(out)["actions"]]
    assert uris  # the platform's rule does act on the run itself
    assert not [u for u in uris if ".govern-quarantine" in u], uris
