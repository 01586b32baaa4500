"""Which roots a command works on: from `--root` URLs or a policy's `storage` block."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from governance.errors import ArgumentError
from governance.storage import normalize_url, open_store
from governance.storage.base import Store

if TYPE_CHECKING:
    from governance.policy import Policy


@dataclass(frozen=True, slots=True)
class RootSpec:
    url: str
    name: str | None = None
    endpoint_url: str | None = None
    profile: str | None = None
    region: str | None = None
    concurrency: int | None = None  # storage[].concurrency: this root's parallel calls

    def workers(self, flag: int | None, setting: int) -> int:
        """Parallel calls for this root: a command's `--concurrency`, else the root's own
        `concurrency`, else the global setting (`GOVERN_CONCURRENCY`)."""
        return flag or self.concurrency or setting

    def connection(self) -> dict[str, str]:
        """How to reach the root again later (never credentials: the profile's name only)."""
        fields = {"endpoint_url": self.endpoint_url, "profile": self.profile, "region": self.region}
        return {k: v for k, v in fields.items() if v}

    def open(self, concurrency: int) -> Store:
        return open_store(
            self.url,
            endpoint_url=self.endpoint_url,
            profile=self.profile,
            region=self.region,
            concurrency=concurrency,
        )


def resolve_roots(policy: Policy | None, root_urls: Sequence[str]) -> list[RootSpec]:
    """`--root` URLs win (with endpoint/profile taken from a policy root of the same URL)."""
    by_url: dict[str, RootSpec] = {}
    if policy is not None:
        for entry in policy.storage:
            url = normalize_url(entry.url)
            by_url[url] = RootSpec(
                url, entry.name, entry.endpoint_url, entry.profile, entry.region, entry.concurrency
            )
    if root_urls:
        return [by_url.get(normalize_url(u), RootSpec(normalize_url(u))) for u in root_urls]
    if not by_url:
        raise ArgumentError("nothing to scan: give --policy with a storage block, or --root URL")
    return list(by_url.values())


def quarantine_url(root_url: str, policy: Policy | None) -> str:
    """Where deletes of this root are quarantined (policy.md defaults)."""
    from governance.policy.models import ApplyConfig

    apply = policy.apply if policy is not None else ApplyConfig()
    return normalize_url(apply.quarantine_url_for(root_url))


def excluded_prefixes(
    root_url: str,
    policy: Policy | None,
    used: Iterable[str] = (),
    catalog_url: str | None = None,
) -> tuple[str, ...]:
    """Key prefixes under the root that are never scanned or planned: the policy's
    quarantine location, every one in `used` (the quarantines applies have used,
    `catalog.queries.quarantines`: an earlier `quarantine_url` keeps its copies), a
    folder of the default quarantine's name at the root's top (`.govern-quarantine/`):
    where applies this catalog never saw put their copies (a local root's parent, once
    governed itself, holds its children's default quarantine there; a lost catalog), and
    the SQLite catalog itself (`catalog_url`) when it lies inside the root (`govern scan
    --root .` with the default `.govern/catalog.db`): its file, and its -wal, -shm and
    -journal files, which share its name as a prefix, changed on every scan and were
    planned like the root's own data."""
    from governance.policy.models import QUARANTINE_DIR

    urls = [quarantine_url(root_url, policy), *used, root_url + QUARANTINE_DIR]
    urls += catalog_file_urls(catalog_url)
    return prefixes_under(root_url, urls)


def catalog_file_urls(catalog_url: str | None) -> list[str]:
    """The `file://` URL of a SQLite catalog's file (none for another database), as
    written and where it really is (its folder reached through a symbolic link)."""
    if not catalog_url:
        return []
    from governance.catalog.engine import sqlite_path
    from governance.storage import real_place

    try:
        path = sqlite_path(catalog_url)
    except Exception:  # (a URL the catalog layer refuses says so itself, when opened)
        return []
    if path is None:
        return []
    folder = normalize_url(str(path.parent.absolute()))
    return [folder + path.name, real_place(folder) + path.name]


def prefixes_under(root_url: str, urls: Iterable[str]) -> tuple[str, ...]:
    """The key prefixes, under `root_url`, of those of `urls` inside it (sorted, unique),
    as written or where they really are (a local quarantine reached through a symbolic
    link, or a root: `storage.real_place`). A URL that is the root itself is left out: a
    quarantine given as a root on purpose."""
    from governance.storage import real_place

    urls = list(urls)
    found = {u[len(root_url) :] for u in urls if u.startswith(root_url)}
    if root_url.startswith("file://"):
        real_root = real_place(root_url)
        for u in urls:
            real = real_place(u) if u.startswith("file://") else u
            if real.startswith(real_root):
                found.add(real[len(real_root) :])
    return tuple(sorted(found - {""}))
