"""Protections, evaluated before every rule: a protected artifact is never acted on.

`protection` covers `protect.min_age`, `protect.tags`, `protect.paths`, S3 Object Lock /
legal hold (read before planning into the catalog: `scan.attributes`), and what cannot
be known: an object whose tags (when the policy uses tags) or lock state (when its bucket
has Object Lock) were not read protects its artifact, since it cannot be proven
unprotected (and a tag-selecting rule that failed to match could hand the artifact to a
later, deleting rule). `protect.run_status` is different: it only shields artifacts from
expire and transition rules; tiers still thin them (see `shielded_from_expiry`).

Symbolic links protect what they point at (`LinkTargets`): a scan lists no link, but a
plan that deleted `checkpoint-500` would leave `runs/x/best -> checkpoint-500` dangling.
What `govern restore` brought back protects its artifact for `protect.restored_for`
(`RestoredKeys`). A root's links and restores come in with its snapshot; a root without
any pays nothing for them.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from itertools import chain, repeat
from operator import attrgetter
from os.path import commonprefix

from governance.model.types import Artifact, CatalogObject, Run, RunStatus
from governance.plan.selectors import tags_match, written_ago
from governance.policy.models import Protect
from governance.policy.select import glob_match
from governance.policy.units import format_duration


def lock_reason(obj: CatalogObject, as_of: datetime) -> str | None:
    """Why an object is under object lock or legal hold, or of unknown tags or lock state
    that protection needs, if so.

    Never bypass a lock: a locked object makes its whole artifact protected, and so does
    one whose tags or lock state were not read (`CatalogObject.unread`). Reads the fields
    with defaults, so any object-like value can be asked.
    """
    if getattr(obj, "legal_hold", False):
        return f"legal hold on {obj.key}"
    retain_until = getattr(obj, "retain_until", None)
    if isinstance(retain_until, datetime) and retain_until > as_of:
        mode = getattr(obj, "lock_mode", None)
        how = f" ({mode.lower()} mode)" if mode else ""
        return f"object lock on {obj.key} until {retain_until.isoformat()}{how}"
    unread = getattr(obj, "unread", None)
    if unread:
        if "tags" in unread:
            return f"tags of {obj.key} not read (the policy's protect.tags/select.tags need them)"
        return f"object lock state of {obj.key} not read (its bucket has Object Lock enabled)"
    return None


def protection(
    protect: Protect, art: Artifact, uri: str, age: timedelta, as_of: datetime
) -> str | None:
    """The reason the artifact (at `uri`, `age` old) is protected (one sentence), or None."""
    if age < protect.min_age:
        return f"{written_ago(age)}, inside protect.min_age {format_duration(protect.min_age)}"
    objects = art.objects
    if protect.tags:
        # an object without tags matches no protected tag: look at tagged objects only
        tagged = [o for o in objects if o.tags]
        if tagged:
            for key, value in sorted(protect.tags.items()):
                for o in tagged:
                    if tags_match({key: value}, dict(o.tags or {})):
                        return f"object {o.key} has protected tag {key}={(o.tags or {})[key]}"
    if protect.paths:
        prefix = uri[: len(uri) - len(art.key)]
        patterns = [p for p in protect.paths if _may_match(p, prefix, uri)]
        if patterns:
            candidates = [uri, uri.rstrip("/")]
            candidates += [prefix + o.key for o in objects]
            for pattern in patterns:
                # a match starts with the glob's literal head: most candidates fail that
                head = _head(pattern)
                if any(c.startswith(head) and glob_match(pattern, c) for c in candidates):
                    return f"under protected path {pattern}"
    for o in objects:
        if o.legal_hold or o.retain_until is not None or o.unread is not None:
            locked = lock_reason(o, as_of)
            if locked is not None:
                return locked
    return None


_META = ("*", "?", "[")


def _literal_head(pattern: str) -> str:
    """What every match of the glob starts with: the text before its first metacharacter."""
    cut = min((i for i in (pattern.find(c) for c in _META) if i != -1), default=len(pattern))
    return pattern[:cut]


def _may_match(pattern: str, prefix: str, uri: str) -> bool:
    """False only when no candidate of `protection` (the artifact's URI, it without a
    trailing '/', and `prefix` + each member key) can match `pattern`: all of them start
    with `prefix` and the glob's literal head leads elsewhere."""
    if not uri.rstrip("/").startswith(prefix):
        return True  # an empty artifact key: be exact, test every candidate
    return _may_match_under(pattern, prefix)


def _may_match_under(pattern: str, prefix: str) -> bool:
    """Whether some string starting with `prefix` may match the glob, by its literal head."""
    head = _head(pattern)
    return head.startswith(prefix) or prefix.startswith(head)


