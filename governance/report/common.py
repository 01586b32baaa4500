"""What every plan report shares: JSON-ready rows, per-run totals, and the checkpoint timeline.

Renderers stay thin: they format these views; the arithmetic (which bytes are freed,
what state a checkpoint ends in) is decided once, here.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from operator import attrgetter
from typing import Any, cast

from governance.plan.tiers import mixed_ranks
from governance.plan.types import (
    ActionType,
    ArtifactRef,
    KeptArtifact,
    KeptHow,
    ObjectRef,
    Plan,
    PlannedAction,
    removes_objects,
)
from governance.wording import counted, shown

FREES = frozenset({ActionType.DELETE, ActionType.STRIP, ActionType.DEDUPE, ActionType.ABORT_UPLOAD})
"""Actions whose bytes leave storage (counted as bytes_deleted)."""

# The end state of a checkpoint after the plan, most consequential first: when several
# actions touch one artifact (strip then archive), the timeline colors its cell by the
# first; its counts and words name each (`Cell.outcomes`).
STATES = ("deleted", "archived", "stripped", "transitioned", "protected", "in_flight", "kept")
STATE_LABELS = {
    "deleted": "deleted",
    "archived": "archived",
    "stripped": "stripped",
    "transitioned": "transitioned",
    "protected": "protected",
    "in_flight": "in flight / incomplete",
    "kept": "kept as it is",  # whole, or stripped already: no change
}
_ACTION_STATE = {
    ActionType.DELETE: "deleted",
    ActionType.DEDUPE: "deleted",
    ActionType.ABORT_UPLOAD: "deleted",
    ActionType.STRIP: "stripped",
    ActionType.ARCHIVE: "archived",
    ActionType.TRANSITION: "transitioned",
}
_KEPT_STATE = {
    KeptHow.WHOLE: "kept",
    KeptHow.STRIPPED: "stripped",
    KeptHow.ARCHIVED: "archived",
    KeptHow.PROTECTED: "protected",
    KeptHow.IN_FLIGHT: "in_flight",
    KeptHow.NO_RULE: "kept",
    KeptHow.RULE_KEEPS: "kept",
}


def iso(value: datetime) -> str:
    """UTC ISO 8601 with a `Z` (the form cli.md uses). The objects of one artifact
    usually share one datetime: the last one's text is remembered (one tuple, swapped
    whole, so threads never see a time with another's text)."""
    global _LAST_ISO
    last = _LAST_ISO
    if value is last[0]:
        return last[1]
    text = value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    _LAST_ISO = (value, text)
    return text


_LAST_ISO: tuple[datetime | None, str] = (None, "")


def artifact_dict(ref: ArtifactRef) -> dict[str, Any]:
    return {
        "uri": ref.uri,
        "kind": ref.kind,
        "run": ref.run,
        "step": ref.step,
        "root_url": ref.root_url,
    }


def object_dict(obj: ObjectRef, root_url: str) -> dict[str, Any]:
    """One object of an action (whose root is `root_url`) as the JSON report shows it."""
    row: dict[str, Any] = {
        "uri": root_url + obj.key,
        "size": obj.size,
        "etag": obj.etag,
        "last_modified": iso(obj.last_modified),
        "storage_class": obj.storage_class,
    }
    if obj.version_id is not None:
        row["version_id"] = obj.version_id
    if obj.upload_id:
        row["upload_id"] = obj.upload_id
    return row


def action_dict(a: PlannedAction) -> dict[str, Any]:
    return {
        "id": a.id,
        "rule": a.rule,
        "tier": a.tier,
        "action": ActionType(a.action).value,
        "destructive": a.destructive,
        "artifact": artifact_dict(a.artifact),
        "objects": [object_dict(o, a.artifact.root_url) for o in a.objects],
        "bytes": a.bytes,
        "reason": a.reason,
        "storage_class": a.storage_class,
        "dest_url": a.dest_url,
        "early_deletion_usd": a.early_deletion_usd,
        "request_cost_usd": a.request_cost_usd,
        "monthly_cost_before_usd": a.monthly_cost_before_usd,
        "monthly_cost_after_usd": a.monthly_cost_after_usd,
    }


