"""Storage access: `open_store(url, ...)` returns a Store for any URL.

Backends are imported lazily so that `govern --help` does not pay for boto3 or fsspec.

    >>> normalize_url("s3://bucket")
    's3://bucket/'
"""

from __future__ import annotations

import os
import re
from typing import IO, TYPE_CHECKING, Protocol, runtime_checkable
from urllib.parse import urlsplit

from governance.errors import ArgumentError
from governance.storage.base import KeyResult, ObjectInfo, ObjectState, Store

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "BACKENDS",
    "KeyResult",
    "ObjectInfo",
    "ObjectState",
    "Store",
    "WritableStore",
    "check_endpoint_url",
    "known_scheme",
    "normalize_url",
    "open_store",
    "s3_bucket_problem",
    "typed_url",
]

BACKENDS = ("auto", "fsspec", "s3")
# Schemes whose first path segment is a bucket/container that must be present.
BUCKET_SCHEMES = frozenset({"s3", "gs", "gcs", "az", "abfs", "abfss", "adl", "oss", "tos"})
# Aliases that name the same storage: normalised so one object never has two URLs
# (an s3 vs s3a mismatch makes live files look orphaned).
_SCHEME_ALIASES = {"s3a": "s3", "gcs": "gs", "local": "file"}


@runtime_checkable
class WritableStore(Protocol):
    """A Store that can receive a byte stream: the fallback of `copy` across backends."""

    url: str

    def put_stream(
        self,
        key: str,
        stream: IO[bytes],
        storage_class: str | None = None,
        metadata: Mapping[str, str] | None = None,
        *,
        if_absent: bool = False,
    ) -> None:
        """Write `stream` to `key`, creating parents, replacing an existing object unless
        `if_absent` (then `KeyOccupiedError` when one is there, nothing written)."""
        ...


def _known_schemes() -> set[str]:
    from fsspec.registry import known_implementations, registry

    return set(known_implementations) | set(registry)


def canonical_scheme(scheme: str) -> str:
    """The scheme object URLs are stored under: `S3`, `s3a` -> `s3`; `gcs` -> `gs`."""
    lowered = scheme.lower()
    return _SCHEME_ALIASES.get(lowered, lowered)


def known_scheme(scheme: str) -> bool:
    """Whether `open_store` can open URLs of this scheme (aliases such as `s3a` included)."""
    scheme = canonical_scheme(scheme)
    return scheme == "file" or scheme in _known_schemes()


def check_endpoint_url(url: str) -> str:
    """An S3 endpoint as `http(s)://host[:port][/path]`, returned unchanged; else
    ArgumentError naming it. botocore only objects when the first client is made, and
    reads `localhost:9000` as a scheme, so a bad endpoint would surface mid-scan.

        >>> check_endpoint_url("http://127.0.0.1:9000")
        'http://127.0.0.1:9000'
    """
    from urllib.parse import urlsplit

    wanted = "expected http://host[:port] or https://host[:port]"
    if not isinstance(url, str) or not url.strip():
        raise ArgumentError(f"endpoint URL {url!r}: empty")
    try:
        parts = urlsplit(url)
        port = parts.port  # ValueError when not a number in 0-65535
    except ValueError as exc:
        raise ArgumentError(f"endpoint URL {url!r}: {exc}; {wanted}") from exc
    if parts.scheme.lower() not in ("http", "https") or "://" not in url:
        raise ArgumentError(f"endpoint URL {url!r}: {wanted}")
    if any(ch.isspace() or ord(ch) < 32 for ch in url):
        raise ArgumentError(f"endpoint URL {url!r}: contains a space or control character")
    if not parts.hostname:
        raise ArgumentError(f"endpoint URL {url!r}: no host name; {wanted}")
    if port == 0:
        raise ArgumentError(f"endpoint URL {url!r}: port 0 is not a port")
    if parts.username is not None or parts.password is not None:
        raise ArgumentError(
            f"endpoint URL {url!r}: has a user or password; credentials come from the "
            "profile or the AWS credential chain"
        )
    if parts.query or parts.fragment:
        raise ArgumentError(f"endpoint URL {url!r}: takes no query or fragment")
    return url


