"""Retention tiers over one run's complete checkpoints (policy.md, "Ages and tiers").

Each tier looks, independently, at the checkpoints within its `max_age` and selects the
union of its keep keys (restic's semantics for the time buckets). `select` returns, per
checkpoint key, the tiers that selected it in policy order with a reason for each; the
first one decides how it is kept (that is the caller's business).

Ordering: by step where every checkpoint has one, by age where none has (newest =
highest). Ties go to the later write, then the key, so the result never depends on input
order. Where only some have a step (a Lightning run's `last.ckpt` beside its
`epoch=E-step=S.ckpt` files), the steps order the checkpoints that have one, and each one
without a step sits just above the highest-step checkpoint written before it (or at the
same time), below all of them if none was: `last.ckpt`, written with or after the last
save, is the newest, a pretrained file put there first the oldest. Ordering the whole run
by age instead let a copy that rewrote the times (`aws s3 sync`) delete the highest steps.

Lightning's `save_last` copy (`save_last_aliases`): a `last.ckpt` the same size as the
newest other checkpoint of its folder, written within `SAVE_LAST_WINDOW` of it (or with the
same content by ETag), is that checkpoint saved twice in one hook: its alias. It takes no
place in any tier (not one of the `keep_last`, not the newest of a day, not the final): the
tiers see the pair as one checkpoint, ranked as the newer of the two in the run's order and
in a window when either is, and the copy is selected with it, by the same tiers. A
`last.ckpt` that is not such a copy (the newest state, whose top-k file Lightning did not
save or removed) is a checkpoint of its own, ranked as above.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import chain
from operator import attrgetter
from typing import Any, NamedTuple, cast

from governance.model.detectors.base import parent
from governance.model.detectors.lightning import save_last_name
from governance.model.types import Artifact, Run, RunStatus
from governance.policy.models import Tier
from governance.policy.units import format_duration

OrderKey = Callable[[Artifact], tuple[Any, ...]]
Written = Mapping[int, datetime]
"""`id(checkpoint)` -> its `last_modified`, taken once per call: the property is a max
over the checkpoint's objects, and sorting and bucketing would ask for it again and again."""


SAVE_LAST_WINDOW = timedelta(minutes=10)
"""How far apart a `last.ckpt` and the checkpoint it copies may be written. Lightning saves
`last.ckpt` right after the top-k file, in the same hook: one save's time apart, where a
newer state comes at least one training interval later (a copy made by `aws s3 sync` or
`shutil.copy` lands within a copy's time too, before or after)."""


def written(checkpoints: Iterable[Artifact]) -> dict[int, datetime]:
    """The `Written` map of these checkpoints."""
    return {id(c): c.last_modified for c in checkpoints}


def order_key(checkpoints: Sequence[Artifact], when: Written | None = None) -> OrderKey:
    """Newest = highest: by step when every checkpoint has one, by write when none has,
    else both (see the module docstring); the key orders `checkpoints` (or a subset)."""
    at = when if when is not None else written(checkpoints)
    stepped = [c for c in checkpoints if c.step is not None]
    if len(stepped) == len(checkpoints):
        return lambda c: (c.step, at[id(c)], c.key)
    if not stepped:
        return lambda c: (at[id(c)], c.key)
    return _mixed_key(stepped, [c for c in checkpoints if c.step is None], at)


def _mixed_key(stepped: list[Artifact], stepless: list[Artifact], at: Written) -> OrderKey:
    """The order of a run where only `stepped` have a step (see `mixed_ranks`)."""
    keys = mixed_ranks(stepped, stepless, _STEP, lambda c: at[id(c)], _KEY)
    return lambda c: keys[id(c)]


def mixed_ranks(
    stepped: Sequence[Any],
    stepless: Sequence[Any],
    step: Callable[[Any], int],
    at: Callable[[Any], datetime],
    name: Callable[[Any], str],
) -> dict[int, tuple[Any, ...]]:
    """By `id` of each checkpoint of a run where only `stepped` have a step, its sort key
    (oldest first): each stepless checkpoint ranks just above the highest-step one written
    at or before it (-1: none was). Checkpoints are anything `step`, `at` (the newest
    write) and `name` read: the planner's artifacts, a report's timeline cells."""
    by_step = sorted(stepped, key=lambda c: (step(c), at(c), name(c)))
    rank = {id(c): i for i, c in enumerate(by_step)}
    by_time = sorted(by_step, key=at)
    times = [at(c) for c in by_time]
    highest: list[int] = []  # highest rank among by_time[: i + 1]
    for c in by_time:
        highest.append(max(rank[id(c)], highest[-1] if highest else -1))
    for c in stepless:
        before = bisect_right(times, at(c))
        rank[id(c)] = highest[before - 1] if before else -1
    return {
        id(c): (rank[id(c)], 0 if i < len(stepped) else 1, at(c), name(c))
        for i, c in enumerate(chain(stepped, stepless))
    }


