"""URL globs and locations as the policy writes them, made comparable with full URLs.

Every `path` selector, `protect.paths` entry, root and quarantine URL is matched against
full URLs (`s3://bucket/key`, `file:///abs/path`). A location written as a plain path
means the local file system; a relative one is resolved against the current working
directory when the policy is loaded (not against the policy file's folder), so
`govern plan --policy p.yaml` behaves like every other command-line tool.

Glob syntax: `**` matches anything including '/', `**/` also matches nothing (so `a/**/b`
matches `a/b`), `*` and `?` never cross '/', `[abc]` / `[!abc]` are character classes.

>>> bool(glob_to_regex("s3://b/releases/**").fullmatch("s3://b/releases/v1/model.pt"))
True
>>> bool(glob_to_regex("s3://b/*/x").fullmatch("s3://b/a/c/x"))
False
"""

from __future__ import annotations

import os
import re
import warnings
from functools import lru_cache

_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.\-]*://")


def has_scheme(location: str) -> bool:
    """True for `s3://...`, `file://...`, `gs://...`; False for plain paths."""
    return bool(_SCHEME.match(location))


def normalize_glob(pattern: str) -> str:
    """A plain path (absolute, relative to the cwd, or `~`) -> a `file://` URL; a URL's
    scheme as object URLs spell it (`s3a://`, `S3://` -> `s3://`: otherwise the glob would
    never match, and a `protect.paths` entry would protect nothing), the rest unchanged.

    A trailing '/' is preserved because it means "a folder" in a glob. A scheme with one
    slash of its `//` lost (`s3:/b/x/**`) is a ValueError asking whether `s3://` was meant
    (read as a folder `s3:` under the current one, it matched nothing), and `file:/abs` is
    `file:///abs`, as on the command line (`storage.long_form`).
    """
    from governance.errors import ArgumentError
    from governance.storage import long_form

    try:
        pattern = long_form(pattern, "URL")
    except ArgumentError as exc:
        raise ValueError(str(exc)) from None
    if has_scheme(pattern):
        from governance.storage import canonical_scheme

        scheme, rest = pattern.split("://", 1)
        scheme = canonical_scheme(scheme)
        if scheme == "file" and rest in ("", "localhost"):
            raise ValueError(f"URL {pattern!r}: a file URL needs a path (file:///abs/path)")
        if scheme == "file" and rest.startswith("localhost/"):
            rest = rest.removeprefix("localhost")  # file://localhost/x is file:///x
        return f"{scheme}://{rest}"
    trailing = pattern.endswith("/")
    path = os.path.abspath(os.path.expanduser(pattern))
    if trailing and not path.endswith("/"):
        path += "/"
    return "file://" + path


def normalize_root_url(url: str) -> str:
    """A storage root or folder location: normalized like a glob and always ending in '/'."""
    normalized = normalize_glob(url)
    return normalized if normalized.endswith("/") else normalized + "/"


@lru_cache(maxsize=4096)
def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """Compile a URL glob once; use `.fullmatch(url)` on the result."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                i += 2
                if i < n and pattern[i] == "/":
                    out.append("(?:.*/)?")
                    i += 1
                else:
                    out.append(".*")
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 2 if pattern.startswith("[!", i) else i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    with warnings.catch_warnings():  # (`[[:alpha:]]`: Python warns of a future meaning)
        warnings.simplefilter("ignore", FutureWarning)
        try:
            return re.compile("".join(out), re.DOTALL)
        except re.error as exc:
            raise ValueError(f"glob {pattern!r} is not a pattern: {exc}") from None


def check_glob(pattern: str) -> str:
    """`pattern` if it compiles as a glob (`[z-a]` does not: a bad character range), else
    a ValueError naming it: checked when the policy is loaded, not when a plan meets it."""
    if is_glob(pattern):
        glob_to_regex(pattern)
    return pattern


def glob_match(pattern: str, value: str) -> bool:
    """Whether the whole of `value` matches the glob (`*` does not cross '/')."""
    return glob_to_regex(pattern).fullmatch(value) is not None


def is_glob(pattern: str) -> bool:
    """Whether the string has any glob metacharacter (else it is compared literally)."""
    return any(ch in pattern for ch in "*?[")


TEMPLATE_FIELD_RE = re.compile(r"\{([^{}]*)\}")
_RESERVED_PLACEHOLDERS = frozenset(
    {"kind", "path", "run_status", "tags", "min_size", "max_size", "older_than",
     "storage_class", "attributes"}
)  # fmt: skip


def template_placeholders(template: str) -> list[str]:
    """The placeholder names of a layout template, in order: `{team}/runs/{run}/` -> team, run."""
    return TEMPLATE_FIELD_RE.findall(template)


def check_template(template: str) -> str:
    """Validate a `layout.runs` template: `{run}` present, identifiers, balanced braces."""
    names = template_placeholders(template)
    rest = TEMPLATE_FIELD_RE.sub("", template)
    if "{" in rest or "}" in rest:
        raise ValueError(f"unbalanced braces in template {template!r}")
    for name in names:
        if not name.isidentifier():
            raise ValueError(f"placeholder {{{name}}} in {template!r} is not an identifier")
        if name in _RESERVED_PLACEHOLDERS:
            raise ValueError(f"placeholder {{{name}}} clashes with the selector key {name!r}")
    if "run" not in names:
        raise ValueError(f"template {template!r} has no {{run}} placeholder")
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"placeholder {{{duplicates[0]}}} appears twice in {template!r}")
    if template.startswith("/") or has_scheme(template):
        raise ValueError(f"template {template!r} must be relative to each storage root")
    return template