def _head(pattern: str) -> str:
    """`_literal_head`, once per pattern."""
    head = _HEADS.get(pattern)
    if head is None:
        head = _HEADS[pattern] = _literal_head(pattern)
    return head


_HEADS: dict[str, str] = {}


class Protector:
    """`protection` for the artifacts of one root, with what does not depend on the artifact
    decided once: most artifacts are plainly unprotected (old enough, untagged, under no
    protected path of this root, unlocked, nothing unread), and those cost a few
    comparisons; any other goes through `protection` itself, so the answer is always its
    answer."""

    __slots__ = (
        "_as_of", "_paths", "_patterns", "_protect", "_root_url", "_tags", "min_age",
    )  # fmt: skip

    def __init__(self, protect: Protect, root_url: str, as_of: datetime) -> None:
        self._protect = protect
        self.min_age = protect.min_age
        self._as_of = as_of
        self._root_url = root_url
        self._tags = bool(protect.tags)
        # True: some protected path may match under this root (`_patterns`: those), and
        # an artifact is looked at by its own URI; None: none can match an artifact
        # whose key is not empty.
        self._paths: bool | None = False
        self._patterns = [p for p in protect.paths if _may_match_under(p, root_url)]
        if protect.paths:
            self._paths = True if self._patterns else None

    def __call__(self, art: Artifact, uri: str, age: timedelta) -> str | None:
        """The reason the artifact (of this root, at `uri`, `age` old) is protected, or None."""
        if age < self._protect.min_age:
            return protection(self._protect, art, uri, age, self._as_of)
        if self._paths:
            if self._paths_may_match(art, uri):
                return protection(self._protect, art, uri, age, self._as_of)
        elif self._paths is None and not uri.rstrip("/").startswith(self._root_url):
            return protection(self._protect, art, uri, age, self._as_of)  # an empty key
        tags = self._tags
        for o in art.objects:
            # tagged, locked (or was), or lacking what protection needs
            if (tags and o.tags) or o.legal_hold or o.retain_until or o.unread:
                return protection(self._protect, art, uri, age, self._as_of)
        return None

    def _paths_may_match(self, art: Artifact, uri: str) -> bool:
        """False only when no protected path can match the artifact: when its members are
        under its key, `protection`'s candidates all start with its URI (without a
        trailing '/'), and no glob's literal head agrees with that."""
        base = uri.rstrip("/")
        stem = art.key.rstrip("/")
        if not stem or not base.endswith(stem):
            return True
        keys = [o.key for o in art.objects]
        if not all(map(str.startswith, keys, repeat(stem, len(keys)))):
            return True
        return any(_may_match_under(p, base) for p in self._patterns)

    def by_age_alone(self, artifacts: Sequence[Artifact]) -> bool:
        """Whether, for every one of `artifacts` (of this root), the answer depends on its
        age alone: None when it is at least `min_age` old (the caller then need not ask).

        Asked once per group, in C (no loop per artifact or object here): no protected
        path can match under the root (or under what every key of the group starts
        with), no artifact key is empty, the objects carry no tags that could match (when
        tags are protected), no lock, and lack nothing protection needs (`unread`).
        """
        objects = list(chain.from_iterable(map(_OBJECTS, artifacts)))
        if self._paths:
            # Every candidate `protection` matches globs against starts with the root and
            # the common part of the keys: a glob whose literal head leads elsewhere
            # matches none of them.
            keys = [*map(_KEY, artifacts), *map(_KEY, objects)]
            # characters, not path parts: a glob head may end inside a folder name
            common = commonprefix([min(keys), max(keys)]) if keys else ""  # noqa: RUF071
            base = self._root_url + common.rstrip("/")
            if any(_may_match_under(p, base) for p in self._patterns):
                return False
        elif self._paths is None and self._root_url.endswith("/"):
            keys = list(map(_KEY, artifacts))
            if not all(map(str.rstrip, keys, repeat("/", len(keys)))):
                return False  # an empty key: `__call__` looks at the URI
        if self._tags and any(map(_TAGS, objects)):
            return False
        # three passes in C; in the common case (no lock, nothing unread) none finds a thing
        return not (
            any(map(_UNREAD, objects)) or any(map(_HOLD, objects)) or any(map(_UNTIL, objects))
        )


