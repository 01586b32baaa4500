"""Load a policy file: YAML -> validated `Policy`, every error placed at `file:line:col`.

The round-trip YAML loader keeps a line/column for every key and item; pydantic reports
each error with a `loc` path; `_locate` walks that path through the YAML tree. All errors
are collected into one `PolicyError`, sorted by position, e.g.::

    policies/retention.yaml:39:9: rules[2].tiers[0].kep_last: unknown key 'kep_last' (did you mean 'keep_last'?)
"""

from __future__ import annotations

import hashlib
import re
import warnings
from collections.abc import Sequence
from contextlib import suppress
from datetime import date
from functools import cache
from pathlib import Path
from typing import Any, get_args, get_origin

from pydantic import BaseModel, TypeAdapter, ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq, TaggedScalar
from ruamel.yaml.constructor import RoundTripConstructor
from ruamel.yaml.error import MarkedYAMLError
from ruamel.yaml.nodes import MappingNode, ScalarNode, SequenceNode
from ruamel.yaml.reader import ReaderError
from ruamel.yaml.scalarbool import ScalarBoolean

from governance.errors import PolicyError
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
from governance.policy.fields import WrittenFloat, WrittenInt, did_you_mean, written_number
from governance.policy.models import (
    KEEP_KEYS,
    OTHERWISE_REQUIRED,
    ApplyConfig,
    Archive,
    Policy,
    Rule,
    StorageRoot,
    Tier,
    keeps_nothing,
    prices_twice,
)
from governance.policy.select import template_placeholders
from governance.wording import shown

_VALUE_PREFIXES = ("Value error, ", "Assertion failed, ")


MAX_POLICY_BYTES = 16 * 1024 * 1024
"""A policy is a few kilobytes; past this the file is not one (`/dev/zero`, a dataset
given by mistake), and reading it all would fill memory first."""


def load_policy(path: str | Path) -> Policy:
    """Read and validate a policy file; raises `PolicyError` naming every problem. A
    pipe is read as a file is (`--policy <(generate-policy)`)."""
    source = Path(path)
    try:
        with source.open("rb") as handle:
            raw = handle.read(MAX_POLICY_BYTES + 1)
        if len(raw) > MAX_POLICY_BYTES:
            raise PolicyError(
                f"policy file {shown(str(source))} is larger than "
                f"{MAX_POLICY_BYTES // 1024 // 1024} MiB: it is not a policy"
            )
    except FileNotFoundError:
        raise PolicyError(f"policy file not found: {source}") from None
    except OSError as exc:
        raise PolicyError(f"cannot read policy file {source}: {exc.strerror or exc}") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        # placed as an editor shows it: in characters (what comes before is UTF-8)
        before = raw[: exc.start].decode("utf-8", errors="replace")
        line, col = _line_col(before, len(before))
        problem = f"{source}:{line}:{col}: not UTF-8 text ({exc.reason} at byte {exc.start})"
        raise PolicyError(f"invalid policy {source}: not UTF-8 text", [problem]) from None
    policy = _load(text, str(source), hashlib.sha256(raw).hexdigest())
    policy._source_path = source
    return policy


def load_policy_text(text: str, source_name: str = "<policy>") -> Policy:
    """Validate policy YAML given as text; `source_name` is used in error positions."""
    return _load(text, source_name, hashlib.sha256(text.encode("utf-8")).hexdigest())


_SEPARATORS = re.compile("[\x85\u2028\u2029]")
"""Characters YAML 1.1 read as line breaks and YAML 1.2 does not: ruamel ends a line at
them (a comment's text became a document's next line, a syntax error far from it), an
editor does not."""


def _separators(text: str, name: str) -> None:
    """Refuse each character of `_SEPARATORS`, placed, before YAML misreads around it."""
    found = []
    for match in _SEPARATORS.finditer(text):
        line, col = _line_col(text, match.start())
        found.append(
            f"{name}:{line}:{col}: the character U+{ord(match[0]):04X} (a line separator "
            "to some YAML readers, not to others): remove it"
        )
    if found:
        raise PolicyError(
            f"invalid policy {name}: a line separator YAML readers disagree on", found
        )


