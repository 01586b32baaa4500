"""Typed, validated models of every block of the policy language (spec/policy.md).

Numbers and booleans are strict (`keep_last: true` or `"5000"` is a type error, not 1 or
5000; an integer is a valid float). Every model forbids unknown keys (selectors gather layout placeholders instead). Durations
are `timedelta`, sizes `int` bytes; both serialize back to short strings. Cross-field
errors carry a `subloc` so the loader can name the exact key (see `fields.fail`).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from governance.model.types import ClassifyOptions, Component, Kind, RunStatus
from governance.policy.cross import (
    Loc,
    Problem,
    archive_overlaps,
    duplicate_rule_names,
    duplicate_tier_names,
    quarantine_at_root,
    root_clashes,
    versioned_needs_s3,
)
from governance.policy.fields import (
    DEFAULT_PRICING,
    DESTRUCTIVE_ACTIONS,
    ActionName,
    Duration,
    EndpointUrl,
    FolderUrl,
    PolicyModel,
    PositiveDuration,
    RunTemplate,
    Selector,
    Size,
    StorageClass,
    StorageClassName,
    TagGlob,
    UrlGlob,
    as_tuple,
    did_you_mean,
    fail,
    unknown_select_key,
    url_glob,
)
from governance.policy.select import TEMPLATE_FIELD_RE
from governance.policy.units import format_duration
from governance.settings import MAX_CONCURRENCY


def _refuse_first(problems: list[Problem], within: Loc = ()) -> None:
    """Raise the first of a cross-block check's problems (a validator stops at one; the
    loader reports them all), placed below `within`, the loc of the validated value."""
    if problems:
        loc, message = problems[0]
        raise fail(message, *loc[len(within) :])


# ----------------------------------------------------------------------------- blocks


_REGION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-]{0,61}[a-zA-Z0-9])?")


class StorageRoot(PolicyModel):
    """One root that is scanned; `url` is normalized (`file://` for plain paths, ends in '/')
    and checked openable (a valid bucket name, an absolute `file://` path, a known scheme)."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.\-]+$")
    url: FolderUrl
    endpoint_url: EndpointUrl | None = None
    profile: str | None = None
    region: str | None = None
    concurrency: int | None = Field(default=None, ge=1, le=MAX_CONCURRENCY, strict=True)

    @field_validator("region")
    @classmethod
    def _region_name(cls, value: str | None) -> str | None:
        """botocore's own check of a region name, made here where the line is known."""
        if value is not None and not _REGION.fullmatch(value):
            raise ValueError(
                f"{value!r} is not a region name: letters, digits and '-' (e.g. us-east-1)"
            )
        return value


class RunStatusConfig(PolicyModel):
    """Overrides of the built-in run status detection."""

    completed_markers: tuple[str, ...] = ("COMPLETED", "_SUCCESS")
    failed_markers: tuple[str, ...] = ("FAILED",)
    abandoned_after: PositiveDuration = timedelta(days=7)


class Layout(PolicyModel):
    """How paths name runs: templates relative to each root, first match wins."""

    runs: tuple[RunTemplate, ...] = ()
    run_status: RunStatusConfig = Field(default_factory=RunStatusConfig)

    @property
    def placeholders(self) -> frozenset[str]:
        """Every placeholder of every template except `run` (that one is a selector key)."""
        names = {m for t in self.runs for m in TEMPLATE_FIELD_RE.findall(t)}
        return frozenset(names - {"run"})


class Protect(PolicyModel):
    """Evaluated before every rule; a protected artifact is never acted on."""

    min_age: Duration = timedelta(days=3)
    tags: dict[str, TagGlob] = Field(default_factory=dict)
    paths: tuple[UrlGlob, ...] = ()
    run_status: Annotated[tuple[RunStatus, ...], BeforeValidator(as_tuple)] = ()
    # what `govern restore` brought back is protected this long from its restore (0: not)
    restored_for: Duration = timedelta(days=30)


class Expire(PolicyModel):
    after: Duration


class TransitionStep(PolicyModel):
    after: Duration
    storage_class: StorageClassName


class BestMetric(PolicyModel):
    name: str = Field(min_length=1)
    mode: Literal["min", "max"]


