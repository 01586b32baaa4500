"""Checks that compare keys of several blocks: unique rule, tier and root names, roots
that overlap, `delete_mode: versioned` over a filesystem root, an `archive.url` at a root,
an `apply.quarantine_url` that is a root.

Each takes values that are already valid, with their places (`Loc`, as pydantic's `loc`),
and returns every problem it finds. The models raise the first, so that a `Policy` built
in code is refused; the loader runs them on the valid parts of a policy that is invalid
elsewhere and reports them all with its other errors (pydantic runs them only once every
field is valid, so each would hide the next). One wording serves both.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

Loc = tuple[str | int, ...]
Problem = tuple[Loc, str]
"""Where a problem is (the key or item to point at) and what it is."""


def opened(url: str) -> str:
    """The root URL as `storage.normalize_url` opens it (as written when it cannot be:
    `StorageRoot` reports that): `s3a://` is `s3://`, `file://localhost/` is `file:///`."""
    from governance.errors import ArgumentError
    from governance.storage import normalize_url

    try:
        return normalize_url(url)
    except ArgumentError:
        return url


def _repeats(named: Iterable[tuple[Loc, str]]) -> list[tuple[Loc, str, Loc]]:
    """Each (place, name) whose name came before, with the place where it came first."""
    first: dict[str, Loc] = {}
    out: list[tuple[Loc, str, Loc]] = []
    for loc, name in named:
        if name in first:
            out.append((loc, name, first[name]))
        else:
            first[name] = loc
    return out


def duplicate_rule_names(names: Iterable[tuple[Loc, str]]) -> list[Problem]:
    """Rules are named in plans, approvals and `explain`: a name must say which rule."""
    return [
        (loc, f"duplicate rule name {name!r} (also rules[{first[-2]}])")
        for loc, name, first in _repeats(names)
    ]


def duplicate_tier_names(names: Iterable[tuple[Loc, str]]) -> list[Problem]:
    """A kept checkpoint's reason names its tier: within a rule, a name must say which."""
    return [(loc, f"duplicate tier name {name!r}") for loc, name, _ in _repeats(names)]


def root_clashes(
    names: Iterable[tuple[Loc, str]], urls: Sequence[tuple[Loc, str]]
) -> list[Problem]:
    """Root names are unique, and no root is another or inside one, compared as they are
    opened (two spellings of one place are one root): objects in both would be planned,
    counted and acted on twice. One problem per root, against the first it clashes with."""
    from governance.storage import real_place

    out = [(loc, f"duplicate storage name {name!r}") for loc, name, _ in _repeats(names)]
    # each root's place as written and where it really is, found once (a symbolic link is
    # resolved on disk: once per pair, 2,000 roots took 45 s to validate)
    places = [(written := opened(url), real_place(written)) for _, url in urls]
    for i, (loc, url) in enumerate(urls):
        clash = next((urls[j][1] for j in range(i) if _overlap(places[i], places[j])), None)
        if clash is not None:
            out.append((loc, _clash_message(url, clash)))
    return out


def _overlap(here: tuple[str, str], there: tuple[str, str]) -> bool:
    """Whether one root holds the other, as written or where they really are (a local
    root reached through a symbolic link is where the link points): each a pair (as
    written, really)."""
    return any(a.startswith(b) or b.startswith(a) for a, b in zip(here, there, strict=True))


def _clash_message(url: str, other: str) -> str:
    from governance.storage import real_place

    here, there = opened(url), opened(other)
    linked = not (here.startswith(there) or there.startswith(here))
    if linked:  # the same place only through a symbolic link
        here, there = real_place(here), real_place(there)
    if here == there:
        if linked:  # both named: the reader knows one of them only by its link
            return f"root {url} is root {other} again (through a symbolic link, both are {here})"
        return f"root {url} is listed twice"
    (inner, inner_at), (outer, outer_at) = sorted(
        ((url, here), (other, there)), key=lambda pair: len(pair[1]), reverse=True
    )
    through = f" (through a symbolic link: {inner_at} is inside {outer_at})" if linked else ""
    return (
        f"root {inner} is inside root {outer}{through}: roots must not overlap (their "
        "objects would be planned, counted and acted on twice)"
    )


def versioned_needs_s3(delete_mode: str, root_urls: Iterable[str]) -> list[Problem]:
    """`delete_mode: versioned` leaves old versions behind a delete marker: only an S3
    bucket keeps them. On a filesystem root apply would refuse the approved plan; said
    here, where the policy is written."""
    plain = [url for url in root_urls if not opened(url).startswith("s3://")]
    if delete_mode != "versioned" or not plain:
        return []
    message = (
        f"delete_mode versioned needs versioned S3 buckets; {', '.join(plain)} cannot keep "
        "old versions: use quarantine or permanent"
    )
    return [(("apply", "delete_mode"), message)]


def archive_overlaps(
    archives: Iterable[tuple[Loc, str]], root_urls: Sequence[str]
) -> list[Problem]:
    """An archive copy lands at `archive.url` + the object's key: at a root (or in one) it
    would overwrite the object it copies before removing it, or be scanned and planned as
    that root's data; a root inside it, likewise. One problem per url, at its first root."""
    from governance.storage import real_place

    roots = [(r, (written := opened(r), real_place(written))) for r in root_urls]
    out: list[Problem] = []
    for loc, url in archives:
        place = (written := opened(url), real_place(written))
        root = next((r for r, there in roots if _overlap(place, there)), None)
        if root is not None:
            out.append((loc, _archive_message(url, root)))
    return out


def _archive_message(url: str, root: str) -> str:
    return (
        f"archive.url {url} overlaps root {root}: archived copies must go outside every root "
        "(a copy there would overwrite its original, or be planned again as the root's data)"
    )


def quarantine_at_root(quarantine_url: str | None, root_urls: Sequence[str]) -> list[Problem]:
    """A quarantine in a folder of a root is left out of its scans and plans (the default
    on S3: `.govern-quarantine/` at the bucket's top); one that is the root itself cannot
    be: its copies would be the root's data, listed, planned and expired by a later plan,
    the only way back gone with them."""
    from governance.storage import real_place

    if quarantine_url is None:
        return []
    place = (written := opened(quarantine_url), real_place(written))
    for root in root_urls:
        there = (written := opened(root), real_place(written))
        if any(a == b for a, b in zip(place, there, strict=True)):
            message = (
                f"{quarantine_url} is the root {root}: quarantined copies "
                "would be that root's data, planned (and expired) like the rest of it; "
                "give a folder inside the root or a place outside it"
            )
            return [(("apply", "quarantine_url"), message)]
    return []