def _load(text: str, name: str, sha256: str) -> Policy:
    _separators(text, name)
    try:
        tree, found, unreadable = _parse(text, name)
        if tree is None:
            problem = f"{name}:1:1: the policy is empty (expected at least version and storage)"
            raise PolicyError(f"invalid policy {name}: empty", [problem])
        context = {"placeholders": _declared_placeholders(tree), "loader": True}
        data = _Plain(name)(tree)
        own = _loader_errors(data)  # (the model leaves these to the loader: see there)
        try:
            policy = Policy.model_validate(data, context=context)
        except ValidationError as exc:
            errors = _without_consequences(_not_under_unknown_keys(exc.errors()))
            errors += _shape_errors(data, errors) + _cross_block_errors(data) + own
            described = [_describe(name, tree, err) for err in errors]
            found += [d for d in described if d[0] not in unreadable]
        else:
            found += [_describe(name, tree, err) for err in own]
            policy._source_sha256 = sha256
    except RecursionError:
        problem = f"{name}:1:1: the policy is nested too deeply to read"
        raise PolicyError(f"invalid policy {name}: nested too deeply", [problem]) from None
    if found:
        problems = _once_per_place(found, name)
        count = f"{len(problems)} problem" + ("s" if len(problems) != 1 else "")
        raise PolicyError(f"invalid policy {name}: {count}", problems)
    return policy


Located = tuple[tuple[int, int], str]
"""((line, col), 'file:line:col: path: message'): one problem, sortable by position."""


def _once_per_place(found: list[Located], name: str) -> list[str]:
    """The problems in order of position, each once: a mistake in an anchored block is met
    again through each alias of it (`select: *defaults`), at the anchor's own place, and
    is said there once, with the other paths it reaches."""
    paths: dict[tuple[tuple[int, int], str], list[str]] = {}
    first: list[tuple[tuple[tuple[int, int], str], str]] = []
    for (line, col), text in sorted(set(found)):
        body = text.removeprefix(f"{name}:{line}:{col}: ")
        path, said, message = body.partition(": ")
        key = ((line, col), message if said else body)
        if key in paths:
            paths[key].append(path)
            continue
        paths[key] = []
        first.append((key, text))
    return [
        f"{text} (also as {', '.join(paths[key])}, through an alias)" if paths[key] else text
        for key, text in first
    ]


_UNMAKEABLE = (ValueError, KeyError, IndexError, TypeError, OverflowError, AssertionError)
"""What ruamel's constructor raises for a scalar it cannot make a value of."""


class _Constructor(RoundTripConstructor):
    """ruamel's round-trip constructor, with each number that Python writes otherwise
    than the policy did (`1.10`, `010`) keeping its text (`fields.written_number`): a tag
    value or placeholder written as a number is that text, not the number's."""

    def construct_written_int(self, node: Any) -> Any:
        return written_number(int(self.construct_yaml_int(node)), node.value)

    def construct_written_float(self, node: Any) -> Any:
        return written_number(float(self.construct_yaml_float(node)), node.value)


_Constructor.add_constructor("tag:yaml.org,2002:int", _Constructor.construct_written_int)
_Constructor.add_constructor("tag:yaml.org,2002:float", _Constructor.construct_written_float)


def _yaml() -> YAML:
    """A round-trip YAML reader with `_Constructor`, that takes a key given twice (each is
    reported by `_key_problems`)."""
    yaml = YAML(typ="rt")
    yaml.Constructor = _Constructor
    yaml.allow_duplicate_keys = True
    return yaml