class LinkTargets:
    """What the symbolic links of one root point at, as protection asks it.

    `links` are (link key, target key) pairs under the root (a folder target ends in '/',
    the root itself is ''). An artifact is protected when it holds a target (a file
    target is one of its objects, or lies in its folder; a folder target is its folder or
    lies in it) or lies in a folder target (its key or one of its objects' keys is under
    it). A link inside an artifact's folder that points within that same artifact does
    not keep it: the two go together. Where several links point at one target, the
    first by key is named. A folder artifact that holds a link to what lies outside it
    is protected too: the link is no object (a listing skips it), so the checkpoint reads
    as lacking that file (weights kept as a link: "no weights"), and removing the rest
    would leave a link where a checkpoint was.

        >>> LinkTargets([("runs/x/best", "runs/x/checkpoint-500/")]).touches(["runs/x/c"])
        True
    """

    __slots__ = ("_dirs", "_sources", "_targets", "_to")

    def __init__(self, links: Iterable[tuple[str, str]]) -> None:
        to: dict[str, list[str]] = {}
        pairs = sorted(links)
        for link, target in pairs:
            to.setdefault(target, []).append(link)
        self._to = {target: tuple(names) for target, names in to.items()}
        self._targets = sorted(self._to)
        self._dirs = frozenset(t for t in self._to if not t or t.endswith("/"))
        self._sources = pairs  # (link, target), by link

    def touches(self, keys: Sequence[str]) -> bool:
        """False only when no target can protect an artifact whose own and objects' keys
        are among `keys`: none lies under what they all start with, and no folder target
        holds that. Asked once per group, so a group far from every link costs a few
        lookups and its artifacts none."""
        if not keys:
            return False
        common = commonprefix([min(keys), max(keys)])  # noqa: RUF071 (characters)
        return (
            self._first_under(common) is not None
            or self._folder_above(common) is not None
            or self._link_under(common) is not None
        )

    def reason(self, art: Artifact) -> str | None:
        """Why a link keeps `art`: "the symbolic link runs/x/best points at it", or None."""
        return self.reason_for(art.key, [o.key for o in art.objects])

    def reason_for(self, key: str, files: Sequence[str]) -> str | None:
        """`reason` of the artifact at `key` (a folder's ending in '/') with these objects."""
        folder = not key or key.endswith("/")
        within = key if folder else None  # links in here that point in here do not count
        link = self._link(key, within)
        if link is not None:
            return f"the symbolic link {link} points at it"
        for name in files:  # a file target among its objects
            if name != key:
                link = self._link(name, within)
                if link is not None:
                    return f"the symbolic link {link} points at {name}, inside it"
        if folder:  # a target inside its folder
            targets = self._targets
            for i in range(bisect_left(targets, key), len(targets)):
                target = targets[i]
                if not target.startswith(key):
                    break
                link = self._link(target, within)
                if link is not None:
                    return f"the symbolic link {link} points at {target}, inside it"
        if folder and key:  # a link in its folder to what lies outside it (not above it)
            i = bisect_left(self._sources, (key, ""))
            for link, target in self._sources[i:]:
                if not link.startswith(key):
                    break
                if not target.startswith(key) and not key.startswith(target):
                    return (
                        f"it holds the symbolic link {link} (to {target or 'the root folder'}): "
                        "what it needs lies outside it, and a listing sees no file there"
                    )
        # a folder target that holds it, or holds one of its objects
        for name in [key, *(f for f in files if not (folder and f.startswith(key)))]:
            above = self._folder_above(name, strict=True)
            if above is not None:
                where = above or "the root folder"
                return f"the symbolic link {self._to[above][0]} points at {where}, which holds it"
        return None

    def _link(self, target: str, within: str | None) -> str | None:
        """The first link to `target` (None when none), leaving out links inside `within`."""
        names = self._to.get(target)
        if names is None:
            return None
        if within is None:
            return names[0]
        return next((n for n in names if not n.startswith(within)), None)

    def _link_under(self, prefix: str) -> str | None:
        """The first link that starts with `prefix`, if any."""
        i = bisect_left(self._sources, (prefix, ""))
        if i < len(self._sources) and self._sources[i][0].startswith(prefix):
            return self._sources[i][0]
        return None

    def _first_under(self, prefix: str) -> str | None:
        """The first target that starts with `prefix`, if any."""
        i = bisect_left(self._targets, prefix)
        if i < len(self._targets) and self._targets[i].startswith(prefix):
            return self._targets[i]
        return None

    def _folder_above(self, key: str, strict: bool = False) -> str | None:
        """The outermost folder target that `key` starts with ('' first, then each folder of
        its path; with `strict`, not `key` itself), if any."""
        dirs = self._dirs
        if not dirs:
            return None
        if "" in dirs and (key or not strict):
            return ""
        end = key.find("/")
        while end != -1:
            prefix = key[: end + 1]
            if strict and prefix == key:
                break
            if prefix in dirs:
                return prefix
            end = key.find("/", end + 1)
        return None