def normalize_url(url: str) -> str:
    """The canonical form of a root URL, always ending in '/'.

    A plain path (absolute or relative, `~` expanded) becomes `file:///abs/path/`;
    `s3://bucket` becomes `s3://bucket/`. Query strings are not interpreted: `?` and `#`
    are legal in object keys. Raises ArgumentError naming the URL when it cannot be a root.

        >>> normalize_url("s3a://bkt/runs")
        's3://bkt/runs/'
    """
    if not isinstance(url, str) or not url.strip():
        raise ArgumentError(f"storage URL {url!r}: empty")
    if "\x00" in url:
        raise ArgumentError(f"storage URL {url!r}: contains a NUL character")
    typed = url
    url = long_form(url, "storage URL")
    if "://" not in url:
        return _file_url(url)
    scheme, rest = url.split("://", 1)
    scheme = canonical_scheme(scheme)
    if not scheme.replace("+", "").replace("-", "").isalnum():
        raise ArgumentError(f"storage URL {typed!r}: malformed scheme {scheme!r}")
    if scheme == "file":
        return _file_url(_file_path(typed, rest, "storage URL"))
    if not known_scheme(scheme):
        raise ArgumentError(f"storage URL {url!r}: unknown scheme {scheme!r}")
    if scheme in BUCKET_SCHEMES:
        bucket, _, prefix = rest.partition("/")
        if not bucket:
            raise ArgumentError(f"storage URL {url!r}: no bucket name")
        problem = s3_bucket_problem(bucket, legacy=True) if scheme == "s3" else None
        if problem:
            raise ArgumentError(
                f"storage URL {url!r}: {bucket!r} is not a valid bucket name: {problem}"
            )
        # (a leading '/' is kept: in a bucket it is a byte of the key, and keys such as
        # `/abs/a` exist; dropping it named another root, which listed nothing. Nor are
        # trailing ones dropped but the folder's own: `s3://b//` is the keys under `/`,
        # and `s3://b/runs//` those under `runs//`; stripped, each named a wider root,
        # the whole bucket or all of `runs/`, that a plan would then act on)
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        return f"{scheme}://{bucket}/{prefix}"
    try:
        urlsplit(url)  # (`http://[::1/x`: a host no client can parse)
    except ValueError as exc:
        raise ArgumentError(f"storage URL {typed!r}: {exc}") from None
    userinfo, at, _ = rest.partition("/")[0].rpartition("@")
    if at and ":" in userinfo:
        # a root's URL is stored in the catalog and printed in every report and URI
        raise ArgumentError(
            f"storage URL {scheme}://{userinfo.partition(':')[0]}:***@...: has a password; "
            "give it through the filesystem's own configuration (fsspec's config file or "
            "environment), never in the root's URL"
        )
    return f"{scheme}://{rest.rstrip('/')}/"


_ONE_SLASH = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):/?")
"""`s3:/bucket`, `s3:bucket`: a scheme with its `//` (or one slash of it) lost, not a
local folder `s3:`."""


def long_form(url: str, what: str) -> str:
    """`url` with `://`: `file:/abs/path` (a file URL without the empty host, RFC 8089)
    as `file:///abs/path`; a path as it is. A known scheme with one slash of its `//`
    lost (`s3:/bucket`) is an ArgumentError asking whether `s3://bucket` was meant: read
    as a relative folder, it named a local path nobody meant."""
    if "://" in url:
        return url
    slip = _ONE_SLASH.match(url)
    if slip is None or not known_scheme(slip.group(1)):
        if url.lower().startswith("file:"):
            raise ArgumentError(
                f"{what} {url!r}: file URLs need an absolute path (file:///abs/path)"
            )
        return url
    if canonical_scheme(slip.group(1)) == "file":
        return "file://" + url[len("file:") :]
    fixed = f"{slip.group(1)}://{url[slip.end() :].lstrip('/')}"
    raise ArgumentError(f"{what} {url!r}: did you mean {fixed!r}?")


