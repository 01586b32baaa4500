"""docs/policy.md stays in step with the code: its example is the shipped policy, and every
key the policy models accept is documented (a new key cannot ship undocumented)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic import BaseModel

from governance.policy import Policy

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "policy.md"
EXAMPLE = REPO / "policies" / "retention.yaml"

INTERNAL_FIELDS = {("Selector", "attributes")}
"""Fields that are not keys of the YAML: a selector's layout placeholders (`team: nlp`) are
written as its own keys and gathered into `attributes`."""


def first_yaml_block(doc: bytes) -> bytes:
    """The body of the first ```yaml fence, with its final newline, as written."""
    start = doc.index(b"\n```yaml\n") + len(b"\n```yaml\n")
    end = doc.index(b"\n```\n", start) + 1
    return doc[start:end]


def models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models inside `X`, `X | None`, `Annotated[X, ...]`, `tuple[X, ...]`, dict values."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in models_in(arg)]


def policy_keys() -> list[tuple[str, str]]:
    """(model name, field name) of every model reachable from `Policy`, top level first."""
    seen: list[type[BaseModel]] = []
    todo: list[type[BaseModel]] = [Policy]
    while todo:
        model = todo.pop(0)
        if model in seen:
            continue
        seen.append(model)
        todo += [m for f in model.model_fields.values() for m in models_in(f.annotation)]
    return [
        (m.__name__, name)
        for m in seen
        for name in m.model_fields
        if (m.__name__, name) not in INTERNAL_FIELDS
    ]


def documented(name: str, text: str) -> bool:
    """Written as a YAML key (`name:`) or in backticks, alone or ending a key path
    (`name`, `storage[].name`, `apply.name`)."""
    as_key = re.search(rf"(?<![\w-]){re.escape(name)}:", text)
    in_code = re.search(rf"`(?:[\w\[\]-]*\.)?{re.escape(name)}`", text)
    return bool(as_key or in_code)


def test_the_docs_example_is_the_shipped_policy_byte_for_byte() -> None:
    assert first_yaml_block(DOC.read_bytes()) == EXAMPLE.read_bytes()


def test_the_walk_finds_the_blocks_of_the_language() -> None:
    models = {model for model, _ in policy_keys()}
    expected = {"Policy", "StorageRoot", "Rule", "Tier", "Selector", "ApplyConfig", "Safety"}
    assert expected <= models


@pytest.mark.parametrize(("model", "key"), policy_keys())
def test_every_policy_key_is_documented(model: str, key: str) -> None:
    assert documented(key, DOC.read_text(encoding="utf-8")), (
        f"{model}.{key} is a policy key that docs/policy.md does not name (as `{key}` or {key}:)"
    )


def test_the_check_would_catch_an_undocumented_key() -> None:
    assert not documented("keep_hourly", DOC.read_text(encoding="utf-8"))
    assert documented("region", "`storage[].region` is also accepted")
    assert not documented("on", "only one of them")