def kept_dict(k: KeptArtifact) -> dict[str, Any]:
    return {
        "artifact": artifact_dict(k.artifact),
        "rule": k.rule,
        "tier": k.tier,
        "how": KeptHow(k.how).value,
        "reason": k.reason,
    }


def usd(value: float) -> str:
    """Dollars to the cent, the sign first: `$1,234.50`, `-$0.12`."""
    text = f"${abs(value):,.2f}"
    return f"-{text}" if value < 0 and text != "$0.00" else text


def saving_words(before: float, after: float, per: str = "month") -> str:
    """What a plan (or an action: `per` "mo") does to the monthly bill, from its monthly
    costs before and after, in words a reader cannot take the wrong way: one whose copies
    cost more (an archive copy lands in STANDARD) says so, and a change under a cent is
    "< $0.01", never "no change" (a small bucket's costs both print $0.00)."""
    saving = monthly_saving(before, after)
    if saving > 0:
        return f"saves {usd(saving)}/{per}"
    if saving < 0:
        return f"costs {usd(-saving)}/{per} more"
    if before > after:
        return f"saves < $0.01/{per}"
    if before < after:
        return f"costs < $0.01/{per} more"
    return "no change to the monthly bill"


def charge(value: float) -> str:
    """A charge as `usd` prints it, except one under a cent that is not nothing: `< $0.01`
    (a few requests: each action's row says so, and the totals must not say $0.00)."""
    return "< $0.01" if value > 0 and _cents(value) == 0 else usd(value)


def one_off_text(early_deletion: float, requests: float) -> str:
    """The one-off charges' total as `charge` prints it (`one_off`'s sum of the figures
    printed beside it, or `< $0.01` when both are under a cent but not nothing)."""
    total = one_off(early_deletion, requests)
    return charge(early_deletion + requests) if total == 0 else usd(total)


def saving_amount(before: float, after: float) -> str:
    """A monthly saving as one figure (`govern plans`' `saves/mo`): `$5.32`, `-$0.12` for
    a plan that raises the bill, and one under a cent `< $0.01` (or `> -$0.01`), never
    $0.00 unless the two costs are equal (as `saving_words` words it)."""
    saving = monthly_saving(before, after)
    if saving == 0 and before != after:
        return "< $0.01" if before > after else "> -$0.01"
    return usd(saving)


def saving_figure(before: float, after: float) -> tuple[str, str, bool]:
    """The HTML report's savings card: (figure, label, whether it is a cost), worded as
    `saving_words` words it: `("< $0.01", "saved per month", False)`."""
    saving = monthly_saving(before, after)
    if saving < 0 or (saving == 0 and before < after):
        return (usd(-saving) if saving else "< $0.01"), "more per month", True
    if saving == 0 and before == after:
        return usd(0), "no change per month", False
    return (usd(saving) if saving else "< $0.01"), "saved per month", False


def monthly_saving(before: float, after: float) -> float:
    """`before - after` from the figures as `usd` prints them (to the cent), so the
    saving a report shows is the difference of the costs beside it: $8.10 -> $2.78 saves
    $5.32, never the $5.31 of the unrounded costs.

    >>> usd(8.096 - 2.784), usd(monthly_saving(8.096, 2.784))
    ('$5.31', '$5.32')
    """
    return float(_cents(before) - _cents(after))


KEPT_WORDS = {
    KeptHow.WHOLE: "whole",
    KeptHow.STRIPPED: "stripped",
    KeptHow.ARCHIVED: "archived",
    KeptHow.PROTECTED: "protected",
    KeptHow.IN_FLIGHT: "in flight",
    KeptHow.NO_RULE: "no rule matches",
    KeptHow.RULE_KEEPS: "its rule keeps it",
}
"""How an artifact is kept, in a reader's words (JSON keeps the values: `in_flight`)."""


