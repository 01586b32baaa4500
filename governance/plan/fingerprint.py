"""The plan fingerprint: what an approval binds to (invariant 6).

A SHA-256 over a canonical JSON of the actions and the kept list. Only what apply acts on
and what the plan promises to keep goes in (rule, tier, action, artifact URI, each
object's URI/size/ETag/version id, target class or URL; kept URI/rule/tier/how), never the
plan id, creation time, reasons or costs, so the same catalog, policy and `as_of` give the
same fingerprint, and reordering the input does not change it.

The canonical text is exactly

    json.dumps({"version": 1, "actions": docs, "kept": kept_docs},
               sort_keys=True, separators=(",", ":"), ensure_ascii=False)

with `docs` (and `kept_docs`) sorted by each document's own `json.dumps(doc,
sort_keys=True, separators=(",", ":"))` (ASCII-escaped), as every saved plan's
fingerprint was computed: `verify_fingerprint` recomputes it at approval and apply time.
It is written here document by document with the same encoders (no dicts, no one big
string) and fed to the hash in pieces: same bytes, same digest. A built plan's documents
come out in canonical order almost always, and are then hashed without being held (see
`fingerprint`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from itertools import islice
from json.encoder import (
    encode_basestring,
    encode_basestring_ascii,
)
from operator import le
from typing import Any

from governance.plan.types import ActionType, KeptArtifact, ObjectRef, PlannedAction

_Enc = Callable[[str], str]
_ASCII: _Enc = encode_basestring_ascii
_UTF8: _Enc = encode_basestring


def _s(enc: _Enc, value: str | None) -> str:
    return "null" if value is None else enc(value)


def _action_text(a: PlannedAction, enc: _Enc) -> str:
    """One action's document (keys in sorted order: action, artifact, dest_url, objects,
    rule, storage_class, tier), as json.dumps with sort_keys and compact separators."""
    return _action_texts([a], enc)[0]


def _action_texts(actions: Sequence[PlannedAction], enc: _Enc) -> list[str]:
    """`_action_text` of each action, in one loop (a plan renders hundreds of thousands).

    JSON escapes a string character by character, so an object URI under its artifact's
    URI is written as the artifact's (written anyway) and the rest, whose text repeats
    artifact after artifact (`model_states.pt`) and is looked up. An action of two
    objects under its artifact without version ids (the commonest) is written in one
    format, without a text per object.
    """
    out: list[str] = []
    append = out.append
    tails = _TAILS
    rests = _RESTS.setdefault(enc, {})
    if len(rests) >= _MEMO_LIMIT:
        rests.clear()
    rest_of = rests.get
    opens = _OPENS.setdefault(enc, {})
    for a in actions:
        rows = a.objects
        artifact = a.artifact
        art, root = artifact.uri, artifact.root_url
        # an object's URI is root + key: under the artifact's when its key is under this
        art_key = art[len(root) :] if art.startswith(root) else None
        art_text = enc(art)
        kind = a.action
        opening = opens.get(kind) or _open(opens, enc, kind)
        tail = tails.get((enc, a.rule, a.storage_class, a.tier)) or _tail(enc, a)
        dest = a.dest_url
        dest_text = "null" if dest is None else enc(dest)
        if len(rows) == 2:  # (`_in_object_order` inline, for the commonest size)
            x, y = rows
            xk, yk = x.key, y.key  # one root: in the order of their URIs
            if yk < xk or (yk == xk and (y.version_id or "") < (x.version_id or "")):
                x, y, xk, yk = y, x, yk, xk
            if (
                x.version_id is None
                and y.version_id is None
                and art_key is not None
                and xk.startswith(art_key)
                and yk.startswith(art_key)
            ):
                n = len(art_key)
                head = art_text[:-1]
                rx = rest_of(xk[n:]) or _rest(rests, enc, xk[n:])
                ry = rest_of(yk[n:]) or _rest(rests, enc, yk[n:])
                append(
                    f'{opening}{art_text},"dest_url":{dest_text},"objects":[[{head}{rx},'
                    f"{x.size!r},{enc(x.etag)},null],[{head}{ry},{y.size!r},{enc(y.etag)},"
                    f"null]]{tail}"
                )
                continue
            rows = [x, y]
        elif len(rows) > 2 and not _in_object_order(rows):
            rows = sorted(rows, key=_object_order)
        head = art_text[:-1]
        objects = ",".join([_object_text(o, root, art_key, head, rests, enc) for o in rows])
        append(f'{opening}{art_text},"dest_url":{dest_text},"objects":[{objects}]{tail}')
    return out


def _object_text(
    o: ObjectRef, root: str, art_key: str | None, head: str, rests: dict[str, str], enc: _Enc
) -> str:
    """One object's entry of an action's document (its URI is `root` + its key; `art_key`:
    the artifact's key under `root` (None: the artifact is elsewhere), `head`: the
    artifact URI's written form without the closing quote)."""
    key = o.key
    v = o.version_id
    if art_key is not None and key.startswith(art_key):
        rest = key[len(art_key) :]
        uri_text = head + (rests.get(rest) or _rest(rests, enc, rest))
    else:
        uri_text = enc(root + key)
    return f"[{uri_text},{o.size!r},{enc(o.etag)},{'null' if v is None else enc(v)}]"


def _rest(rests: dict[str, str], enc: _Enc, rest: str) -> str:
    """The written form of an object URI's part under its artifact, without the opening
    quote (remembered in `rests`)."""
    text = rests[rest] = enc(rest)[1:]
    return text


def _open(opens: dict[object, str], enc: _Enc, kind: ActionType) -> str:
    """The start of an action's document up to its artifact, one per action type."""
    text = opens[kind] = f'{{"action":{enc(kind._value_)},"artifact":'
    return text


def _tail(enc: _Enc, a: PlannedAction) -> str:
    """The end of an action's document (rule, storage class, tier): the same for many
    actions, written once per combination (the combinations are few)."""
    memo = (enc, a.rule, a.storage_class, a.tier)
    text = _TAILS.get(memo)
    if text is None:
        text = (
            f',"rule":{enc(a.rule)},"storage_class":{_s(enc, a.storage_class)},'
            f'"tier":{_s(enc, a.tier)}}}'
        )
        if len(_TAILS) >= 4096:
            _TAILS.clear()
        _TAILS[memo] = text
    return text


_TAILS: dict[tuple[_Enc, str, str | None, str | None], str] = {}
_RESTS: dict[_Enc, dict[str, str]] = {}
"""By encoder: the written form, without its opening quote, of object URIs' parts under
their artifact."""
_OPENS: dict[_Enc, dict[object, str]] = {}
"""By encoder: `_open` per action type."""
_MEMO_LIMIT = 65_536


def _object_order(o: ObjectRef) -> tuple[str, str]:
    """An action's objects in the order of their URIs (one root: of their keys)."""
    return (o.key, o.version_id or "")


def _in_object_order(objects: Sequence[ObjectRef]) -> bool:
    """Whether sorting by `_object_order` would leave `objects` as they are (a planned
    action's objects are in key order: almost always)."""
    prev = objects[0]
    for o in objects[1:]:
        if o.key < prev.key or (
            o.key == prev.key and (o.version_id or "") < (prev.version_id or "")
        ):
            return False
        prev = o
    return True


def _kept_text(k: KeptArtifact, enc: _Enc) -> str:
    return f'{{"artifact":{enc(k.artifact.uri)}{_kept_tail(k, enc)}'


def _kept_tail(k: KeptArtifact, enc: _Enc) -> str:
    """A kept document after its artifact URI (keys in sorted order: how, rule, tier)."""
    return f',"how":{enc(k.how.value)},"rule":{_s(enc, k.rule)},"tier":{_s(enc, k.tier)}}}'


def _kept_texts(kept: Sequence[KeptArtifact], enc: _Enc) -> list[str]:
    """`_kept_text` of each: the end of a document (how, rule, tier) is written once per
    combination (the combinations are few)."""
    tails = _KEPT_TAILS.setdefault(enc, {})
    if len(tails) >= 4096:
        tails.clear()
    out: list[str] = []
    append = out.append
    for k in kept:
        tail = tails.get((k.how, k.rule, k.tier))
        if tail is None:
            tail = tails[(k.how, k.rule, k.tier)] = _kept_tail(k, enc)
        append(f'{{"artifact":{enc(k.artifact.uri)}{tail}')
    return out


_KEPT_TAILS: dict[_Enc, dict[tuple[object, str | None, str | None], str]] = {}
"""By encoder: a kept document after its artifact URI, per (how, rule, tier)."""


def _sorted_texts(texts: list[tuple[str, str | None]]) -> list[str]:
    """Documents as in the canonical text, ordered by their ASCII-escaped form."""
    texts.sort(key=lambda t: t[0])
    return [t[0] if t[1] is None else t[1] for t in texts]


def _docs(items: Sequence[object], render: Callable[[object, _Enc], str]) -> list[str]:
    texts: list[tuple[str, str | None]] = []
    for item in items:
        key = render(item, _ASCII)
        # Only non-ASCII text (or a backslash-u sequence, harmlessly) is written
        # differently without ASCII escapes: render the canonical form again then.
        texts.append((key, render(item, _UTF8) if "\\u" in key else None))
    return _sorted_texts(texts)


def fingerprint(actions: Sequence[PlannedAction], kept: Sequence[KeptArtifact]) -> str:
    """`sha256:<hex>` of the canonical plan content; independent of the input order.

    A plan's own order (root, artifact URI, ...) is, action type by action type, almost
    always the canonical order already: the documents are then hashed as they are
    rendered, and none is held. Only when that order turns out not to be canonical (URIs
    with characters that sort before '"', nested roots) are they all rendered and sorted.
    """
    h = hashlib.sha256()
    h.update(b'{"actions":[')
    h = _section(h, _by_action_type(actions), actions, _action_texts)
    h.update(b'],"kept":[')
    h = _section(h, kept, kept, _kept_texts)
    h.update(b'],"version":1}')
    return "sha256:" + h.hexdigest()


def _by_action_type(actions: Sequence[PlannedAction]) -> list[PlannedAction]:
    """The actions by action type (in the order of the types' names, as the canonical
    documents start with them), each type's in the given order."""
    buckets: dict[object, list[PlannedAction]] = {}  # by the action type itself: hashed in C
    for a in actions:
        found = buckets.get(a.action)
        if found is None:
            found = buckets[a.action] = []
        found.append(a)
    return [a for kind in sorted(buckets, key=_type_name) for a in buckets[kind]]


def _type_name(kind: object) -> str:
    return str(getattr(kind, "value", kind))


def _section(
    h: hashlib._Hash,
    likely: Sequence[object],
    items: Sequence[object],
    render: Callable[[Sequence[Any], _Enc], list[str]],
) -> hashlib._Hash:
    """`h` fed the documents of `items` in canonical order (a new hash object): streamed
    in the order `likely` when it is canonical, else sorted."""
    streamed = h.copy()
    if _feed_if_sorted(streamed, likely, render):
        return streamed
    h = h.copy()
    _feed(h, _docs(items, lambda item, enc: render([item], enc)[0]))
    return h


def _feed_if_sorted(
    h: hashlib._Hash, items: Sequence[object], render: Callable[[Sequence[Any], _Enc], list[str]]
) -> bool:
    """Feed the documents of `items` in the given order, as `_feed` would the sorted
    list; False (h then holds a part) as soon as one sorts before the one fed last.

    Documents are rendered a chunk at a time in their canonical (UTF-8) form. Text that
    is ASCII without DEL is written alike by both encoders, so when the whole chunk is
    (asked in C, in constant time and one `memchr`), its documents are their own sort
    keys; only otherwise is the chunk rendered ASCII-escaped for the order. Whether a
    chunk is in order is asked of the whole chunk (in C) before looking at documents one
    by one."""
    previous = ""
    for start in range(0, len(items), _CHUNK):
        chunk = items[start : start + _CHUNK]
        texts = render(chunk, _UTF8)
        text = ",".join(texts)
        keys = texts if _same_escaped(text) else render(chunk, _ASCII)
        if keys[0] < previous or not all(map(le, keys, islice(keys, 1, None))):
            return False
        previous = keys[-1]
        h.update((text if not start else "," + text).encode("utf-8"))
    return True


def _same_escaped(text: str) -> bool:
    """Whether `text`, written by `_UTF8`, is what `_ASCII` writes: JSON's two encoders
    escape the same characters below DEL (a quote, a backslash, control characters), and
    only `_ASCII` escapes DEL and non-ASCII characters."""
    return text.isascii() and "\x7f" not in text


_CHUNK = 4096


def _feed(h: hashlib._Hash, docs: list[str], chunk: int = 4096) -> None:
    """`",".join(docs)` into the hash, a few thousand documents at a time."""
    for i in range(0, len(docs), chunk):
        text = ",".join(docs[i : i + chunk])
        h.update((("," + text) if i else text).encode("utf-8"))


def fingerprint_streaming(
    actions: Iterable[PlannedAction],
    kept: Sequence[KeptArtifact],
    on_action: Callable[[PlannedAction, str], None] | None = None,
) -> str:
    """`fingerprint` of actions read one by one (e.g. a batch at a time from the catalog):
    the same digest, holding only each action's canonical text, never the actions.
    `on_action(action, text)` sees each action with its ASCII-escaped text (`action_text`)."""
    texts: list[tuple[str, str | None]] = []
    for action in actions:
        key = _action_text(action, _ASCII)
        if on_action is not None:
            on_action(action, key)
        texts.append((key, _action_text(action, _UTF8) if "\\u" in key else None))
    h = hashlib.sha256()
    h.update(b'{"actions":[')
    _feed(h, _sorted_texts(texts))
    del texts
    h.update(b'],"kept":[')
    _feed(h, _docs(kept, _kept_text))  # type: ignore[arg-type]
    h.update(b'],"version":1}')
    return "sha256:" + h.hexdigest()


def action_text(action: PlannedAction) -> str:
    """One action's canonical document, ASCII-escaped (what the fingerprint sorts by)."""
    return _action_text(action, _ASCII)


def kept_text(kept: KeptArtifact) -> str:
    """One kept artifact's canonical document, ASCII-escaped (what the fingerprint sorts by)."""
    return _kept_text(kept, _ASCII)
