"""What `govern restore` brings back is protected for `protect.restored_for`: the next
plan does not plan the same delete again (it did, the night after a restore, with
nothing in the plan or in `explain` saying the artifact had just been restored)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.integration.test_apply_local import RUN, build
from tests.integration.test_apply_support import actions_by, govern


def test_a_restored_checkpoint_is_kept_until_restored_for_is_up(tmp_path: Path) -> None:
    setup, storage = build(tmp_path)
    base = storage.as_uri() + "/"
    doomed = f"{RUN}checkpoint-1000/"
    first = setup.plan()
    assert actions_by(first, base)[doomed] == ["delete"]
    setup.apply(first["plan_id"])
    assert not (storage / doomed).exists()
    setup.restore(first["plan_id"], "--uri", base + doomed)
    assert (storage / doomed).is_dir()

    again = setup.plan()
    assert doomed not in actions_by(again, base)
    [kept] = [k for k in again["kept"] if k["artifact"]["uri"] == base + doomed]
    assert kept["reason"].startswith(f"protected: restored from plan {first['plan_id']} on ")
    assert "protect.restored_for 30d" in kept["reason"]

    why = govern(setup.catalog, "explain", base + doomed, "--policy", str(setup.policy))
    assert why.exit_code == 0, why.stderr
    assert f"restored from plan {first['plan_id']}" in why.stdout

    # a plan as of a past time acts on storage as it is now, restore included
    earlier = (datetime.now(UTC) - timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert doomed not in actions_by(setup.plan("--no-scan", as_of=earlier), base)

    # a month on (past the 30 days), the policy decides again: the same delete
    later = (datetime.now(UTC) + timedelta(days=31)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert actions_by(setup.plan("--no-scan", as_of=later), base)[doomed] == ["delete"]


def test_restored_for_zero_leaves_a_restored_checkpoint_to_the_policy(tmp_path: Path) -> None:
    setup, storage = build(tmp_path)
    text = setup.policy.read_text()
    setup.policy.write_text(text.replace("  min_age: 1h\n", "  min_age: 1h\n  restored_for: 0d\n"))
    assert "restored_for: 0d" in setup.policy.read_text()
    base = storage.as_uri() + "/"
    doomed = f"{RUN}checkpoint-1000/"
    first = setup.plan()
    setup.apply(first["plan_id"])
    setup.restore(first["plan_id"], "--uri", base + doomed)
    assert actions_by(setup.plan(), base)[doomed] == ["delete"]


def test_explain_of_an_artifact_an_apply_removed_names_the_plan_and_the_way_back(
    tmp_path: Path,
) -> None:
    """ "Why is my checkpoint gone?": explain said only that the catalog holds no such
    artifact; it now names the plan and action that removed it and how to restore it,
    for the artifact and for one of its files alike."""
    setup, storage = build(tmp_path)
    base = storage.as_uri() + "/"
    doomed = f"{RUN}checkpoint-1000/"
    doc = setup.plan()
    setup.apply(doc["plan_id"])
    for uri in (base + doomed, base + doomed + "model.safetensors"):
        why = govern(setup.catalog, "explain", uri, "--policy", str(setup.policy))
        assert why.exit_code == 2
        [line] = why.stderr.strip().splitlines()
        assert line.startswith(f"error: no artifact or object with URI {uri} in the catalog")
        assert f": plan {doc['plan_id']} (action " in line
        assert ", into quarantine until " in line
        assert line.endswith(f"`govern restore {doc['plan_id']} --uri {uri}` brings it back")
    # what no apply removed is still only "not in the catalog"
    never = base + f"{RUN}checkpoint-9999/"
    why = govern(setup.catalog, "explain", never, "--policy", str(setup.policy))
    assert why.exit_code == 2
    assert "removed it" not in why.stderr
