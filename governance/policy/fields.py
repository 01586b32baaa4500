"""Shared field types of the policy models: durations, sizes, storage classes, selectors.

Cross-field checks raise `fail(...)`, a `PydanticCustomError` whose context carries
`subloc` (a path below the model or field that raised it) so that the loader can point at
the exact key, e.g. the second rule named `logs`, not the whole `rules` list.
"""

from __future__ import annotations

import difflib
from datetime import timedelta
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from governance.model.types import Kind, RunStatus
from governance.policy.select import (
    check_glob,
    check_template,
    normalize_glob,
    normalize_root_url,
)
from governance.policy.units import format_duration, parse_duration, parse_size


def fail(message: str, *subloc: str | int) -> PydanticCustomError:
    """An error the loader places at `subloc` below the model (or field) that raised it."""
    return PydanticCustomError("policy", "{msg}", {"msg": message, "subloc": tuple(subloc)})


def did_you_mean(word: str, choices: list[str] | tuple[str, ...] | set[str]) -> str:
    """' (did you mean 'x'?)' for the closest choice, or ''."""
    by_lower = {c.lower(): c for c in sorted(choices, reverse=True)}
    if word.lower() in by_lower and word not in choices:  # `VERSION` for `version`
        return f" (did you mean {by_lower[word.lower()]!r}?)"
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


class StorageClass(StrEnum):
    """S3 storage classes, warmest first: the order is the transition waterfall, as S3
    lifecycle supports it (STANDARD_IA may move to INTELLIGENT_TIERING, not back)."""

    STANDARD = "STANDARD"
    STANDARD_IA = "STANDARD_IA"
    INTELLIGENT_TIERING = "INTELLIGENT_TIERING"
    ONEZONE_IA = "ONEZONE_IA"
    GLACIER_IR = "GLACIER_IR"
    GLACIER = "GLACIER"
    DEEP_ARCHIVE = "DEEP_ARCHIVE"

    @property
    def coldness(self) -> int:
        """Position in the waterfall: a transition may only increase it."""
        return list(StorageClass).index(self)


DEFAULT_PRICING: dict[StorageClass, float] = {
    StorageClass.STANDARD: 0.023,
    StorageClass.INTELLIGENT_TIERING: 0.023,
    StorageClass.STANDARD_IA: 0.0125,
    StorageClass.ONEZONE_IA: 0.01,
    StorageClass.GLACIER_IR: 0.004,
    StorageClass.GLACIER: 0.0036,
    StorageClass.DEEP_ARCHIVE: 0.00099,
}
"""USD per GB-month (us-east-1 list prices), used for classes a policy does not price."""


def _storage_class(value: object) -> object:
    if isinstance(value, str) and value.upper() in StorageClass.__members__:
        return value.upper()
    if isinstance(value, str):
        known = ", ".join(StorageClass)
        raise ValueError(
            f"unknown storage class {value!r}{did_you_mean(value.upper(), [c.value for c in StorageClass])}; "
            f"known: {known}"
        )
    return value


def as_tuple(value: object) -> object:
    """Accept one value where a list is expected (`kind: log` == `kind: [log]`)."""
    return value if isinstance(value, list | tuple) else [value]


class WrittenInt(int):
    """A YAML integer written otherwise than Python writes its value (`010`, `0x1F`,
    `1_000`), with its text: where the value is text (a tag value), it is that text."""

    written: str


class WrittenFloat(float):
    """A YAML float written otherwise than Python writes its value (`1.10`, `1e3`, `.5`),
    with its text (see `WrittenInt`)."""

    written: str


def written_number(value: int | float, text: str) -> int | float:
    """`value` as YAML made it from `text`, carrying `text` when the value's own text
    differs (a tag `version: 1.10` must not become `1.1`)."""
    if isinstance(value, bool) or str(value) == text:
        return value
    kept: WrittenInt | WrittenFloat = (
        WrittenFloat(value) if isinstance(value, float) else WrittenInt(value)
    )
    kept.written = text
    return kept