def kept_words(how: str) -> str:
    return KEPT_WORDS.get(KeptHow(how), str(how))


def action_dollars(a: PlannedAction) -> str:
    """The dollars one action puts at stake, for a reader of its row: what it saves (or
    adds) a month and what it costs once (early deletion and requests), each to the cent
    as the totals are: "saves $4.20/mo; $0.31 once", "saves < $0.01/mo"."""
    parts = []
    before, after = a.monthly_cost_before_usd, a.monthly_cost_after_usd
    if before != after:
        parts.append(saving_words(before, after, "mo"))
    once = one_off(a.early_deletion_usd, a.request_cost_usd)
    if once:
        parts.append(f"{usd(once)} once")
    elif a.early_deletion_usd or a.request_cost_usd:  # (a few requests: under a cent)
        parts.append("< $0.01 once")
    return "; ".join(parts) or "$0.00"


def one_off(early_deletion: float, requests: float) -> float:
    """The one-off charges' total, as the sum of the two figures `usd` prints beside it."""
    return float(_cents(early_deletion) + _cents(requests))


def _cents(value: float) -> Decimal:
    return Decimal(f"{value:.2f}")


# ----------------------------------------------------------------------------- per run


OUTSIDE_RUNS = "(outside runs)"
"""The name reports give the artifacts of a root that no run holds (its checkpoints are
tiered together, as one run's: policy.md)."""


class Lines(str):
    """Text whose line breaks are its own (a tooltip's lines, each already `shown`):
    a report keeps them where it escapes every other line break (one in a name)."""


@dataclass(slots=True)
class RunTotals:
    """Actions and bytes of one run (or of artifacts outside any run: `run` None)."""

    root_url: str
    run: str | None
    actions: int = 0
    objects: int = 0
    bytes_deleted: int = 0
    bytes_transitioned: int = 0
    bytes_archived: int = 0
    kept: int = 0

    @property
    def label(self) -> str:
        return self.run if self.run is not None else OUTSIDE_RUNS


def by_run(plan: Plan) -> list[RunTotals]:
    """Totals per (root, run), biggest bytes freed first, then by name."""
    runs: dict[tuple[str, str | None], RunTotals] = {}

    def get(ref: ArtifactRef) -> RunTotals:
        key = (ref.root_url, ref.run)
        if key not in runs:
            runs[key] = RunTotals(ref.root_url, ref.run)
        return runs[key]

    for a in plan.actions:
        t = get(a.artifact)
        t.actions += 1
        t.objects += len(a.objects)
        add_bytes(t, a)
    for k in plan.kept:
        get(k.artifact).kept += 1
    return sorted(
        runs.values(),
        key=lambda t: (
            -t.bytes_deleted,
            t.root_url,
            t.run is None,
            natural_key(t.run or ""),
            t.run or "",
        ),
    )


_DIGITS = re.compile(r"([0-9]+)")

NaturalKey = tuple[str | tuple[int, str], ...]


def natural_key(text: str) -> NaturalKey:
    """`text` with its runs of digits compared as numbers: `checkpoint-2000` before
    `checkpoint-10000`, `run-9` before `run-10`. Split on digit runs, the parts alternate
    text and number, so two keys compare part for part without a type clash; a number is
    (its length, its digits) without leading zeros, so one of any length compares (an
    `int` refuses over 4,300 digits). `run-9` and `run-09` tie: callers break ties."""
    parts: list[str | tuple[int, str]] = _DIGITS.split(text)
    for i in range(1, len(parts), 2):
        digits = cast(str, parts[i]).lstrip("0")
        parts[i] = (len(digits), digits)
    return tuple(parts)


def _reading_key(a: PlannedAction) -> tuple[str, NaturalKey, int, str]:
    uri = a.artifact.uri
    return (a.artifact.root_url, natural_key(uri), _ACTION_RANK[a.action], uri)


