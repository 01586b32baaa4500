"""`govern policy validate PATH`: check a policy file without touching storage or catalog.

A thin adapter: `load_policy` does the work and raises `PolicyError` (exit 2), which the
CLI main prints as `error: ...` plus one line per problem (with `--format json`, stdout
gets `{"valid": false, "problems": [...]}` as well).
"""

from __future__ import annotations

import click

from governance.cli.output import emit_json, format_option
from governance.errors import PolicyError
from governance.policy import load_policy
from governance.wording import counted


@click.group("policy")
def policy() -> None:
    """Work with retention policy files."""


@policy.command("validate")
@click.argument("path", type=click.Path(dir_okay=False, path_type=str))
@format_option("table", "json")
def validate(path: str, fmt: str) -> None:
    """Check the policy at PATH: exit 0 when valid, 2 with every problem when not."""
    try:
        loaded = load_policy(path)
    except PolicyError as exc:
        if fmt == "json":  # the verdict on stdout for a pipe; the message on stderr too
            emit_json({"valid": False, "path": path, "problems": exc.problems})
        raise
    if fmt == "json":
        doc = {
            "valid": True,
            "path": path,
            "sha256": loaded.source_sha256,
            "roots": [root.url for root in loaded.storage],
            "rules": [rule.name for rule in loaded.rules],
        }
        emit_json(doc)
        return
    click.echo(
        f"policy OK: {counted(len(loaded.rules), 'rule')}, {counted(len(loaded.storage), 'root')}"
    )
