"""A plan's frozen `apply` block that this govern no longer accepts is a damaged plan:
apply says so in one line (exit 2) before touching anything, never a traceback."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from governance.apply import StoreOpener, apply_plan
from governance.catalog.engine import open_engine
from governance.catalog.plans import save_plan
from governance.errors import EXIT_BAD_INPUT, CatalogError
from governance.plan.fingerprint import fingerprint
from tests.unit.plan_samples import sample_plan


@pytest.mark.parametrize("url", ["s3://ab/q/", "foo://x/q/", "file://host/q/"])
def test_an_unusable_frozen_quarantine_url_is_a_damaged_plan(tmp_path: Path, url: str) -> None:
    engine = open_engine(f"sqlite:///{tmp_path / 'c.db'}")
    plan = sample_plan()
    plan = replace(
        plan,
        fingerprint=fingerprint(plan.actions, plan.kept),
        controls={"apply": {"delete_mode": "quarantine", "quarantine_url": url}},
    )
    save_plan(engine, plan)
    with pytest.raises(CatalogError) as info:
        apply_plan(
            engine, plan.plan_id, actor="bob", now=datetime.now(UTC), stores=StoreOpener(),
            dry_run=True,
        )  # fmt: skip
    assert info.value.exit_code == EXIT_BAD_INPUT
    message = str(info.value)
    assert message.startswith(f"plan {plan.plan_id}: its frozen apply block is not usable")
    assert "quarantine_url" in message
    assert message.endswith("make a new plan")
    engine.dispose()


def test_a_root_is_covered_by_a_root_above_it_or_in_its_bucket() -> None:
    """`apply --policy` refuses a policy that covers none of the plan's roots; one whose
    root is in the same bucket lends its endpoint (`settings_for`), so it covers."""
    from governance.apply import StoreSettings

    opener = StoreOpener(
        [
            StoreSettings("s3://ml-artifacts/runs-a/", "http://minio:9000", None, None),
            StoreSettings("/data/team/", None, None, None),
        ]
    )
    assert opener.covers("s3://ml-artifacts/runs-a/sub/")
    assert opener.covers("s3://ml-artifacts/runs-b/")  # the same bucket: its endpoint
    settings = opener.settings_for("s3://ml-artifacts/runs-b/x")
    assert settings is not None
    assert settings.endpoint_url == "http://minio:9000"
    assert not opener.covers("s3://other-bucket/runs/")
    assert opener.covers("file:///data/team/x/")
    assert not opener.covers("file:///data/other/")


def test_a_concurrency_frozen_before_the_cap_is_capped_not_refused() -> None:
    """A plan approved when `apply.concurrency` had no upper bound (600) stayed
    applicable: the cap of 512 that policies now get must not turn it (or the resumption
    of its interrupted apply) into a damaged plan."""
    from governance.apply.executor import _frozen_apply_config
    from governance.settings import MAX_CONCURRENCY

    config = _frozen_apply_config("p-1", {"apply": {"concurrency": 600}})
    assert config.concurrency == MAX_CONCURRENCY
    assert _frozen_apply_config("p-1", {"apply": {"concurrency": 8}}).concurrency == 8