class Archive(PolicyModel):
    """Archive a kept checkpoint: in place to a cold class, or copy to `url` then remove."""

    storage_class: StorageClassName | None = None
    url: FolderUrl | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Archive:
        if (self.storage_class is None) == (self.url is None):
            raise fail("archive takes exactly one of storage_class or url")
        return self


KEEP_KEYS = ("keep_last", "keep_every_steps", "keep_daily", "keep_weekly", "keep")
"""A tier's keys that select checkpoints: a tier must give one."""

OTHERWISE_REQUIRED = (
    "'otherwise: delete|keep' is required with tiers (what happens to a checkpoint no tier keeps)"
)


def keeps_nothing(name: object) -> str:
    shown = f"tier {name!r}" if isinstance(name, str) else "the tier"
    return (
        f"{shown} keeps nothing: give keep_last, keep_every_steps, keep_daily, keep_weekly or keep"
    )


class Tier(PolicyModel):
    """One retention tier: several keep keys select the union (restic-style buckets)."""

    name: str = Field(min_length=1)
    keep_last: int | None = Field(default=None, ge=1, strict=True)
    max_age: PositiveDuration | None = None
    keep_every_steps: int | None = Field(default=None, ge=1, strict=True)
    keep_daily: int | None = Field(default=None, ge=1, strict=True)
    keep_weekly: int | None = Field(default=None, ge=1, strict=True)
    keep: Annotated[tuple[Literal["final", "best"], ...], BeforeValidator(as_tuple)] = ()
    best_metric: BestMetric | None = None
    keep_components: Annotated[tuple[Component, ...], BeforeValidator(as_tuple)] | None = None
    archive: Archive | None = None

    @field_validator("keep_components")
    @classmethod
    def _keeps_weights(cls, value: tuple[Component, ...] | None) -> tuple[Component, ...] | None:
        if value is not None and Component.WEIGHTS not in value:
            raise ValueError("keep_components must include weights (stripping never removes them)")
        return value

    @model_validator(mode="after")
    def _keeps_something(self) -> Tier:
        keys = (self.keep_last, self.keep_every_steps, self.keep_daily, self.keep_weekly)
        if all(k is None for k in keys) and not self.keep:
            raise fail(keeps_nothing(self.name))
        if "best" in self.keep and self.best_metric is None:
            raise fail("keep: [best] needs best_metric: {name: ..., mode: min|max}", "keep")
        if self.best_metric is not None and "best" not in self.keep:
            raise fail("best_metric is only used with keep: [best]", "best_metric")
        return self

    @property
    def strips(self) -> bool:
        """Whether checkpoints this tier keeps lose some components."""
        return self.keep_components is not None and set(self.keep_components) != set(Component)


class Rule(PolicyModel):
    """One rule: `expire`, `transition` (optionally with `expire`), or `tiers` + `otherwise`."""

    name: str = Field(min_length=1)
    description: str | None = None
    select: Selector = Field(default_factory=Selector)
    expire: Expire | None = None
    transition: Annotated[tuple[TransitionStep, ...], BeforeValidator(as_tuple)] | None = None
    tiers: tuple[Tier, ...] | None = None
    otherwise: Literal["delete", "keep"] | None = None

    @field_validator("transition")
    @classmethod
    def _down_the_waterfall(
        cls, steps: tuple[TransitionStep, ...] | None
    ) -> tuple[TransitionStep, ...] | None:
        if steps is None:
            return steps
        if not steps:
            raise ValueError("give at least one {after, storage_class} step")
        previous_class, previous_after = StorageClass.STANDARD, None
        for i, step in enumerate(steps):
            if step.storage_class.coldness <= previous_class.coldness:
                raise fail(
                    f"transition to {step.storage_class} goes up the waterfall from "
                    f"{previous_class}: each step must be colder "
                    f"({' > '.join(StorageClass)})",
                    i, "storage_class",
                )  # fmt: skip
            if previous_after is not None and step.after <= previous_after:
                raise fail(
                    f"after {format_duration(step.after)} must be later than the previous "
                    f"step ({format_duration(previous_after)})",
                    i, "after",
                )  # fmt: skip
            previous_class, previous_after = step.storage_class, step.after
        return steps

    @model_validator(mode="after")
    def _action_shape(self) -> Rule:
        if self.expire is None and self.transition is None and self.tiers is None:
            raise fail(f"rule {self.name!r} has no action: give expire, transition or tiers")
        if self.tiers is not None:
            if not self.tiers:
                raise fail("tiers is empty: give at least one tier", "tiers")
            if self.otherwise is None:
                raise fail(OTHERWISE_REQUIRED, "tiers")
            for key in ("expire", "transition"):
                if getattr(self, key) is not None:
                    raise fail(f"{key} cannot be combined with tiers; use a separate rule", key)
            if self.select.kind is not None and Kind.CHECKPOINT not in self.select.kind:
                raise fail(
                    "tiers only apply to checkpoints: add checkpoint to kind", "select", "kind"
                )
            names = [(("tiers", i, "name"), tier.name) for i, tier in enumerate(self.tiers)]
            _refuse_first(duplicate_tier_names(names))
        elif self.otherwise is not None:
            raise fail("'otherwise' only applies to a rule with tiers", "otherwise")
        if self.expire is not None and self.transition:
            last = self.transition[-1].after
            if self.expire.after <= last:
                raise fail(
                    f"expire after {format_duration(self.expire.after)} comes before the last "
                    f"transition ({format_duration(last)})",
                    "expire", "after",
                )  # fmt: skip
        return self