class RestoredKeys:
    """What `govern restore` brought back lately at one root, as protection asks it.

    A restore is a person's decision that the data is needed; the next plan made the same
    decision as the plan it undid and planned the same delete again, the next night.
    Each object restored within `protect.restored_for` of `as_of` protects its artifact
    (`restored`: (key, when, plan id) of each, newest first; keys relative to the root).
    """

    __slots__ = ("_at", "_for")

    def __init__(self, restored: Iterable[tuple[str, datetime, str]], keep_for: timedelta):
        self._at: dict[str, tuple[datetime, str]] = {}
        for key, when, plan in restored:
            self._at.setdefault(key, (when, plan))  # the newest restore of each key
        self._for = keep_for

    def __bool__(self) -> bool:
        return bool(self._at)

    def touches(self, keys: Sequence[str]) -> bool:
        """Whether some of these keys (artifacts' and their objects') was restored."""
        at = self._at
        return any(k in at for k in keys)

    def reason(self, art: Artifact) -> str | None:
        """Why a restore keeps `art`: "restored from plan P on DATE (...)", or None."""
        hits = [self._at[o.key] for o in art.objects if o.key in self._at]
        if not hits:
            return None
        when, plan = max(hits)
        which = "" if len(hits) == len(art.objects) else f"{len(hits)} of its objects "
        return (
            f"{which}restored from plan {plan} on {when:%Y-%m-%d %H:%M} UTC: kept until "
            f"{when + self._for:%Y-%m-%d} (protect.restored_for "
            f"{format_duration(self._for)}; protect it for good with a tag or a path)"
        )


Held = LinkTargets | RestoredKeys
"""What protects artifacts besides the policy's own protections: links, restores."""


class HeldProtector(Protector):
    """A `Protector` for a root where more than the policy protects: what the policy
    protects first, then what a symbolic link points at (`LinkTargets`), then what a
    restore brought back lately (`RestoredKeys`)."""

    __slots__ = ("_held",)

    def __init__(
        self, protect: Protect, root_url: str, as_of: datetime, held: Sequence[Held]
    ) -> None:
        super().__init__(protect, root_url, as_of)
        self._held = tuple(held)

    def __call__(self, art: Artifact, uri: str, age: timedelta) -> str | None:
        found = super().__call__(art, uri, age)
        for held in self._held:
            if found is not None:
                break
            found = held.reason(art)
        return found

    def by_age_alone(self, artifacts: Sequence[Artifact]) -> bool:
        if not super().by_age_alone(artifacts):
            return False
        keys = [*map(_KEY, artifacts), *map(_KEY, chain.from_iterable(map(_OBJECTS, artifacts)))]
        return not any(held.touches(keys) for held in self._held)


def protector_for(
    protect: Protect,
    root_url: str,
    as_of: datetime,
    links: Sequence[tuple[str, str]] = (),
    restored: Sequence[tuple[str, datetime, str]] = (),
) -> Protector:
    """The root's Protector: a `HeldProtector` when it has links (pairs of link key and
    target key) pointing inside it, or objects restored less than `protect.restored_for`
    before `as_of`, or after it (key, when, plan id), else the plain one (no cost per
    artifact)."""
    held: list[Held] = []
    if links:
        held.append(LinkTargets(links))
    # Within restored_for before as_of, or after it: a plan as of a past time still acts
    # on storage as it is now, which a restore since has changed (the hold ends
    # restored_for after the restore, as a plan as of a later time sees).
    since = as_of - protect.restored_for
    recent = RestoredKeys(((k, w, p) for k, w, p in restored if since < w), protect.restored_for)
    if recent:
        held.append(recent)
    if not held:
        return Protector(protect, root_url, as_of)
    return HeldProtector(protect, root_url, as_of, held)


_KEY = attrgetter("key")
_OBJECTS = attrgetter("objects")
_TAGS = attrgetter("tags")
_UNREAD = attrgetter("unread")
_HOLD = attrgetter("legal_hold")
_UNTIL = attrgetter("retain_until")


def shielded_from_expiry(protect: Protect, run: Run | None) -> str | None:
    """Why expire/transition rules skip this run's artifacts (`protect.run_status`), or
    None. An artifact in no run has the status `unknown`, as selectors read it
    (`selectors.run_matches`): `protect.run_status: [unknown]` shields it too (it was
    expired while a rule selecting `unknown` matched it)."""
    if run is None:
        if RunStatus.UNKNOWN in protect.run_status:
            return "in no run: its status is unknown (protect.run_status: only tiers thin it)"
        return None
    if run.status in protect.run_status:
        return f"run {run.name} is {run.status.value} (protect.run_status: only tiers thin it)"
    return None
