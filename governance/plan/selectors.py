"""Rule selectors evaluated against one artifact of one run (policy.md, "Selectors").

Every given condition must hold. `mismatch` returns the first condition that fails, as a
short phrase, so that `explain` can say why a rule did not match; `None` means a match,
e.g. `mismatch(Selector(kind=["log"]), subject)` -> "kind is checkpoint, not log".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from governance.model.types import Artifact, Run, RunStatus
from governance.policy.fields import Selector
from governance.policy.select import glob_match, is_glob
from governance.policy.units import format_bytes, format_duration


@dataclass(slots=True, unsafe_hash=True)  # not frozen: see governance.model.types
class Subject:
    """One artifact as selectors see it: with its run, full URI and age at `as_of`."""

    artifact: Artifact
    run: Run | None
    uri: str
    age: timedelta

    @property
    def run_status(self) -> RunStatus:
        """An artifact outside every run has an unknown status."""
        return self.run.status if self.run is not None else RunStatus.UNKNOWN


def artifact_age(artifact: Artifact, as_of: datetime) -> timedelta:
    """`as_of` minus the newest `last_modified` among the artifact's objects."""
    return as_of - artifact.last_modified


def storage_class_of(storage_class: str | None) -> str:
    """The catalog leaves STANDARD objects' class empty on some stores."""
    return storage_class or "STANDARD"


def tags_match(wanted: dict[str, str], tags: dict[str, str] | None) -> bool:
    """All `wanted` pairs are in `tags`; a wanted value is a glob (`prod-*`), and "*"
    matches any value."""
    if not tags:
        return not wanted
    return all(k in tags and tag_value_matches(v, tags[k]) for k, v in wanted.items())


def tag_value_matches(pattern: str, value: str) -> bool:
    """Whether a tag's value matches the policy's `pattern`: "*" any value at all, a glob
    the whole value (as `glob_match`), other text itself."""
    return pattern == "*" or pattern == value or (is_glob(pattern) and glob_match(pattern, value))


def written_ago(age: timedelta, what: str = "last written") -> str:
    """`last written 5 days ago`; for a write after the plan's `as_of` (a plan as of a
    past time), `written 5 days after as_of`, not `0 minutes ago`."""
    if age < _ZERO:
        return f"{what.removeprefix('last ')} {human_age(-age)} after as_of"
    return f"{what} {human_age(age)} ago"


def aged(age: timedelta) -> str:
    """`5 days old`, or `written 5 days after as_of` (see `written_ago`)."""
    if age < _ZERO:
        return f"written {human_age(-age)} after as_of"
    return f"{human_age(age)} old"


_ZERO = timedelta(0)