class Dedupe(PolicyModel):
    """Content duplicates among what the rules keep; `keep` picks the canonical copy."""

    select: Selector = Field(default_factory=Selector)
    keep: str = "oldest"
    action: Literal["delete", "report", "stub"] = "report"

    @field_validator("keep")
    @classmethod
    def _keep_choice(cls, value: str) -> str:
        if value in ("oldest", "newest", "shortest-path"):
            return value
        if not any(ch in value for ch in "*?[/"):
            raise ValueError(
                f"keep must be oldest, newest, shortest-path or a path glob, got {value!r}"
                + did_you_mean(value, ["oldest", "newest", "shortest-path"])
            )
        return url_glob(value)


class Approval(PolicyModel):
    """Who must approve what before apply; `mode: notice` applies after a notice period."""

    require_for: Annotated[tuple[ActionName, ...], BeforeValidator(as_tuple)] = DESTRUCTIVE_ACTIONS
    approvers: int = Field(default=1, ge=1, strict=True)
    allow_self_approval: bool = Field(default=False, strict=True)
    expires_after: PositiveDuration = timedelta(hours=72)
    mode: Literal["approve", "notice"] = "approve"
    notice_period: PositiveDuration = timedelta(days=7)


QUARANTINE_DIR = ".govern-quarantine/"


class ApplyConfig(PolicyModel):
    """How deletes are carried out; `quarantine_url` None means the per-root default."""

    delete_mode: Literal["quarantine", "versioned", "permanent"] = "quarantine"
    quarantine_url: FolderUrl | None = None
    quarantine_for: PositiveDuration = timedelta(days=14)
    concurrency: int | None = Field(default=None, ge=1, le=MAX_CONCURRENCY, strict=True)

    def quarantine_url_for(self, root_url: str) -> str:
        """Where a root's deletes go: the top of its bucket, or beside a local root folder."""
        if self.quarantine_url is not None:
            return self.quarantine_url
        scheme, _, rest = root_url.partition("://")
        if scheme == "file":
            parent = rest.rstrip("/").rsplit("/", 1)[0]
            return f"file://{parent}/{QUARANTINE_DIR}"
        return f"{scheme}://{rest.split('/', 1)[0]}/{QUARANTINE_DIR}"


class Safety(PolicyModel):
    """A plan above either limit is refused, never trimmed."""

    max_delete_bytes: Size | None = None
    max_delete_fraction: float = Field(default=0.5, gt=0, le=1, strict=True)


class Budget(PolicyModel):
    select: Selector = Field(default_factory=Selector)
    monthly_usd: float = Field(gt=0, strict=True)
    name: str | None = None