def _parse(text: str, name: str) -> tuple[Any, list[Located], frozenset[tuple[int, int]]]:
    """The YAML tree, the problems of its keys (each reported with the policy's other
    problems: ruamel stops at a key given twice, hiding every other one, and a key that
    is not text would be read as text: `null` as "None", `true` and `1` as one key) and
    of values YAML cannot make, and the places of those values (read as text: what the
    model says of that text there is no news). The text is parsed once: the values are
    made from the node tree the keys were checked on."""
    yaml = _yaml()
    try:
        with warnings.catch_warnings():  # (a reused anchor is legal YAML: no warning)
            warnings.simplefilter("ignore")
            node = yaml.compose(text)
            if node is None:  # (empty, or comments alone)
                return None, [], frozenset()
            found = _key_problems(node, name)
            try:
                return yaml.constructor.construct_document(node), found, frozenset()
            except _UNMAKEABLE as exc:
                # a scalar YAML reads but cannot make a value of (`2024-02-30`, `!!int
                # abc`, an integer of 5,000 digits): each placed by making it alone, with
                # a constructor of its own (this one holds the failed document's state),
                # then read as text, so that the policy's other problems are found too
                unreadable = _unreadable(node, _yaml())
                if not unreadable:
                    problem = f"{name}:1:1: a value YAML cannot read: {_reason(exc)}"
                    raise PolicyError(
                        f"invalid policy {name}: unreadable value", [problem]
                    ) from None
                for (line, col), why, scalar in unreadable:
                    found.append(
                        ((line, col), f"{name}:{line}:{col}: a value YAML cannot read: {why}")
                    )
                    scalar.tag = "tag:yaml.org,2002:str"
                tree = _yaml().constructor.construct_document(node)
                return tree, found, frozenset(at for at, _, _ in unreadable)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        what = " ".join(p for p in (exc.context, exc.problem) if p) or "invalid YAML"
        problem = f"{name}:{line}:{col}: YAML syntax error: {shown(what)}"
        raise PolicyError(f"invalid policy {name}: YAML syntax error", [problem]) from None
    except ReaderError as exc:  # a character YAML cannot hold (a control character)
        line, col = _line_col(text, exc.position if isinstance(exc.position, int) else 0)
        char = exc.character if isinstance(exc.character, str) else chr(exc.character)
        problem = (
            f"{name}:{line}:{col}: YAML cannot hold the character U+{ord(char):04X} "
            "(a control character): remove it"
        )
        raise PolicyError(
            f"invalid policy {name}: a character YAML cannot hold", [problem]
        ) from None


def _line_col(text: str, at: int) -> tuple[int, int]:
    """The 1-based line and column of offset `at` in `text`, its lines ended as YAML ends
    them (`\n`, `\r\n` or a lone `\r`)."""
    head = text[:at].replace("\r\n", "\n").replace("\r", "\n")
    return head.count("\n") + 1, len(head) - (head.rfind("\n") + 1) + 1


def _reason(exc: BaseException) -> str:
    """Why YAML could not make a value, in its words where they say something."""
    text = str(exc)
    if "int_max_str_digits" in text or "Exceeds the limit" in text:
        return "an integer of over 4,300 digits"
    if isinstance(exc, ValueError | OverflowError) and text:
        return shown(text if len(text) <= 200 else text[:200] + "...")
    return "not a value of the type its tag names"


def _unreadable(node: Any, yaml: YAML) -> list[tuple[tuple[int, int], str, ScalarNode]]:
    """Each scalar of the composed `node` that YAML cannot construct on its own: its
    (line, col), 1-based, why, and the node."""
    stack = [node]
    seen: set[int] = set()
    out = []
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, ScalarNode):
            try:
                yaml.constructor.construct_object(current, deep=True)
            except Exception as exc:
                at = (current.start_mark.line + 1, current.start_mark.column + 1)
                out.append((at, _reason(exc), current))
        elif isinstance(current, MappingNode):
            stack.extend(v for pair in reversed(current.value) for v in reversed(pair))
        elif isinstance(current, SequenceNode):
            stack.extend(reversed(current.value))
    return out


_TEXT_KEY = {
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:merge",  # `<<: *defaults`
}
"""Key tags a policy can use: text, and numbers (read as their text: a tag key `1`)."""


def _key_problems(
    node: Any, name: str, path: tuple[str | int, ...] = (), seen: set[int] | None = None
) -> list[Located]:
    """Every key of the composed tree that is not text (null, true, a date, a list), or
    that names a key its mapping has already (`kind` twice; `1` and `0x1`): at the key.
    Each node is looked at once (an alias is the node it names: aliases of aliases would
    be walked billions of times)."""
    seen = set() if seen is None else seen
    if id(node) in seen:
        return []
    seen.add(id(node))
    out: list[Located] = []
    if isinstance(node, MappingNode):
        first: dict[str, int] = {}
        for key, value in node.value:
            label = _key_text(key)
            line, col = key.start_mark.line + 1, key.start_mark.column + 1
            where = _format_path(path) or "(top level)"
            if label is None:
                what = _key_words(key)
                out.append(
                    (
                        (line, col),
                        f"{name}:{line}:{col}: {where}: {what}: keys are text (quote it if "
                        "it is meant)",
                    )
                )
            elif label != "<<":
                if label in first:
                    out.append(
                        (
                            (line, col),
                            f"{name}:{line}:{col}: {_format_path([*path, label])}: duplicate "
                            f"key {label!r} (given first at line {first[label]}): give each "
                            "key once",
                        )
                    )
                else:
                    first[label] = line
            out += _key_problems(value, name, (*path, label if label is not None else "?"), seen)
    elif isinstance(node, SequenceNode):
        for i, item in enumerate(node.value):
            out += _key_problems(item, name, (*path, i), seen)
    return out