def _file_path(typed: str, rest: str, what: str) -> str:
    """The path of a `file://` URL (`rest`: what follows `://`); a host other than
    `localhost` is an ArgumentError (`file://data/x` names host `data`, not a folder)."""
    host, slash, path = rest.partition("/")
    if host not in ("", "localhost"):
        raise ArgumentError(
            f"{what} {typed!r}: file URLs need an absolute path (file:///abs/path): "
            f"{host!r} would be a host"
        )
    if not slash:  # `file://`: no path at all (it named the folder govern runs in)
        raise ArgumentError(f"{what} {typed!r}: a file URL needs a path (file:///abs/path)")
    return slash + path


def typed_url(text: str) -> str:
    """A full URL for an artifact or object a user typed (`explain URL`, `restore --uri`):
    a plain path means the local file system; a trailing '/' is kept (it names a
    checkpoint folder), unlike `normalize_url`, which always adds one. What cannot be a
    URL is an ArgumentError naming it as typed.

        >>> typed_url("/data/runs/r1/checkpoint-4000/")
        'file:///data/runs/r1/checkpoint-4000/'
    """
    if not text.strip():
        raise ArgumentError("URL '': empty")
    url = long_form(text, "URL")
    if "://" in url:
        scheme, rest = url.split("://", 1)
        scheme = canonical_scheme(scheme)
        if scheme != "file":
            if not known_scheme(scheme):
                raise ArgumentError(f"URL {text!r}: unknown scheme {scheme!r}")
            return f"{scheme}://{rest}"
        url = _file_path(text, rest, "URL")
    absolute = "/" + os.path.abspath(os.path.expanduser(url)).lstrip("/")  # (`//x`: `/x`)
    return "file://" + absolute + ("/" if url.endswith("/") and absolute != "/" else "")


def real_place(url: str) -> str:
    """Where a normalized URL really is: a `file://` URL with every symbolic link in its
    path resolved (two paths to one folder are one place: a root reached through a link
    holds what the linked folder holds), any other URL as it is.

        >>> real_place("s3://bkt/runs/")
        's3://bkt/runs/'
    """
    if not url.startswith("file://"):
        return url
    real = os.path.realpath(url[len("file://") :])
    return "file://" + (real if real.endswith("/") else real + "/")


def _file_url(path: str) -> str:
    """The `file://` URL of a local folder. A `..` is read as the OS reads it: after a
    symbolic link it leaves the link's target, not the link's folder (`deep/..` with
    `deep -> real/runs` is `real/`), so the path up to its last `..` is resolved; the
    rest, and a root that is itself a link, keep the names given."""
    expanded = os.path.expanduser(path)
    if not _utf8(expanded):
        raise ArgumentError(
            f"storage URL {os.fsencode(expanded).decode('utf-8', 'backslashreplace')!r}: "
            "the path is not valid UTF-8 (a catalog can hold no such name)"
        )
    parts = expanded.split("/")
    if ".." in parts:
        last = len(parts) - parts[::-1].index("..")
        head = os.path.realpath("/".join(parts[:last]) or "/")  # (abspath: lexically)
        expanded = "/".join([head, *parts[last:]])
    # POSIX keeps exactly two leading slashes (`//data`, from `file:////data`): Linux reads
    # them as one, and so does the catalog, which would hold one folder as two roots
    absolute = "/" + os.path.abspath(expanded).lstrip("/")
    return "file://" + (absolute if absolute.endswith("/") else absolute + "/")


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # (a name read from the OS with surrogate escapes)
        return False
    return True


_S3_NAME_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789.-")
_S3_LEGACY_CHARACTERS = _S3_NAME_CHARACTERS | frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_IP_ADDRESS = re.compile(r"\d{1,3}(\.\d{1,3}){3}")