class NotifyTarget(PolicyModel):
    """Where plan, apply, budget and failure notices go."""

    type: Literal["slack", "webhook", "email"]
    url: str | None = Field(default=None, pattern=r"^https?://")
    to: Annotated[tuple[str, ...], BeforeValidator(as_tuple)] | None = None
    on: Annotated[
        tuple[Literal["plan", "apply", "budget", "failure"], ...], BeforeValidator(as_tuple)
    ] = ("plan", "apply", "budget", "failure")

    @model_validator(mode="after")
    def _destination(self) -> NotifyTarget:
        if self.type == "email":
            if not self.to:
                raise fail("an email target needs 'to'")
            if self.url is not None:
                raise fail("an email target takes 'to', not 'url'", "url")
        else:
            if self.url is None:
                raise fail(f"a {self.type} target needs 'url'")
            if self.to is not None:
                raise fail(f"a {self.type} target takes 'url', not 'to'", "to")
        return self


# ----------------------------------------------------------------------------- the policy


MAX_PRICE = 1_000_000.0
"""The most a policy may price a GB-month at (USD): the bill is summed in floats and
printed to the cent, and a price near the float limit made it infinite."""


def _whole_number(value: object) -> object:
    """`version: 1` as written: YAML's `true` and `1.0` equal 1 in Python, and pydantic's
    literal takes them."""
    if type(value) is not int and isinstance(value, bool | float):
        shown = str(value).lower() if isinstance(value, bool) else repr(value)
        raise ValueError(f"unsupported policy version {shown} (this govern reads version 1)")
    return value


def _one_price_per_class(value: object, info: ValidationInfo) -> object:
    """Storage class names are read in any case: `standard` and `STANDARD` both given
    would price one class twice, and one of the two was dropped unseen. (The loader
    reports each such key itself, with the other problems of `pricing`: raised here, it
    would hide them.)"""
    if not isinstance(value, dict) or (info.context or {}).get("loader"):
        return value
    twice = prices_twice(value)
    if twice:
        key, message = twice[0]
        raise fail(message, key, "[key]")
    return value


def prices_twice(pricing: dict[Any, Any]) -> list[tuple[str, str]]:
    """(key, message) for each class `pricing` names a second time, in another case."""
    seen: dict[str, str] = {}
    out = []
    for key in pricing:
        if not isinstance(key, str):
            continue
        first = seen.setdefault(key.upper(), key)
        if first != key:
            out.append(
                (key, f"{key!r} prices the class {first!r} prices already: give each class once")
            )
    return out


_PRICE_MEMO: dict[int, tuple[object, dict[str | None, float]]] = {}
"""id(policy.pricing) -> (that mapping, held so the id stays its own; class -> price)."""