_ACTION_RANK = {t: i for i, t in enumerate(ActionType)}  # strip before archive, as the plan


def reading_order(actions: Sequence[PlannedAction], limit: int) -> list[PlannedAction]:
    """The first `limit` of `actions` in the order a person reads a list of them: by
    root, then by artifact with numbers in its name compared as numbers. The plan's own
    order (URI text, which the fingerprint and action ids follow) put `checkpoint-10000`
    before `checkpoint-2000`, and a run's checkpoints read out of step order."""
    if len(actions) <= limit:
        return sorted(actions, key=_reading_key)
    return heapq.nsmallest(limit, actions, key=_reading_key)


def add_bytes(totals: Any, a: PlannedAction) -> None:
    """Add an action's bytes to the right counter of anything with the three byte fields."""
    action = ActionType(a.action)
    if action in FREES:
        totals.bytes_deleted += a.bytes
    elif action is ActionType.TRANSITION:
        totals.bytes_transitioned += a.bytes
    elif action is ActionType.ARCHIVE:
        totals.bytes_archived += a.bytes


# ----------------------------------------------------------------------------- timeline


@dataclass(slots=True)
class Cell:
    """One checkpoint of a run on the timeline."""

    label: str
    state: str
    states: list[str]
    uri: str
    step: int | None
    reasons: list[str] = field(default_factory=list)
    written: datetime | None = None  # `ArtifactRef.written`: where a step cannot place it

    @property
    def title(self) -> Lines:
        """The tooltip: a line for the checkpoint, one for each reason (a line break in a
        name is shown escaped, not taken for the next line)."""
        head = f"{self.uri}: {', '.join(STATE_LABELS[s] for s in self.states)}"
        return Lines("\n".join(shown(line) for line in [head, *self.reasons]))

    @property
    def outcomes(self) -> list[str]:
        """Every state the checkpoint ends in, in the order things happen to it (a strip
        then an archive: `["stripped", "archived"]`); `kept` only when nothing else is."""
        found = [s for s in _OUTCOME_ORDER if s in self.states and s != "kept"]
        return found or ["kept"]

    @property
    def phrase(self) -> str:
        """What the plan does with it in words: `deleted`, `stripped and archived`."""
        return " and ".join(STATE_LABELS[s] for s in self.outcomes)


_OUTCOME_ORDER = ("deleted", "stripped", "archived", "transitioned", "protected", "in_flight")


@dataclass(slots=True)
class TimelineRow:
    root_url: str
    run: str
    cells: list[Cell]

    def count(self, state: str) -> int:
        """Checkpoints that end in `state`: one both stripped and archived counts in each
        (`kept`: those nothing else happens to)."""
        return sum(1 for c in self.cells if state in c.outcomes)

    def counts_line(self) -> str:
        """`14 checkpoints: 4 kept, 2 stripped, 1 archived, 7 deleted` (protected, in
        flight and transitioned only when there are some)."""
        return f"{self.total()}: {', '.join(self.counts())}"

    def total(self) -> str:
        """`14 checkpoints`."""
        return counted(len(self.cells), "checkpoint")

    def counts(self) -> list[str]:
        """`["4 kept", "2 stripped", "1 archived", "7 deleted"]`, as `counts_line` says."""
        parts = [f"{self.count('kept'):,} kept"]
        for state, words in (
            ("protected", "protected"),
            ("in_flight", "in flight"),
            ("transitioned", "transitioned"),
        ):
            if self.count(state):
                parts.append(f"{self.count(state):,} {words}")
        return parts + [f"{self.count(s):,} {s}" for s in ("stripped", "archived", "deleted")]


