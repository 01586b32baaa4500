"""Tag and placeholder values a policy looks for: read as written, matched as globs.

A tag value written as a number (`model-version: 1.10`) was read as YAML's float and
turned back into text as `1.1`: the object tagged `1.10` lost its protection and was
planned for deletion, and the one tagged `1.1` was protected instead. A value with glob
characters (`env: "prod-*"`) was checked as a glob when loaded but compared as text."""

from __future__ import annotations

import pytest

from governance.plan.selectors import tag_value_matches, tags_match
from governance.plan.types import KeptHow
from tests.unit.plan_factories import (
    actions_for,
    checkpoint,
    group,
    kept_for,
    kinds,
    make_plan,
    policy,
)

R = "runs/a/"


@pytest.mark.parametrize(
    ("written", "read"),
    [
        ("1.10", "1.10"),
        ("010", "010"),
        ("0x1F", "0x1F"),
        ("1e3", "1e3"),
        ("1_000", "1_000"),
        (".5", ".5"),
        ("7", "7"),
        ("2.5", "2.5"),
        ("true", "true"),
    ],
)
def test_a_tag_value_written_as_a_number_is_its_text(written: str, read: str) -> None:
    pol = policy(
        f"""
layout:
  runs: ["{{project}}/runs/{{run}}/"]
protect: {{tags: {{model-version: {written}}}}}
rules:
  - name: logs
    select: {{kind: log, project: {written}, tags: {{v: {written}}}}}
    expire: {{after: 1d}}
"""
    )
    assert pol.protect.tags == {"model-version": read}
    select = pol.rules[0].select
    assert select.attributes == {"project": (read,)}
    assert select.tags == {"v": read}


def test_numbers_where_numbers_belong_stay_numbers() -> None:
    pol = policy(
        """
rules:
  - name: ck
    select: {kind: checkpoint}
    tiers: [{name: recent, keep_last: 010}]
    otherwise: delete
safety: {max_delete_fraction: 0.50}
"""
    )
    keep = pol.rules[0].tiers[0].keep_last  # type: ignore[index]
    assert keep == 10
    assert type(keep) is int
    assert pol.safety.max_delete_fraction == 0.5


def test_a_number_written_otherwise_is_shown_as_written_in_an_error() -> None:
    from governance.errors import PolicyError

    with pytest.raises(PolicyError) as info:
        policy("rules:\n  - name: 1.10\n    select: {kind: log}\n    expire: {after: 1d}\n")
    [problem] = info.value.problems
    assert "rules[0].name: expected text, got a number 1.10 (quote it" in problem


def test_protection_by_a_tag_written_as_a_number_protects_what_it_names() -> None:
    pol = policy(
        """
protect: {min_age: 1d, tags: {model-version: 1.10}}
rules:
  - name: checkpoints
    select: {kind: checkpoint}
    tiers: [{name: recent, keep_last: 1}]
    otherwise: delete
"""
    )
    named = checkpoint(R, 100, age_days=6, tags={"model-version": "1.10"})
    other = checkpoint(R, 200, age_days=5, tags={"model-version": "1.1"})
    newest = checkpoint(R, 300, age_days=4)
    plan = make_plan([group("a", [named, other, newest])], pol)
    kept = kept_for(plan, named.key)
    assert kept is not None
    assert kept.how is KeptHow.PROTECTED
    assert "model-version=1.10" in kept.reason
    assert actions_for(plan, named.key) == []
    assert kinds(plan, other.key) == ["delete"]


@pytest.mark.parametrize(
    ("pattern", "value", "matches"),
    [
        ("*", "anything/at all", True),
        ("*", "", True),
        ("prod-*", "prod-eu", True),
        ("prod-*", "prod-", True),
        ("prod-*", "dev-eu", False),
        ("prod-*", "xprod-eu", False),
        ("v?", "v1", True),
        ("v?", "v12", False),
        ("case-[0-9]", "case-7", True),
        ("case-[0-9]", "case-x", False),
        ("true", "true", True),
        ("true", "True", False),
    ],
)
def test_a_tag_value_is_a_glob(pattern: str, value: str, matches: bool) -> None:
    assert tag_value_matches(pattern, value) is matches
    assert tags_match({"k": pattern}, {"k": value}) is matches
    assert tags_match({"k": pattern}, {"other": value}) is False


def test_protection_and_selection_by_a_tag_glob() -> None:
    pol = policy(
        """
protect: {min_age: 1d, tags: {env: "prod-*"}}
rules:
  - name: scratch
    select: {kind: checkpoint, tags: {owner: "team-*"}}
    expire: {after: 2d}
"""
    )
    prod = checkpoint(R, 100, age_days=6, tags={"env": "prod-eu", "owner": "team-a"})
    dev = checkpoint(R, 200, age_days=6, tags={"env": "dev", "owner": "team-b"})
    nobody = checkpoint(R, 300, age_days=6, tags={"env": "dev", "owner": "alice"})
    plan = make_plan([group("a", [prod, dev, nobody])], pol)
    kept = kept_for(plan, prod.key)
    assert kept is not None
    assert kept.how is KeptHow.PROTECTED
    assert "env=prod-eu" in kept.reason
    assert kinds(plan, dev.key) == ["delete"]  # selected by owner team-*, not protected
    assert actions_for(plan, nobody.key) == []  # no rule selects it
