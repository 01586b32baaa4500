"""`govern policy validate PATH`: check a policy file without touching storage or catalog.

A thin adapter: `load_policy` does the work and raises `PolicyError` (exit 2), which the
CLI main prints as `error: ...` plus one line per problem (with `--format json`, stdout
gets `{"valid": false, "problems": [...]}` as well).
"""

from __future__ import annotations

import click

from governance.cli.output import GivenPath, emit_json, format_option, say
from governance.errors import PolicyError
from governance.policy import Policy, load_policy
from governance.wording import counted


@click.group("policy")
def policy() -> None:
    """Work with retention policy files."""


@policy.command("validate")
@click.argument("path", type=GivenPath(dir_okay=False, path_type=str))
@format_option("table", "json")
def validate(path: str, fmt: str) -> None:
    """Check the policy at PATH: exit 0 when valid, 2 with every problem when not."""
    try:
        loaded = load_policy(path)
    except PolicyError as exc:
        if fmt == "json":  # the verdict on stdout for a pipe; the message on stderr too
            emit_json({"valid": False, "path": path, "problems": exc.problems})
        raise
    warnings = not_acted_on(loaded) + without_storage_classes(loaded)
    for warning in warnings:
        say("warning", warning)
    if fmt == "json":
        doc = {
            "valid": True,
            "path": path,
            "sha256": loaded.source_sha256,
            "roots": [root.url for root in loaded.storage],
            "rules": [rule.name for rule in loaded.rules],
            "warnings": warnings,
        }
        emit_json(doc)
        return
    click.echo(
        f"policy OK: {counted(len(loaded.rules), 'rule')}, {counted(len(loaded.storage), 'root')}"
    )


def without_storage_classes(policy: Policy) -> list[str]:
    """Class changes (transitions, archives by storage class) in a policy none of whose
    roots has storage classes (no S3 bucket): a plan reports each as not applicable and
    never carries it out, which the writer of such a policy wants to know now."""
    from governance.storage import normalize_url

    roots = [normalize_url(root.url) for root in policy.storage]
    if not roots or any(url.startswith("s3://") for url in roots):
        return []
    changes = []
    for rule in policy.rules:
        what = []
        if rule.transition:
            what.append("transition to " + ", ".join(str(t.storage_class) for t in rule.transition))
        what += [
            f"archive to {tier.archive.storage_class}"
            for tier in rule.tiers or ()
            if tier.archive is not None and tier.archive.storage_class is not None
        ]
        if what:
            changes.append(f"{rule.name} ({'; '.join(what)})")
    if not changes:
        return []
    return [
        "storage classes: no root of this policy has them (none is an S3 bucket): rule "
        f"{', '.join(changes)}: reported as not applicable in every plan, never carried out"
    ]


def not_acted_on(policy: Policy) -> list[str]:
    """What a valid policy asks for that this release validates but does not do yet, where
    a reader could count on it: a notice period nobody is told about."""
    out = []
    if policy.approval.mode == "notice":
        out.append(
            "approval.mode notice: notifications are not sent yet (the notify block is "
            "validated only): a plan becomes applicable once notice_period has passed, "
            "with no one told; govern plans lists the plans waiting it out"
        )
    elif policy.notify:
        out.append("notify: validated, nothing is sent yet (no message on plans or failures)")
    if policy.dedupe is not None:
        out.append(
            "dedupe: validated, not planned yet (plans have no dedupe actions, and each "
            "says so in a note)"
        )
    if policy.budgets:
        out.append("budgets: validated, not evaluated yet (no budget alerts are raised)")
    return out