def timeline(plan: Plan, kinds: Iterable[str] = ("checkpoint",)) -> list[TimelineRow]:
    """Per run, its checkpoints in step order with the state each ends in after the plan.

    A checkpoint judged incomplete past the grace period is residue, and still a step of
    its run: shown (deleted, mostly), or a reader would count one step fewer than the
    plan deletes. A root's checkpoints outside any run, which the tiers judge together as
    one run's, are a row of their own (`OUTSIDE_RUNS`), after the root's runs."""
    wanted = set(kinds)
    if "checkpoint" in wanted:
        wanted.add(_STEPPED_RESIDUE)
    found: dict[tuple[str, str], dict[str, Cell]] = {}
    # A plan lists an artifact's actions together and a run's artifacts together: the
    # run's cells are looked up once per run, not once per action (there may be millions).
    run_key: tuple[str, str] | None = None
    cells: dict[str, Cell] = {}
    action_state = _ACTION_STATE
    kept_state = _KEPT_STATE

    def cell(ref: ArtifactRef) -> Cell:
        nonlocal run_key, cells
        key = (ref.root_url, ref.run or "")
        if key != run_key:
            run_key = key
            cells = found.setdefault(key, {})
        c = cells.get(ref.uri)
        if c is None:
            label = str(ref.step) if ref.step is not None else _basename(ref.uri)
            c = cells[ref.uri] = Cell(label, "kept", [], ref.uri, ref.step, [], ref.written)
        return c

    def shown(ref: ArtifactRef) -> bool:
        kind = ref.kind
        if kind == "residue":  # (only a half-written checkpoint: it has a step)
            kind = _STEPPED_RESIDUE if ref.step is not None else kind
        return kind in wanted

    for a in plan.actions:
        ref = a.artifact
        if shown(ref):
            _add_state(cell(ref), action_state[a.action], f"#{a.id} {a.action}: {a.reason}")
    for k in plan.kept:
        ref = k.artifact
        if shown(ref):
            _add_state(cell(ref), kept_state[k.how], f"kept ({k.how}): {k.reason}")
    rows = []
    order = STATES.index
    for (root, run), run_cells in sorted(found.items(), key=_runs_first):
        ordered = _in_run_order(list(run_cells.values()))
        for c in ordered:
            states = c.states
            c.state = (
                (states[0] if len(states) == 1 else min(states, key=order)) if states else "kept"
            )
        rows.append(TimelineRow(root, run or OUTSIDE_RUNS, ordered))
    return rows


def _runs_first(item: tuple[tuple[str, str], Any]) -> tuple[str, bool, NaturalKey, str]:
    """By root, then its runs by name (`run-9` before `run-10`), then what no run holds
    (run "")."""
    (root, run), _ = item
    return (root, not run, natural_key(run), run)


_STEPPED_RESIDUE = "residue with a step"


def _step_order(c: Cell) -> tuple[bool, int, str]:
    return (c.step is None, c.step or 0, c.uri)


def _in_run_order(cells: list[Cell]) -> list[Cell]:
    """A run's checkpoints oldest first, as the tiers rank them (`tiers.order_key`): by
    step where every one has a step; else, when the plan kept their times, by time where
    none has, and each one without a step just above the highest step written at or
    before it where some have (`tiers.mixed_ranks`). By name, `last.ckpt` sorted after
    every step and `alpha.ckpt` before `zeta.ckpt` whatever their ages, and a reader saw
    the newest checkpoints deleted. Plans saved without the times: steps, then names."""
    if all(c.step is not None for c in cells) or any(c.written is None for c in cells):
        return sorted(cells, key=_step_order)
    stepped = [c for c in cells if c.step is not None]
    stepless = [c for c in cells if c.step is None]
    keys = mixed_ranks(stepped, stepless, _CELL_STEP, _CELL_WRITTEN, _CELL_URI)
    return sorted(cells, key=lambda c: keys[id(c)])


_CELL_STEP = attrgetter("step")
_CELL_WRITTEN = attrgetter("written")
_CELL_URI = attrgetter("uri")


def _add_state(c: Cell, state: str, reason: str) -> None:
    if state not in c.states:
        c.states.append(state)
    c.reasons.append(reason)


def _basename(uri: str) -> str:
    return uri.rstrip("/").rsplit("/", 1)[-1]