def _key_text(key: Any) -> str | None:
    """A key as the policy reads it (a number as its value's text: `0x1` is `1`), or None
    for one that is not text."""
    if not isinstance(key, ScalarNode) or key.tag not in _TEXT_KEY:
        return None
    text = str(key.value)
    if key.tag == "tag:yaml.org,2002:int":
        digits = text.replace("_", "")
        for base in (0, 10):  # (`017` is seventeen in YAML 1.2; `0x11` too)
            try:
                return str(int(digits, base))
            except ValueError:
                continue
        return text
    if key.tag == "tag:yaml.org,2002:float":
        special = text.lower().lstrip("+")
        if special in (".inf", "-.inf", ".nan"):
            return special
        try:
            return str(float(text.replace("_", "")))
        except ValueError:
            return text
    return text


def _key_words(key: Any) -> str:
    """`an empty key (null)`, `the key true`, `a list as a key`, ... for a key not text."""
    if isinstance(key, SequenceNode):
        return "a list as a key"
    if isinstance(key, MappingNode):
        return "a mapping as a key"
    kind = str(key.tag).rsplit(":", 1)[-1]
    if kind == "null":
        return "an empty key (null)"
    if kind == "bool":
        return f"the key {str(key.value).lower()}"
    return f"the key {shown(str(key.value))!r} ({kind})"


def _shape_errors(data: Any, errors: list[Any]) -> list[dict[str, Any]]:
    """The checks across a rule's or a tier's keys, read from the raw policy, as pydantic
    errors: pydantic runs a block's own checks only once each of its keys is valid, and a
    policy's problems are reported all at once (a rule may lack `otherwise` while one of
    its tiers has a bad value). Where pydantic did run them, the same problem comes twice
    and is reported once. A block with an unknown key is not said to lack a key as well:
    the unknown key's "did you mean" is the news (`kep_last`)."""
    misspelt = {tuple(e["loc"][:-1]) for e in errors if e["type"] == "extra_forbidden"}
    out: list[dict[str, Any]] = []
    rules = data.get("rules") if isinstance(data, dict) else None
    for i, rule in enumerate(rules if isinstance(rules, list) else []):
        tiers = rule.get("tiers") if isinstance(rule, dict) else None
        if not isinstance(tiers, list):
            continue
        if rule.get("otherwise") is None and ("rules", i) not in misspelt:
            out.append(_policy_error(("rules", i), OTHERWISE_REQUIRED, "tiers"))
        for j, tier in enumerate(tiers):
            if not isinstance(tier, dict) or ("rules", i, "tiers", j) in misspelt:
                continue
            if not (any(k in tier for k in KEEP_KEYS[:-1]) or tier.get("keep")):
                out.append(_policy_error(("rules", i, "tiers", j), keeps_nothing(tier.get("name"))))
    return out


def _cross_block_errors(data: Any) -> list[dict[str, Any]]:
    """The checks across blocks (`cross`), run on every part of the policy that is valid on
    its own, as pydantic errors: pydantic runs them only once all of it is valid, and then
    stops at the first, so each would hide the next. A check is not run on an input that
    is itself invalid (an unparseable root URL): that error is the news, and a problem
    derived from it could be a mere consequence. Where pydantic did run one, the same
    problem comes twice and is reported once."""
    roots = _entries(data, "storage")
    root_urls = _valid_values(roots, StorageRoot, "url")
    rules = _entries(data, "rules")
    tiers = [entry for loc, rule in rules for entry in _entries(rule, "tiers", loc)]
    archives = [((*loc, "archive"), tier.get("archive")) for loc, tier in tiers]
    apply: list[tuple[Loc, Any]] = [(("apply",), _get(data, "apply"))]
    modes = _valid_values(apply, ApplyConfig, "delete_mode")
    quarantines = _valid_values(apply, ApplyConfig, "quarantine_url")
    urls = [url for _, url in root_urls]
    problems = [
        *root_clashes(_valid_values(roots, StorageRoot, "name"), root_urls),
        *duplicate_rule_names(_valid_values(rules, Rule, "name")),
        *[p for loc, rule in rules for p in _tier_name_repeats(rule, loc)],
        *[p for _, mode in modes for p in versioned_needs_s3(mode, urls)],
        *archive_overlaps(_valid_values(archives, Archive, "url"), urls),
        *[p for _, url in quarantines for p in quarantine_at_root(url, urls)],
    ]
    return [_policy_error(loc, message) for loc, message in problems]