def _tag_value(value: object) -> object:
    """YAML turns `retain: true` into a bool and `version: 1.10` into a number; tags are
    strings, so take them back: a number as it was written (`1.10`, not `1.1`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return getattr(value, "written", None) or str(value)
    return value


def _positive(td: timedelta) -> timedelta:
    if td <= timedelta(0):
        raise ValueError("must be longer than zero")
    return td


Duration = Annotated[
    timedelta, BeforeValidator(parse_duration), PlainSerializer(format_duration, return_type=str)
]
PositiveDuration = Annotated[Duration, AfterValidator(_positive)]
Size = Annotated[int, BeforeValidator(parse_size)]
StorageClassName = Annotated[StorageClass, BeforeValidator(_storage_class)]
TagValue = Annotated[str, BeforeValidator(_tag_value)]
TagGlob = Annotated[TagValue, AfterValidator(check_glob)]
"""A tag value a policy looks for: a glob (`prod-*`), so it must compile."""


def url_glob(pattern: str) -> str:
    """A `path`-style glob as a full URL; a scheme nothing can open is refused, since such
    a glob would silently match nothing (a `protect.paths` entry that protects nothing)."""
    from governance.storage import known_scheme

    normalized = normalize_glob(pattern)
    scheme, rest = normalized.split("://", 1)
    if not known_scheme(scheme):
        raise fail(f"URL glob {pattern!r}: unknown scheme {scheme!r}")
    if scheme == "file" and not rest.startswith("/"):
        raise fail(f"URL glob {pattern!r}: file URLs need an absolute path (file:///abs/dir/**)")
    check_glob(normalized)
    return normalized


def _openable(url: str) -> str:
    """A folder URL that storage can open (known scheme, a valid bucket, an absolute
    `file://` path): checked on load so that `policy validate` names its position rather
    than scan or apply failing later without one."""
    from governance.errors import ArgumentError
    from governance.storage import normalize_url

    try:
        normalize_url(url)
    except ArgumentError as exc:
        raise fail(str(exc)) from exc
    return url


def _endpoint(url: str) -> str:
    """An S3 endpoint, `http(s)://host[:port][/path]` (see `storage.check_endpoint_url`)."""
    from governance.errors import ArgumentError
    from governance.storage import check_endpoint_url

    try:
        return check_endpoint_url(url)
    except ArgumentError as exc:
        raise fail(str(exc)) from exc


def _given(location: str) -> str:
    """A location that says where: an empty one named the folder govern happened to run
    in (a quarantine or archive landing there, a root scanning it)."""
    if not location.strip():
        raise ValueError("an empty location: give a folder's path or a URL")
    return location


UrlGlob = Annotated[str, AfterValidator(_given), AfterValidator(url_glob)]
FolderUrl = Annotated[
    str, AfterValidator(_given), AfterValidator(normalize_root_url), AfterValidator(_openable)
]
EndpointUrl = Annotated[str, AfterValidator(_endpoint)]
RunTemplate = Annotated[str, AfterValidator(check_template)]
ActionName = Literal["delete", "strip", "dedupe", "archive", "abort_upload", "transition"]
DESTRUCTIVE_ACTIONS: tuple[ActionName, ...] = (
    "delete",
    "strip",
    "dedupe",
    "archive",
    "abort_upload",
)


class PolicyModel(BaseModel):
    """Base of every policy block: unknown keys are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_enum_values=False)


# ----------------------------------------------------------------------------- selectors

SELECTOR_KEYS = (
    "kind", "run", "path", "run_status", "tags", "min_size", "max_size", "older_than",
    "storage_class",
)  # fmt: skip


def _placeholder_key(key: str, info: ValidationInfo) -> str:
    """With the loader's context, a select key must be a layout placeholder."""
    declared = (info.context or {}).get("placeholders")
    if declared is not None and key not in declared:
        raise ValueError(unknown_select_key(key, declared))
    return key


def unknown_select_key(key: str, declared: set[str] | frozenset[str]) -> str:
    known = f"({', '.join(sorted(declared))})" if declared else "(it has none besides {run})"
    return (
        f"unknown select key {key!r}{did_you_mean(key, [*SELECTOR_KEYS, *declared])}: "
        f"not a selector key nor a placeholder of layout.runs {known}"
    )


def _condition(value: Any) -> Any:
    """`kind:` with nothing after it reads as no condition: the rule then matched every
    artifact (a `expire` of logs deleting checkpoints), and `project: []` none. A
    condition written must say something."""
    if value is None or (isinstance(value, dict | list | tuple) and not value):
        would = "nothing" if isinstance(value, list | tuple) else "every artifact"
        raise ValueError(
            f"an empty condition: give a value, or leave the key out (as it is, it would "
            f"match {would})"
        )
    return value


class Selector(PolicyModel):
    """Which artifacts a rule, dedupe or budget applies to; every given condition must hold.

    Keys other than the fixed ones are layout placeholders (`team: nlp`); they are
    gathered into `attributes`, each a tuple of globs (one must match).
    """

    kind: Annotated[tuple[Kind, ...], BeforeValidator(as_tuple)] | None = None
    run: Annotated[str, AfterValidator(check_glob)] | None = None
    path: UrlGlob | None = None
    run_status: Annotated[tuple[RunStatus, ...], BeforeValidator(as_tuple)] | None = None
    tags: dict[str, TagGlob] | None = None
    min_size: Size | None = None
    max_size: Size | None = None
    older_than: Duration | None = None
    storage_class: Annotated[tuple[StorageClassName, ...], BeforeValidator(as_tuple)] | None = None
    attributes: dict[
        Annotated[str, AfterValidator(_placeholder_key)],
        Annotated[tuple[TagGlob, ...], BeforeValidator(as_tuple), BeforeValidator(_condition)],
    ] = Field(default_factory=dict)

    @field_validator("*", mode="before")
    @classmethod
    def _condition_given(cls, value: Any) -> Any:
        return _condition(value)

    @model_validator(mode="before")
    @classmethod
    def _gather_placeholders(cls, data: Any, info: ValidationInfo) -> Any:
        """Keys other than the fixed ones into `attributes`. In a policy file, a key
        `attributes` is one of them too (and so no placeholder: an unknown select key):
        the field is where they are gathered, not a key a policy writes."""
        if not isinstance(data, dict):
            return data
        loaded = bool((info.context or {}).get("loader"))
        fixed = [k for k in cls.model_fields if not (loaded and k == "attributes")]
        extra = {k: v for k, v in data.items() if k not in fixed}
        if not extra:
            return data
        out = {k: v for k, v in data.items() if k in fixed}
        given = out.get("attributes")
        out["attributes"] = {**(given if isinstance(given, dict) else {}), **extra}
        return out

    @model_validator(mode="after")
    def _sizes_ordered(self) -> Selector:
        if (
            self.min_size is not None
            and self.max_size is not None
            and self.min_size > self.max_size
        ):
            raise fail("min_size is larger than max_size", "min_size")
        return self