def roots_of(plan: Plan) -> list[str]:
    """Every root the plan touches or was made from, sorted."""
    roots = set(plan.scans)
    roots.update(a.artifact.root_url for a in plan.actions)
    roots.update(k.artifact.root_url for k in plan.kept)
    return sorted(roots)


# ----------------------------------------------------------------------------- deletes


@dataclass(frozen=True, slots=True)
class Deletes:
    """How `govern apply` will carry out the plan's deletes, read from the `apply` block
    frozen into the plan (apply reads the same), and whether there is a way back.

    `actions` counts the actions that take objects away (delete, strip, dedupe, and
    archive by copying elsewhere: the ones `apply.delete_mode` applies to);
    `aborted_uploads` the incomplete uploads aborted, which no mode can bring back.
    """

    mode: str  # quarantine | versioned | permanent
    actions: int
    aborted_uploads: int
    quarantine_urls: tuple[str, ...]  # where deletes go, one per root (quarantine only)
    quarantine_for: str | None  # how long they stay there (quarantine only)

    @property
    def restorable(self) -> bool:
        """Whether `govern restore` can bring the deleted objects back."""
        return self.mode != "permanent" and self.actions > 0

    @property
    def permanent(self) -> bool:
        return self.mode == "permanent" and self.actions > 0

    @property
    def text(self) -> str:
        """One line for people, e.g. "deletes: moved to quarantine
        s3://b/.govern-quarantine/, kept 14d: govern restore brings them back until then"."""
        return f"deletes: {self.how}"

    @property
    def how(self) -> str:
        """`text` without its "deletes: "."""
        if not self.actions:
            how = "none"
        elif self.mode == "permanent":
            how = (
                "PERMANENT: nothing can be restored "
                "(apply.delete_mode: permanent; apply asks for --yes)"
            )
        elif self.mode == "versioned":
            how = "versioned: delete markers, old versions kept (govern restore brings them back)"
        else:
            how = (
                f"moved to quarantine {self.where}, kept {self.quarantine_for}: "
                "govern restore brings them back until then"
            )
        if self.aborted_uploads:
            n = self.aborted_uploads
            how += (
                f"; {n:,} incomplete upload{'' if n == 1 else 's'} aborted, "
                "which cannot be restored"
            )
        return how

    @property
    def where(self) -> str:
        urls = self.quarantine_urls
        if len(urls) == 1:
            return urls[0]
        return f"beside each root ({', '.join(urls)})"

    def document(self) -> dict[str, Any]:
        """The JSON report's `deletes` object."""
        return {
            "mode": self.mode,
            "restorable": self.restorable,
            "actions": self.actions,
            "aborted_uploads": self.aborted_uploads,
            "quarantine_urls": list(self.quarantine_urls),
            "quarantine_for": self.quarantine_for,
            "text": self.text,
        }


def deletes(plan: Plan) -> Deletes | None:
    """How the plan's deletes will be carried out; None when it takes nothing away
    (no action removes objects or aborts an upload: transitions, archives in place)."""
    from governance.policy.models import ApplyConfig

    removing = [a for a in plan.actions if removes_objects(a)]
    aborted = sum(1 for a in plan.actions if a.action is ActionType.ABORT_UPLOAD)
    if not removing and not aborted:
        return None
    frozen = plan.controls.get("apply") or {}
    mode = str(frozen.get("delete_mode") or "quarantine")
    urls: tuple[str, ...] = ()
    keep_for = None
    if mode == "quarantine" and removing:
        # the frozen block as apply reads it, without validating it again (a report of
        # a plan apply would refuse as damaged must still open)
        config = ApplyConfig.model_construct(quarantine_url=frozen.get("quarantine_url"))
        roots = sorted({a.artifact.root_url for a in removing})
        urls = tuple(sorted({config.quarantine_url_for(root) for root in roots}))
        keep_for = str(frozen.get("quarantine_for") or "14d")
    return Deletes(mode, len(removing), aborted, urls, keep_for)