def newest(checkpoints: Sequence[Artifact], when: Written | None = None) -> Artifact | None:
    """The newest checkpoint by `order_key` (None for an empty list)."""
    if not checkpoints:
        return None
    return max(checkpoints, key=order_key(checkpoints, when))


_STEP = attrgetter("step")
_KEY = attrgetter("key")
_LIGHTNING = "lightning"


def save_last_aliases(
    checkpoints: Sequence[Artifact], at: Written
) -> list[tuple[Artifact, Artifact]]:
    """(alias, original) for each Lightning `save_last` copy among `checkpoints` (by key):
    a stepless checkpoint of the Lightning layout named as `save_last` names it
    (`last.ckpt`, `last-v1.ckpt`), of the same size as the newest other checkpoint of its
    folder (highest step; by write where none there has one), written within
    `SAVE_LAST_WINDOW` of it or with the same content by ETag. Only runs with a stepless
    checkpoint pay for the look."""
    lasts = [
        c
        for c in checkpoints
        if c.step is None and c.layout == _LIGHTNING and save_last_name(c.key)
    ]
    if not lasts:
        return []
    folders = {parent(c.key) for c in lasts}
    skip = {id(c) for c in lasts}
    tops: dict[str, tuple[tuple[Any, ...], Artifact]] = {}
    for c in checkpoints:
        if id(c) in skip or (folder := parent(c.key)) not in folders:
            continue
        rank = (c.step is not None, c.step or 0, at[id(c)], c.key)
        held = tops.get(folder)
        if held is None or rank > held[0]:
            tops[folder] = (rank, c)
    pairs: list[tuple[Artifact, Artifact]] = []
    for a in sorted(lasts, key=_KEY):
        held = tops.get(parent(a.key))
        if held is None:
            continue
        o = held[1]
        if a.bytes == o.bytes and (
            abs(at[id(a)] - at[id(o)]) <= SAVE_LAST_WINDOW or _same_content(a, o)
        ):
            pairs.append((a, o))
    return pairs


def _same_content(a: Artifact, b: Artifact) -> bool:
    """Whether two one-file checkpoints have the same content by their store's ETag (an
    MD5 of the content on S3, whenever the times were rewritten by a copy); a filesystem's
    `mtime:` token says nothing of the content. Different ETags prove nothing (SSE-KMS)."""
    if len(a.objects) != 1 or len(b.objects) != 1:
        return False
    tag = a.objects[0].etag
    return bool(tag) and tag == b.objects[0].etag and not tag.startswith("mtime:")


def alias_text(alias: Artifact, original: Artifact, at: Written) -> str:
    """'last.ckpt is Lightning's save_last copy of step 900 (same size, written 4s after
    it)': why `alias` goes with `original`."""
    delta = at[id(alias)] - at[id(original)]
    if abs(delta) < timedelta(seconds=1):
        when = "written within a second of it"
    elif delta > timedelta(0):
        when = f"written {format_duration(delta)} after it"
    else:
        when = f"written {format_duration(-delta)} before it"
    same = "same ETag" if _same_content(alias, original) else "same size"
    return f"{_label(alias)} is Lightning's save_last copy of {_label(original)} ({same}, {when})"


def _label(c: Artifact) -> str:
    return f"step {c.step}" if c.step is not None else c.key.rstrip("/").rsplit("/", 1)[-1]


@dataclass(slots=True)
class TierOutcome:
    """What the tiers of one rule select in one run.

    `picks[key]` lists (tier index, reason) in policy order; `trace[key]` has one
    (tier name, "selected: ..." / "not selected: ...") per tier, filled only when traced.
    An alias (`save_last_aliases`) is picked by the tiers that pick its original.
    """

    picks: dict[str, list[tuple[int, str]]] = field(default_factory=dict)
    trace: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    aliases: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Lightning `save_last` copies: alias key -> (original key, `alias_text`)."""
    final: str | None = None
    """The key of the run's final checkpoint, when a tier keeps `final` and there is one."""
    bests: dict[int, tuple[str, float]] = field(default_factory=dict)
    """Tier index -> (key, value) of the best checkpoint by its metric, for the tiers that
    keep `best` and archive to another location (`archive.url`)."""