def _loader_errors(data: Any) -> list[dict[str, Any]]:
    """Checks the models leave to the loader when it validates (`context["loader"]`), as
    pydantic errors: a storage class priced twice in two cases (raised by the model, it
    would stop the checks of every price)."""
    pricing = _get(data, "pricing")
    if not isinstance(pricing, dict):
        return []
    return [
        _policy_error(("pricing", key), message, "[key]") for key, message in prices_twice(pricing)
    ]


def _tier_name_repeats(rule: Any, at: Loc) -> list[Problem]:
    """Duplicate tier names are compared within one rule only."""
    return duplicate_tier_names(_valid_values(_entries(rule, "tiers", at), Tier, "name"))


def _get(node: Any, key: str) -> Any:
    return node.get(key) if isinstance(node, dict) else None


def _entries(node: Any, key: str, at: Loc = ()) -> list[tuple[Loc, Any]]:
    """The mappings listed under `node[key]`, each with its loc (`at` is node's)."""
    items = _get(node, key)
    if not isinstance(items, list):
        return []
    return [((*at, key, i), item) for i, item in enumerate(items) if isinstance(item, dict)]


def _valid_values(
    entries: list[tuple[Loc, Any]], model: type[BaseModel], field: str
) -> list[tuple[Loc, Any]]:
    """`field` of each mapping that gives it, validated as `model` does (a root URL comes
    back normalized); the ones that are invalid are left out, as are their problems."""
    adapter = _field_adapter(model, field)
    out = []
    for loc, entry in entries:
        if isinstance(entry, dict) and field in entry:
            try:
                out.append(((*loc, field), adapter.validate_python(entry[field])))
            except ValidationError:
                continue
    return out


@cache
def _field_adapter(model: type[BaseModel], field: str) -> TypeAdapter[Any]:
    """Validates one field on its own, with its type, constraints and validators."""
    return TypeAdapter(model.model_fields[field].rebuild_annotation())


def _policy_error(loc: Loc, message: str, *subloc: str) -> dict[str, Any]:
    """A cross-field problem in the form `governance.policy.fields.fail` gives pydantic."""
    return {"type": "policy", "loc": loc, "msg": message, "ctx": {"msg": message, "subloc": subloc}}


def _not_under_unknown_keys(errors: list[Any]) -> list[Any]:
    """Drop what follows from an unknown key: the errors of its value (`tag:` for `tags:`
    is also a selector placeholder whose value must be text; `GLACER: "0.1"` under
    `pricing` is also not a number), and the "missing required key" its "did you mean"
    names (`nmae:` for `name:`). The unknown key is the news."""
    unknown = {_bare(e["loc"]) for e in errors if _about_key(e)}
    if not unknown:
        return errors
    meant = {
        (*_bare(e["loc"])[:-1], guess)
        for e in errors
        if e["type"] == "extra_forbidden"
        and (guess := _guess(str(_bare(e["loc"])[-1]), _allowed_keys(_bare(e["loc"])[:-1])))
    }

    def under_unknown(loc: tuple[Any, ...]) -> bool:
        return any(loc[:i] in unknown for i in range(1, len(loc) + 1))

    return [
        e
        for e in errors
        if _about_key(e)
        or not (
            under_unknown(_bare(e["loc"])) or (e["type"] == "missing" and _bare(e["loc"]) in meant)
        )
    ]


def _about_key(err: Any) -> bool:
    """An error about a mapping's key: unknown (`extra_forbidden`), or refused by a key
    validator (pydantic's `[key]` step: an unknown storage class, select key)."""
    return err["type"] == "extra_forbidden" or "[key]" in tuple(err["loc"])


def _guess(word: str, choices: list[str]) -> str | None:
    """The choice `did_you_mean` would suggest for `word`, if any."""
    words = did_you_mean(word, choices)
    found = re.search(r"'([^']*)'", words)
    return found.group(1) if found else None