class Policy(PolicyModel):
    """A whole validated policy. `source_path`/`source_sha256` are set by the loader."""

    version: Annotated[Literal[1], BeforeValidator(_whole_number)]
    storage: tuple[StorageRoot, ...] = Field(min_length=1)
    layout: Layout = Field(default_factory=Layout)
    protect: Protect = Field(default_factory=Protect)
    rules: tuple[Rule, ...] = ()
    dedupe: Dedupe | None = None
    approval: Approval = Field(default_factory=Approval)
    apply: ApplyConfig = Field(default_factory=ApplyConfig)
    safety: Safety = Field(default_factory=Safety)
    pricing: Annotated[
        dict[
            StorageClassName,
            Annotated[float, Field(strict=True, ge=0, le=MAX_PRICE, allow_inf_nan=False)],
        ],
        BeforeValidator(_one_price_per_class),
    ] = Field(default_factory=dict)
    budgets: tuple[Budget, ...] = ()
    notify: tuple[NotifyTarget, ...] = ()

    _source_path: Path | None = PrivateAttr(default=None)
    _source_sha256: str | None = PrivateAttr(default=None)

    @field_validator("storage")
    @classmethod
    def _unique_roots(cls, roots: tuple[StorageRoot, ...]) -> tuple[StorageRoot, ...]:
        names = [(("storage", i, "name"), root.name) for i, root in enumerate(roots)]
        urls = [(("storage", i, "url"), root.url) for i, root in enumerate(roots)]
        _refuse_first(root_clashes(names, urls), within=("storage",))
        return roots

    @field_validator("rules")
    @classmethod
    def _unique_rules(cls, rules: tuple[Rule, ...]) -> tuple[Rule, ...]:
        names = [(("rules", i, "name"), rule.name) for i, rule in enumerate(rules)]
        _refuse_first(duplicate_rule_names(names), within=("rules",))
        return rules

    @model_validator(mode="after")
    def _versioned_deletes_need_s3(self) -> Policy:
        """See `cross.versioned_needs_s3` (the loader also runs it on a policy invalid
        elsewhere)."""
        roots = [root.url for root in self.storage]
        _refuse_first(versioned_needs_s3(self.apply.delete_mode, roots))
        return self

    @model_validator(mode="after")
    def _archives_outside_roots(self) -> Policy:
        """See `cross.archive_overlaps` (the loader also runs it on a policy invalid
        elsewhere)."""
        archives = [
            (("rules", i, "tiers", j, "archive", "url"), tier.archive.url)
            for i, rule in enumerate(self.rules)
            for j, tier in enumerate(rule.tiers or ())
            if tier.archive is not None and tier.archive.url is not None
        ]
        _refuse_first(archive_overlaps(archives, [root.url for root in self.storage]))
        return self

    @model_validator(mode="after")
    def _quarantine_not_a_root(self) -> Policy:
        """See `cross.quarantine_at_root` (the loader also runs it on a policy invalid
        elsewhere)."""
        roots = [root.url for root in self.storage]
        _refuse_first(quarantine_at_root(self.apply.quarantine_url, roots))
        return self

    @model_validator(mode="after")
    def _select_keys_are_placeholders(self, info: ValidationInfo) -> Policy:
        """Without the loader's context (built in code), check placeholders here instead."""
        if (info.context or {}).get("placeholders") is not None:
            return self
        declared = self.layout.placeholders
        for where, selector in self.selectors():
            for key in selector.attributes:
                if key not in declared:
                    raise fail(unknown_select_key(key, declared), *where, key, "[key]")
        return self

    # -- conveniences for the planner -----------------------------------------------------

    @property
    def source_path(self) -> Path | None:
        return self._source_path

    @property
    def source_sha256(self) -> str | None:
        return self._source_sha256

    def selectors(self) -> list[tuple[tuple[str | int, ...], Selector]]:
        """Every selector with its location: rules, dedupe, budgets."""
        found: list[tuple[tuple[str | int, ...], Selector]] = [
            (("rules", i, "select"), r.select) for i, r in enumerate(self.rules)
        ]
        if self.dedupe is not None:
            found.append((("dedupe", "select"), self.dedupe.select))
        found += [(("budgets", i, "select"), b.select) for i, b in enumerate(self.budgets)]
        return found

    def rule(self, name: str) -> Rule:
        """The rule with that name (KeyError if none)."""
        for rule in self.rules:
            if rule.name == name:
                return rule
        raise KeyError(name)

    def price(self, storage_class: str | None) -> float:
        """USD per GB-month for a class (None or unknown is priced as STANDARD).

        Memoised per `pricing` mapping and class name (the planner asks for every object
        it acts on), outside the model so that equality and copies are unaffected.
        """
        pricing = self.pricing
        entry = _PRICE_MEMO.get(id(pricing))
        if entry is None or entry[0] is not pricing:
            if len(_PRICE_MEMO) >= 64:
                _PRICE_MEMO.clear()
            entry = _PRICE_MEMO[id(pricing)] = (pricing, {})
        memo = entry[1]
        cached = memo.get(storage_class)
        if cached is None:
            cached = memo[storage_class] = self._price(storage_class)
        return cached

    def _price(self, storage_class: str | None) -> float:
        try:
            sc = StorageClass(storage_class or "STANDARD")
        except ValueError:
            sc = StorageClass.STANDARD
        return self.pricing.get(sc, DEFAULT_PRICING[sc])

    def requires_approval(self, action: str) -> bool:
        return action in self.approval.require_for

    def classify_options(self, as_of: datetime) -> ClassifyOptions:
        """What classification needs from this policy, evaluated at `as_of` (tz-aware)."""
        if as_of.tzinfo is None:
            raise ValueError("as_of must be timezone-aware (UTC)")
        status = self.layout.run_status
        return ClassifyOptions(
            as_of=as_of,
            run_templates=tuple(self.layout.runs),
            completed_markers=tuple(status.completed_markers),
            failed_markers=tuple(status.failed_markers),
            abandoned_after=status.abandoned_after,
            grace=self.protect.min_age,
        )