def _bucket_range(step: int, k: int) -> str:
    lo = (step // k) * k
    return f"{lo}-{lo + k - 1}"


def _tier_select(
    tier: Tier,
    candidates: list[Artifact],
    run: Run | None,
    at: Written,
    ordered: list[Artifact] | None = None,
    final: Artifact | None = None,
    *,
    stepwise: bool = True,
    archived: ArchivedBests | None = None,
) -> dict[str, list[str]]:
    """checkpoint key -> why this tier selects it (several keys: several reasons).

    `ordered`: the candidates newest first (by `order_key`), when the caller has them;
    `stepwise`: False when `ordered` is not by step even where every candidate has one (a
    Lightning `save_last` copy raised its original); `final`: the run's final checkpoint
    (the newest of all, when the run is completed), which the tier keeps only when it is
    among its candidates."""
    chosen: dict[str, list[str]] = {}
    if not candidates:
        return chosen
    stepwise = stepwise or ordered is None
    if ordered is None:
        ordered = sorted(candidates, key=order_key(candidates, at), reverse=True)
    within = f" within {format_duration(tier.max_age)}" if tier.max_age is not None else ""

    def add(c: Artifact, why: str) -> None:
        chosen.setdefault(c.key, []).append(why)

    if tier.keep_last is not None:
        for c in ordered[: tier.keep_last]:
            add(
                c, f"{_label(c)} is one of the newest {tier.keep_last} complete checkpoints{within}"
            )
    if tier.keep_every_steps is not None:
        k = tier.keep_every_steps
        buckets: dict[int, tuple[int, Artifact]] = {}
        if stepwise and None not in map(_STEP, candidates):
            # `ordered` is by (step, write, key), newest first, equals in candidate order:
            # each bucket's first is the one the loop below keeps
            steps = list(zip(map(_STEP, ordered), ordered, strict=True))
            stepped = cast(list[tuple[int, Artifact]], steps)
            for step, c in stepped:
                if step // k not in buckets:
                    buckets[step // k] = (step, c)
        else:
            for c in candidates:
                if c.step is None:
                    continue
                held = buckets.get(c.step // k)
                if held is None or (c.step, at[id(c)], c.key) > (held[0], at[id(held[1])], held[1].key):  # fmt: skip
                    buckets[c.step // k] = (c.step, c)
        for step, c in buckets.values():
            add(c, f"step {step} is kept as the newest in bucket {_bucket_range(step, k)}")
    for count, period, fmt in (
        (tier.keep_daily, "day", lambda d: d.astimezone(UTC).strftime("%Y-%m-%d")),
        (
            tier.keep_weekly,
            "ISO week",
            lambda d: "{}-W{:02d}".format(*d.astimezone(UTC).isocalendar()[:2]),
        ),
    ):  # UTC days and weeks, whatever zone a time was given in
        if count is None:
            continue
        key = order_key(candidates, at)
        by_time = sorted(candidates, key=lambda c: (at[id(c)], key(c)), reverse=True)
        seen: dict[str, Artifact] = {}
        for c in by_time:
            label = fmt(at[id(c)])
            if label not in seen and len(seen) < count:
                seen[label] = c
        for label, c in seen.items():
            add(
                c, f"{_label(c)} is the newest of {period} {label} (one of the {count} most recent)"
            )
    if "final" in tier.keep and final is not None and any(c is final for c in candidates):
        add(final, f"{_label(final)} is the final checkpoint of the completed run")
    if "best" in tier.keep and tier.best_metric is not None:
        metric = tier.best_metric
        best = best_checkpoint(candidates, metric.name, metric.mode, run, at, archived)
        if best is not None:
            add(best[0], best[1])
    return chosen


class ArchivedBest(NamedTuple):
    """A run's best checkpoint by one metric that an applied plan archived to another
    location (copied there, removed here): what is left is compared with it, not only
    with each other, or each night's plan would archive the next best of what is left."""

    value: float
    step: int | None
    key: str
    plan_id: str
    since: datetime  # the archiving plan's as_of: a run none of whose checkpoints is
    # older is another run in the same folder (a rerun into one output_dir): not compared


ArchivedBests = Mapping[tuple[str, str], ArchivedBest]
"""One run's archived bests by (metric, mode)."""
ArchivedRecord = tuple[tuple[str, str], ArchivedBest]
"""One archived best as the catalog records it: ((metric, mode), the best)."""


def archived_of_run(records: Sequence[ArchivedRecord], oldest: datetime) -> ArchivedBests:
    """Of the bests recorded for a run's folder (oldest first), those of the run planned
    now, whose `oldest` complete checkpoint is no newer than the archiving plan (one all
    newer is another run trained into the same folder), and of those the best by each
    (metric, mode): the best value, a tie to the higher step, then the later record."""
    out: dict[tuple[str, str], ArchivedBest] = {}
    for (metric, mode), best in records:
        if oldest > best.since:
            continue
        held = out.get((metric, mode))
        if held is None or _rank(best, mode) >= _rank(held, mode):
            out[(metric, mode)] = best
    return out


def _rank(best: ArchivedBest, mode: str) -> tuple[float, int]:
    sign = 1.0 if mode == "max" else -1.0
    return (sign * best.value, -1 if best.step is None else best.step)


def best_scored(
    candidates: Sequence[Artifact],
    metric: str,
    mode: str,
    when: Written | None = None,
    archived: ArchivedBests | None = None,
) -> tuple[Artifact, float] | None:
    """The best checkpoint by `metric` with its value (tie: the newer), or None: none
    reports the metric, or one archived away is better still (or as good, and newer)."""
    scored = [
        (c, c.metrics[metric])
        for c in candidates
        if metric in c.metrics and not math.isnan(c.metrics[metric])
    ]
    if not scored:
        return None
    key = order_key(candidates, when)
    sign = 1.0 if mode == "max" else -1.0
    c, value = max(scored, key=lambda cv: (sign * cv[1], key(cv[0])))
    gone = archived.get((metric, mode)) if archived else None
    if gone is not None and c.key != gone.key:
        mine = (sign * value, -1 if c.step is None else c.step)
        if mine <= (sign * gone.value, -1 if gone.step is None else gone.step):
            return None
    return c, value


def best_checkpoint(
    candidates: Sequence[Artifact],
    metric: str,
    mode: str,
    run: Run | None,
    when: Written | None = None,
    archived: ArchivedBests | None = None,
) -> tuple[Artifact, str] | None:
    """The best checkpoint by `metric` (tie: the newer), with the reason; None when one
    `archived` away (an earlier plan's best, applied) is better than all of them.

    Without any value of the metric, falls back to the run's recorded best checkpoint
    (Hugging Face `best_model_checkpoint`) when it is among the candidates.
    """
    if any(metric in c.metrics and not math.isnan(c.metrics[metric]) for c in candidates):
        found = best_scored(candidates, metric, mode, when, archived)
        if found is None:
            return None
        c, value = found
        return c, f"{_label(c)} has the best {metric} ({value:g}, {mode})"
    if run is not None and run.best_checkpoint is not None:
        for c in candidates:
            if c.key == run.best_checkpoint:
                return c, f"{_label(c)} is the run's recorded best checkpoint (no {metric} values)"
    return None


def select(
    tiers: Sequence[Tier],
    checkpoints: Sequence[Artifact],
    run: Run | None,
    as_of: datetime,
    *,
    trace: bool = False,
    when: Written | None = None,
    archived: ArchivedBests | None = None,
    others: Sequence[Artifact] = (),
) -> TierOutcome:
    """Run every tier over a run's complete checkpoints that one rule owns (`when`: their
    `Written` map, when the caller has it; `archived`: the run's bests an applied plan
    archived away; `others`: the run's complete checkpoints other rules own, for what
    `final` is: the run's highest step, which no checkpoint of a lower one stands in for
    when another rule owns it)."""
    out = TierOutcome()
    at = when if when is not None else written(checkpoints)
    every = checkpoints
    steps = sum(c.step is not None for c in checkpoints)
    pairs: list[tuple[Artifact, Artifact]] = []
    texts: dict[str, tuple[str, str]] = {}
    if 1 < len(checkpoints) != steps:  # a stepless checkpoint: maybe a save_last copy
        pairs = save_last_aliases(checkpoints, at)
    # With a step on every checkpoint, every tier's candidates order by step alike: sorted
    # once, each tier's are these in that order (a stable sort keeps ties as given either way).
    ranked: list[Artifact] | None = None
    stepwise = True  # `ranked` is by step (where every checkpoint has one)
    if pairs:
        # The tiers see each original for its pair: ranked as the newer of the two in the
        # run's order, in a window when either is (as new as the newer write).
        texts = out.aliases = {a.key: (o.key, alias_text(a, o, at)) for a, o in pairs}
        full = order_key(checkpoints, at)
        raised: dict[int, tuple[Any, ...]] = {}
        newer = dict(at)
        for a, o in pairs:
            raised[id(o)] = max(raised.get(id(o)) or full(o), full(a))
            newer[id(o)] = max(newer[id(o)], at[id(a)])
        at = newer
        checkpoints = [c for c in checkpoints if c.key not in texts]
        ranked = sorted(checkpoints, key=lambda c: raised.get(id(c)) or full(c), reverse=True)
        stepwise = False
    elif len(checkpoints) > 1 and steps == len(checkpoints):
        ranked = sorted(checkpoints, key=order_key(checkpoints, at), reverse=True)
    elif 0 < steps < len(checkpoints):
        # ordered once over the whole run: a tier's window must not change who is newer
        ranked = sorted(checkpoints, key=order_key(checkpoints, at), reverse=True)
    final = None
    if (
        run is not None
        and run.status is RunStatus.COMPLETED
        and any("final" in t.keep for t in tiers)
    ):
        recorded = run.recorded
        if recorded is not None and recorded.final is not None:
            # completed by an earlier plan's record: its final is the one that plan kept
            # (archived away since, most likely), not the newest of those left
            final = next((c for c in checkpoints if c.key == recorded.final), None)
        else:
            final = ranked[0] if ranked is not None else newest(checkpoints, at)
            step = final.step if final is not None else None
            if step is not None and any(o.step is not None and o.step > step for o in others):
                final = None  # (the run's final is another rule's)
        out.final = final.key if final is not None else None
    for index, tier in enumerate(tiers):
        ordered = ranked
        if tier.max_age is None:
            candidates = list(checkpoints)
        else:
            candidates = _within(checkpoints, at, as_of, tier.max_age)
            if ranked is not None and len(candidates) < len(checkpoints):
                window = {id(c) for c in candidates}
                ordered = [c for c in ranked if id(c) in window]
        chosen = _tier_select(
            tier, candidates, run, at, ordered, final, stepwise=stepwise, archived=archived
        )
        if tier.best_metric is not None and tier.archive is not None and tier.archive.url:
            # what this tier archives away as the best: recorded with the plan
            metric = tier.best_metric
            found = best_scored(candidates, metric.name, metric.mode, at, archived)
            if found is not None and found[0].key in chosen:
                out.bests[index] = (found[0].key, found[1])
        for a, o in pairs:
            whys = chosen.get(o.key)
            if whys is not None:
                chosen[a.key] = [f"{texts[a.key][1]}, selected with it: " + "; ".join(whys)]
        for key, whys in chosen.items():
            out.picks.setdefault(key, []).append((index, "; ".join(whys)))
        if not trace:
            continue
        in_window = {c.key for c in candidates}
        for c in every:
            if c.key in chosen:
                line = "selected: " + "; ".join(chosen[c.key])
            elif c.key in texts:
                line = f"not selected: {texts[c.key][1]}, which this tier does not select"
            elif c.key not in in_window:
                assert tier.max_age is not None
                line = f"not selected: older than max_age {format_duration(tier.max_age)}"
            else:
                line = "not selected: " + _why_not(tier, c, run, archived)
            out.trace.setdefault(c.key, []).append((tier.name, line))
    return out


def _within(
    checkpoints: Sequence[Artifact], at: Written, as_of: datetime, max_age: timedelta
) -> list[Artifact]:
    """The checkpoints whose age (`as_of` minus their write) is at most `max_age`: written
    at or after the instant `max_age` before `as_of` (one subtraction, not one each)."""
    try:
        cutoff = as_of.astimezone(UTC) - max_age
    except OverflowError:  # before year 1: every checkpoint is young enough
        return [c for c in checkpoints if as_of - at[id(c)] <= max_age]
    return [c for c in checkpoints if at[id(c)] >= cutoff]


def _why_not(
    tier: Tier, c: Artifact, run: Run | None, archived: ArchivedBests | None = None
) -> str:
    """Each keep key of the tier that passed this checkpoint over, briefly."""
    parts: list[str] = []
    if tier.keep_last is not None:
        parts.append(f"not among the newest {tier.keep_last}")
    if tier.keep_every_steps is not None:
        if c.step is None:
            parts.append("no step for keep_every_steps")
        else:
            parts.append(f"not the newest in bucket {_bucket_range(c.step, tier.keep_every_steps)}")
    if tier.keep_daily is not None:
        parts.append("not the newest of one of the most recent days")
    if tier.keep_weekly is not None:
        parts.append("not the newest of one of the most recent ISO weeks")
    if "final" in tier.keep:
        completed = run is not None and run.status is RunStatus.COMPLETED
        parts.append("not the final checkpoint" if completed else "run is not completed (no final)")
    if "best" in tier.keep and tier.best_metric is not None:
        metric = tier.best_metric
        gone = archived.get((metric.name, metric.mode)) if archived else None
        parts.append(
            f"not the best by {metric.name}"
            if gone is None
            else f"not the best by {metric.name}: {gone.key} ({gone.value:g}), archived away by "
            f"plan {gone.plan_id}, is"
        )
    return "; ".join(parts)