def _bare(loc: Any) -> tuple[Any, ...]:
    """A loc without the selector's internal `attributes` step (the YAML has none) and
    pydantic's `[key]` (an error about a mapping's key)."""
    return tuple(seg for seg in loc if seg not in ("attributes", "[key]"))


def _without_consequences(errors: list[Any]) -> list[Any]:
    """Drop "too short" on a list whose items failed: only the items' errors matter."""
    kept = []
    for err in errors:
        loc = tuple(err["loc"])
        if err["type"] == "too_short" and any(
            len(o["loc"]) > len(loc) and tuple(o["loc"][: len(loc)]) == loc for o in errors
        ):
            continue
        kept.append(err)
    return kept


MAX_VALUES = 100_000
"""The most values a policy may hold once its aliases are expanded: a few levels of
aliases of aliases (`l2: [*l1, *l1, ...]`) expand to billions from a few hundred bytes."""


class _Plain:
    """ruamel's commented containers and scalar subclasses -> plain Python values; over
    `MAX_VALUES` values (aliases expanded) is a PolicyError. Keys come out as text
    (`_key_problems` has reported every key that is not)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._count = 0

    def __call__(self, node: Any) -> Any:
        self._count += 1
        if self._count > MAX_VALUES:
            problem = (
                f"{self.name}:1:1: the policy holds over {MAX_VALUES:,} values (its aliases "
                "expanded): too many to read"
            )
            raise PolicyError(f"invalid policy {self.name}: too many values", [problem])
        if isinstance(node, dict):  # (a key that is not text is left out: reported already)
            return {
                k if isinstance(k, str) else str(k): self(v)
                for k, v in node.items()
                if isinstance(k, str) or (isinstance(k, int | float) and not isinstance(k, bool))
            }
        if isinstance(node, list):
            return [self(v) for v in node]
        if isinstance(node, ScalarBoolean):
            return bool(node)
        if isinstance(node, TaggedScalar):
            return str(node.value) if node.tag.value == "tag:yaml.org,2002:str" else node
        if isinstance(node, bool | WrittenInt | WrittenFloat) or node is None:
            return node
        for kind in (str, int, float):
            if isinstance(node, kind):
                return kind(node)
        return node


def _declared_placeholders(tree: Any) -> frozenset[str]:
    """Placeholders of `layout.runs`, read from the raw tree so select keys are checked in
    the same pass as everything else (and reported at the offending key)."""
    layout = tree.get("layout") if isinstance(tree, dict) else None
    runs = layout.get("runs") if isinstance(layout, dict) else None
    names = {
        n for t in (runs if isinstance(runs, list) else []) if isinstance(t, str)
        for n in template_placeholders(t)
    }  # fmt: skip
    return frozenset(names - {"run"})


def _describe(name: str, tree: Any, err: Any) -> tuple[tuple[int, int], str]:
    """One pydantic error -> ((line, col), 'file:line:col: key.path: message')."""
    loc: Loc = tuple(err["loc"]) + tuple((err.get("ctx") or {}).get("subloc", ()))
    if err["type"] == "extra_forbidden":
        loc += ("[key]",)  # point at the unknown key, not at its value
    (line, col), where = _locate(tree, loc, block_at_key=err["type"] == "policy")
    message = _message(err, loc[:-1] if loc[-1:] == ("[key]",) else loc)
    path = _format_path(where) or "(top level)"
    if len(path) > MESSAGE_MAX // 4:
        path = path[: MESSAGE_MAX // 4 - 10] + " ... (cut)"
    if len(message) > MESSAGE_MAX:  # (a 100 kB value is not worth repeating whole)
        message = message[: MESSAGE_MAX - 10] + " ... (cut)"
    # (one problem a line: a newline in a name or URL would start what reads as another)
    return (line, col), f"{name}:{line}:{col}: {shown(path)}: {shown(message)}"


MESSAGE_MAX = 1000
"""The longest message a problem line gives (a value it quotes is cut to fit)."""


def _locate(
    tree: Any, loc: Loc, block_at_key: bool = False
) -> tuple[tuple[int, int], list[str | int]]:
    """Walk `loc` through the YAML tree: the 1-based position and the path to display.

    An error is placed at the value, except at the key itself when it is about the key
    (unknown key, a bad dict key) or, with `block_at_key`, when a cross-field check
    flags a whole block (`tiers:` without `otherwise`). Segments that are not in the YAML (a
    missing key, the internal `attributes` of a selector) keep the parent's position.
    """
    node: Any = tree
    lc = getattr(tree, "lc", None)
    pos = (getattr(lc, "line", 0) or 0, getattr(lc, "col", 0) or 0)
    shown: list[str | int] = []
    for i, seg in enumerate(loc):
        last = i == len(loc) - 1
        if seg == "[key]":
            continue
        key = _key_in(node, seg) if isinstance(node, CommentedMap) else _ABSENT
        if key is not _ABSENT:
            child = node[key]
            about_key = (not last and loc[i + 1] == "[key]") or (
                block_at_key and isinstance(child, dict | list)
            )
            pos = _position(node, key, about_key)
            if child is None and pos[0] != (at_key := _position(node, key, True))[0]:
                # an empty value in block style has no place of its own (ruamel gives
                # the next token's, lines below): its key's
                pos = at_key
            shown.append(seg)
            node = child
        elif isinstance(node, CommentedSeq) and isinstance(seg, int) and 0 <= seg < len(node):
            with suppress(TypeError, KeyError):  # (a list under a custom tag has none)
                pos = node.lc.item(seg) or pos
                if node[seg] is None and not node.fa.flow_style():
                    # an empty item (`-` alone) has no place of its own (ruamel gives the
                    # column after its dash): its dash's, where every dash of the list is
                    pos = (pos[0], node.lc.col)
            shown.append(seg)
            node = node[seg]
        elif isinstance(node, CommentedMap) and seg == "attributes":
            continue  # a selector's placeholders are its own extra keys in the YAML
        elif seg == 0 and node is not None and not isinstance(node, list):
            continue  # one value where a list is read (`transition: {after: ...}`): it
        else:
            shown.append(seg)
            node = None
    return (pos[0] + 1, pos[1] + 1), shown


_ABSENT = object()


def _key_in(node: CommentedMap, seg: Any) -> Any:
    """The key of `node` that `seg` (a loc segment: keys are text once plain) names, as
    the YAML has it (`1:` is the number 1), or `_ABSENT`."""
    if not isinstance(seg, str):
        return _ABSENT
    if seg in node:
        return seg
    return next((k for k in node if not isinstance(k, str) and str(k) == seg), _ABSENT)


def _position(node: CommentedMap, key: Any, at_key: bool) -> tuple[int, int]:
    """(line, col), 0-based, of `key`'s value in `node` (of the key itself, `at_key`). A key
    merged in (`<<: *defaults`) is placed where the mapping it came from gives it."""
    merged = [m[1] if isinstance(m, tuple) else m for m in getattr(node, "merge", ()) or ()]
    for mapping in [node, *merged]:
        lc = getattr(mapping, "lc", None)
        if lc is None or key not in (lc.data or {}):
            continue
        return lc.key(key) if at_key else lc.value(key)
    lc = node.lc
    return (getattr(lc, "line", 0) or 0, getattr(lc, "col", 0) or 0)


def _format_path(parts: Sequence[str | int]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def _message(err: Any, loc: Loc) -> str:
    kind, msg = err["type"], str(err["msg"])
    key = next((s for s in reversed(loc) if isinstance(s, str) and s != "[key]"), "")
    if kind == "extra_forbidden":
        return f"unknown key {key!r}{did_you_mean(key, _allowed_keys(loc[:-1]))}"
    if kind == "literal_error" and loc == ("version",):
        return f"unsupported policy version {err['input']!r} (this govern reads version 1)"
    if kind == "missing":
        return f"missing required key {key!r}"
    if kind in ("model_type", "dict_type") and "input" in err:
        return f"expected a mapping, got {_type_name(err['input'])}"
    if kind == "string_unicode":
        return "expected text, got text with an unpaired surrogate (not valid Unicode)"
    if kind == "finite_number" and "input" in err:
        return f"must be a finite number, got {err['input']!r}"
    if kind in _STRICT_TYPES and "input" in err:
        value = err["input"]
        written = _written(value)
        quote = (
            " (quote it if it is meant as text)"
            if kind == "string_type" and not isinstance(value, list | dict | type(None))
            else ""
        )
        return f"expected {_STRICT_TYPES[kind]}, got {_type_name(value)} {written}".rstrip() + quote
    bound = _BOUNDS.get(kind)
    if bound is not None and "input" in err:
        word, name = bound
        return f"must be {word} {(err.get('ctx') or {}).get(name)}, got {err['input']!r}"
    if kind in ("literal_error", "enum") and "input" in err:
        choices = re.findall(r"'([^']*)'", str((err.get("ctx") or {}).get("expected", "")))
        if choices:
            given = err["input"]
            hint = did_you_mean(given, choices) if isinstance(given, str) else ""
            return f"expected {_one_of(choices)}, got {_shown(given)}{hint}"
    if kind in ("tuple_type", "list_type") and "input" in err:
        value = err["input"]
        shown = "" if value is None or isinstance(value, dict) else f" {value!r}"
        got = "a mapping" if isinstance(value, dict) else _type_name(value)
        return f"expected a list, got {got}{shown}"
    if kind == "too_short" and isinstance(err.get("input"), list | tuple):
        least, count = (err.get("ctx") or {}).get("min_length", 1), len(err["input"])
        wanted = "one entry" if least == 1 else f"{least} entries"
        return f"needs at least {wanted}, got {count or 'none'}"
    if kind == "string_pattern_mismatch" and "input" in err:
        pattern = (err.get("ctx") or {}).get("pattern", "")
        wanted = _PATTERNS.get(pattern, f"text matching {pattern}")
        return f"expected {wanted}, got {err['input']!r}"
    for prefix in _VALUE_PREFIXES:
        msg = msg.removeprefix(prefix)
    return msg


def _one_of(choices: list[str]) -> str:
    quoted = [repr(c) for c in choices]
    if len(quoted) == 1:
        return quoted[0]
    return "one of " + ", ".join(quoted[:-1]) + " or " + quoted[-1]


_BOUNDS = {
    "greater_than": ("greater than", "gt"),
    "greater_than_equal": ("at least", "ge"),
    "less_than": ("less than", "lt"),
    "less_than_equal": ("at most", "le"),
}
"""Numeric bounds, said in words with the value given (pydantic says "Input should be")."""

_PATTERNS = {
    r"^https?://": "an http:// or https:// URL",
    r"^[A-Za-z0-9_.\-]+$": "a name of letters, digits, '_', '.' and '-'",
}


_STRICT_TYPES = {
    "int_type": "a whole number",
    "float_type": "a number",
    "bool_type": "true or false",
    "string_type": "text",
}
"""What a number or switch must be written as (a quoted "5" or a true is not coerced)."""


def _shown(value: Any) -> str:
    """A value as the policy wrote it, with what it is where the value alone does not say:
    `1`, `'x'`, `true`, `a list ['x']`, `an empty value`, `a date 2024-06-01`."""
    if value is None:
        return _type_name(value)
    if isinstance(value, bool | str | int | float):
        return _written(value)
    return f"{_type_name(value)} {_written(value)}"


def _written(value: Any) -> str:
    """The value alone as the policy wrote it ('' for none): `1`, `'x'`, `true`,
    `['x']`, `2024-06-01`."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, WrittenInt | WrittenFloat):
        return value.written
    if isinstance(value, str | int | float | list | dict):
        return repr(value)
    return str(value)


def _type_name(value: Any) -> str:
    names = {
        list: "a list",
        dict: "a mapping",
        str: "a string",
        int: "a number",
        bool: "a boolean",
        float: "a number",
    }
    if value is None:
        return "an empty value"
    if isinstance(value, date):  # (and datetime): YAML reads `2024-06-01` as a date
        return "a date"
    if isinstance(value, bytes):
        return "binary data"
    if isinstance(value, set):
        return "a set"
    if isinstance(value, WrittenInt | WrittenFloat):
        return "a number"
    return names.get(type(value), "a value YAML tagged")


def _allowed_keys(loc: Loc) -> list[str]:
    """The field names of the model at `loc`, found by walking the model annotations."""
    current: Any = Policy
    for seg in loc:
        if isinstance(seg, int):
            continue  # an index into a list: `_model_in` already looks inside containers
        model = _model_in(current)
        field = model.model_fields.get(seg) if model is not None else None
        if field is None:
            return []
        current = field.annotation
    model = _model_in(current)
    return list(model.model_fields) if model is not None else []


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The BaseModel class inside `X`, `X | None`, `Annotated[X, ...]` or a tuple of X."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) is dict:
        return None
    for arg in get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None