def human_age(td: timedelta) -> str:
    """A readable age: '40 days', '1 day', '5 hours', '12 minutes'."""
    seconds = td.total_seconds()
    if seconds >= 86_400:
        days = int(seconds // 86_400)
        return f"{days} day" if days == 1 else f"{days} days"
    if seconds >= 3_600:
        hours = int(seconds // 3_600)
        return f"{hours} hour" if hours == 1 else f"{hours} hours"
    minutes = max(int(seconds // 60), 0)
    return f"{minutes} minute" if minutes == 1 else f"{minutes} minutes"


def mismatch(sel: Selector, s: Subject) -> str | None:
    """The first condition of `sel` that `s` fails, or None when every condition holds."""
    art = s.artifact
    if sel.kind is not None and art.kind not in sel.kind:
        return f"kind is {art.kind.value}, not {'/'.join(k.value for k in sel.kind)}"
    if sel.run is not None and (s.run is None or not glob_match(sel.run, s.run.name)):
        name = s.run.name if s.run is not None else "(no run)"
        return f"run {name} does not match {sel.run}"
    if sel.path is not None and not _path_matches(sel.path, s.uri):
        return f"path does not match {sel.path}"
    if sel.run_status is not None and s.run_status not in sel.run_status:
        wanted = "/".join(r.value for r in sel.run_status)
        return f"run status is {s.run_status.value}, not {wanted}"
    for key, globs in sel.attributes.items():
        value = s.run.attributes.get(key) if s.run is not None else None
        if value is None or not any(glob_match(g, value) for g in globs):
            return f"{key} is {value or '(unset)'}, not {'/'.join(globs)}"
    if sel.tags is not None and not any(
        tags_match(dict(sel.tags), dict(o.tags or {})) for o in art.objects
    ):
        return f"no object has tags {dict(sel.tags)}"
    if sel.min_size is not None or sel.max_size is not None:
        size = art.bytes
        if sel.min_size is not None and size < sel.min_size:
            return f"{format_bytes(size)} is under min_size {format_bytes(sel.min_size)}"
        if sel.max_size is not None and size > sel.max_size:
            return f"{format_bytes(size)} is over max_size {format_bytes(sel.max_size)}"
    if sel.older_than is not None and s.age < sel.older_than:
        return f"{aged(s.age)}, not older than {format_duration(sel.older_than)}"
    if sel.storage_class is not None:
        wanted_classes = {c.value for c in sel.storage_class}
        if not any(storage_class_of(o.storage_class) in wanted_classes for o in art.objects):
            return f"no object in {'/'.join(sorted(wanted_classes))}"
    return None


def _path_matches(pattern: str, uri: str) -> bool:
    """Whether the glob matches the artifact's URL, with or without the trailing '/' of a
    folder (as `protect.paths` does: `runs/*/checkpoint-*` names checkpoint folders).
    Its member files' URLs are not tried: a rule acts on the whole artifact."""
    if glob_match(pattern, uri):
        return True
    bare = uri.rstrip("/")
    return bare != uri and glob_match(pattern, bare)


def run_matches(sel: Selector, run: Run | None) -> bool:
    """Whether the conditions of `sel` on the run alone (run, run_status, attributes) hold:
    one answer for every artifact of the run, where `mismatch` asks per artifact."""
    if sel.run is not None and (run is None or not glob_match(sel.run, run.name)):
        return False
    status = run.status if run is not None else RunStatus.UNKNOWN
    if sel.run_status is not None and status not in sel.run_status:
        return False
    for key, globs in sel.attributes.items():
        value = run.attributes.get(key) if run is not None else None
        if value is None or not any(glob_match(g, value) for g in globs):
            return False
    return True


def per_artifact(sel: Selector) -> bool:
    """Whether `sel` has conditions besides kind and the run's (path, tags, sizes, age,
    storage class): only then must each artifact go through `mismatch`."""
    return not (
        sel.path is None
        and sel.tags is None
        and sel.min_size is None
        and sel.max_size is None
        and sel.older_than is None
        and sel.storage_class is None
    )


def describe(sel: Selector) -> str:
    """The selector as a short phrase for 'matched' explanations."""
    parts: list[str] = []
    if sel.kind is not None:
        parts.append("kind " + "/".join(k.value for k in sel.kind))
    if sel.run is not None:
        parts.append(f"run {sel.run}")
    if sel.path is not None:
        parts.append(f"path {sel.path}")
    if sel.run_status is not None:
        parts.append("run status " + "/".join(r.value for r in sel.run_status))
    parts += [f"{k} {'/'.join(v)}" for k, v in sel.attributes.items()]
    if sel.tags is not None:
        parts.append(f"tags {dict(sel.tags)}")
    if sel.min_size is not None:
        parts.append(f">= {format_bytes(sel.min_size)}")
    if sel.max_size is not None:
        parts.append(f"<= {format_bytes(sel.max_size)}")
    if sel.older_than is not None:
        parts.append(f"older than {format_duration(sel.older_than)}")
    if sel.storage_class is not None:
        parts.append("class " + "/".join(c.value for c in sel.storage_class))
    return ", ".join(parts) if parts else "everything"