def s3_bucket_problem(name: str, *, legacy: bool = False) -> str | None:
    """What makes `name` an invalid S3 bucket name, in words; None when it is valid.

    The rules are S3's for new buckets: 3 to 63 lowercase letters, digits, '.' and '-',
    beginning and ending with a letter or digit, no '..', not an IP address. Buckets made
    in us-east-1 before March 2018 may still have uppercase letters, '_' and up to 255
    characters (and some S3-compatible stores allow them): with `legacy=True` only what
    no bucket can have is a problem. URLs are checked with `legacy=True` (a real bucket is
    never refused); an endpoint that answers "no such bucket" for a name that breaks the
    rules for new buckets is told apart by `storage.errors` with `legacy=False`.

        >>> s3_bucket_problem("Bad_Bucket")
        'uppercase letters and underscores are not allowed in S3 bucket names'
        >>> s3_bucket_problem("Bad_Bucket", legacy=True) is None
        True
    """
    problems: list[str] = []
    foreign = sorted(set(name) - _S3_LEGACY_CHARACTERS)
    if foreign:
        named = [repr(ch) for ch in foreign[:5]] + (["more"] if len(foreign) > 5 else [])
        shown = " and ".join([", ".join(named[:-1]), named[-1]] if len(named) > 1 else named)
        problems.append(
            f"{shown} {'is' if len(foreign) == 1 else 'are'} not allowed in S3 bucket names "
            "(lowercase letters, digits, '.' and '-' only)"
        )
    if legacy:
        if len(name) < 3:
            problems.append(
                f"S3 bucket names are at least 3 characters long; this one has {len(name)}"
            )
        elif len(name) > 255:
            problems.append(
                "S3 bucket names are at most 63 characters long (255 for buckets made in "
                f"us-east-1 before March 2018); this one has {len(name)}"
            )
        return "; ".join(problems) or None
    cases = [
        w
        for w, on in (
            ("uppercase letters", any("A" <= ch <= "Z" for ch in name)),
            ("underscores", "_" in name),
        )
        if on
    ]
    if cases:
        problems.append(f"{' and '.join(cases)} are not allowed in S3 bucket names")
    if not 3 <= len(name) <= 63:
        problems.append(f"S3 bucket names are 3 to 63 characters long; this one has {len(name)}")
    if name[:1] in ("", ".", "-", "_") or name[-1:] in (".", "-", "_"):
        problems.append("S3 bucket names must begin and end with a letter or digit")
    if ".." in name:
        problems.append("S3 bucket names must not have two periods in a row")
    if _IP_ADDRESS.fullmatch(name):
        problems.append("S3 bucket names must not be formatted as an IP address")
    return "; ".join(problems) or None


def open_store(
    url: str,
    *,
    endpoint_url: str | None = None,
    profile: str | None = None,
    region: str | None = None,
    concurrency: int = 16,
    backend: str = "auto",
) -> Store:
    """Open a storage root. `backend="auto"`: boto3 for s3://, fsspec for everything else.

    `backend="fsspec"` forces fsspec (s3fs for s3://, with listing caches off so that a
    long-running process never scans stale listings); `backend="s3"` insists on boto3.
    `endpoint_url`, `profile` and `region` only concern S3 and are ignored otherwise, so
    one set of settings can serve mixed roots.
    """
    if backend not in BACKENDS:
        raise ArgumentError(f"storage backend {backend!r}: expected one of {', '.join(BACKENDS)}")
    if concurrency < 1:
        raise ArgumentError(f"concurrency {concurrency}: must be at least 1")
    normalized = normalize_url(url)
    scheme = normalized.split("://", 1)[0]
    if backend == "s3" and scheme != "s3":
        raise ArgumentError(f"storage URL {url!r}: backend 's3' needs an s3:// URL")
    if scheme == "s3" and backend in ("auto", "s3"):
        from governance.storage.s3 import S3Store

        return S3Store(
            normalized,
            endpoint_url=endpoint_url,
            profile=profile,
            region=region,
            concurrency=concurrency,
        )
    from governance.storage.fs import FsspecStore

    options: dict[str, object] = {}
    if scheme == "s3":
        client_kwargs = {"endpoint_url": endpoint_url, "region_name": region}
        options = {
            "client_kwargs": {k: v for k, v in client_kwargs.items() if v},
            "skip_instance_cache": True,
            "use_listings_cache": False,
        }
        if profile:
            options["profile"] = profile
    elif scheme not in ("file", "memory"):
        options = {"skip_instance_cache": True}
    return FsspecStore(normalized, storage_options=options, concurrency=concurrency)
