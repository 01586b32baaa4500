"""Which detectors can claim a key, from its folder and its file name, by dict look-ups.

Every detector declares `needles` (substrings one of which is in every key it claims) and
`suffixes` (endings); a key none of whose needles or suffixes match is never claimed by that
detector, so it need not be asked. A needle holds '/' only as its first or last character:
then it is in a key exactly when it is in the key's folder (up to and with the last '/') or in
'/' + its file name, and a suffix (at most a leading '/') ends the key exactly when it ends
'/' + file name. So a key's candidates are a bit mask: the folder's bits (computed once per
folder: sorted keys come folder by folder) or'ed with the file name's (cached per name:
names repeat run after run). A key ending in '/' asks every detector.

    dispatch = Dispatch(REGISTRY)
    for i, claim in dispatch.candidates(key):  # the detectors that may claim key, in order
        ...
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from governance.model.detectors.base import Claim, Detector

ClaimFn = Callable[[str], Claim | None]
Candidates = tuple[tuple[int, ClaimFn], ...]
_MAX_NAMES = 65_536
"""File names cached per dispatch before the cache starts over (memory stays bounded)."""


class Dispatch:
    """Candidate detectors of a key (a superset of those whose `claim` is not None)."""

    def __init__(self, detectors: Sequence[Detector]) -> None:
        self.detectors = tuple(detectors)
        self.all = (1 << len(self.detectors)) - 1
        self.always = 0
        needles: dict[str, int] = {}
        suffixes: dict[str, int] = {}
        for i, det in enumerate(self.detectors):
            bit = 1 << i
            if det.needles is None:
                self.always |= bit
                continue
            for n in det.needles:
                if "/" in n[1:-1] or not n.strip("/"):
                    raise ValueError(f"{type(det).__name__}: needle {n!r} has an inner '/'")
                needles[n] = needles.get(n, 0) | bit
            for s in det.suffixes:
                if "/" in s[1:] or not s.strip("/"):
                    raise ValueError(f"{type(det).__name__}: suffix {s!r} has an inner '/'")
                suffixes[s] = suffixes.get(s, 0) | bit
        self._needles = tuple(needles.items())
        self._suffixes = tuple(suffixes.items())
        self._names: dict[str, int] = {}
        self._folders: dict[str, int] = {}
        self._segments: dict[tuple[str, bool], int] = {}
        self._sets: dict[int, Candidates] = {}
        self.looking_up = sum(1 << i for i, d in enumerate(self.detectors) if d.looks_up)
        self.shallow_only = sum(1 << i for i, d in enumerate(self.detectors) if not d.claims_deep)

    def folder_mask(self, folder: str, *, keep: bool = False) -> int:
        """Bits of the detectors a needle of which is in `folder` (ending in '/' or '').

        A needle is in a folder when it is in one of its segments, so the mask is the
        parent folder's or'ed with the last segment's (both cached). A folder asked for
        itself is not kept unless `keep`: sorted keys ask for each folder once, and only
        the parents of folders (asked for again and again) are worth keeping."""
        mask = self._folders.get(folder)
        if mask is not None:
            return mask
        if not folder:
            return self.always
        cut = folder.rfind("/", 0, len(folder) - 1) + 1
        up = folder[:cut]
        seg = (folder[cut:-1], cut > 0)
        seg_mask = self._segments.get(seg)
        if seg_mask is None:
            seg_mask = self._segment_mask(*seg)
            if len(self._segments) >= _MAX_NAMES:
                self._segments.clear()
            self._segments[seg] = seg_mask
        up_mask = self._folders.get(up)  # usually kept: the folder's siblings asked for it
        if up_mask is None:
            up_mask = self.folder_mask(up, keep=True)
        mask = up_mask | seg_mask
        if keep:
            if len(self._folders) >= _MAX_NAMES:
                self._folders.clear()
            self._folders[folder] = mask
        return mask

    def _segment_mask(self, seg: str, after_slash: bool) -> int:
        """Needles in '/' + seg + '/' (in seg + '/' for a key's first segment)."""
        text = ("/" if after_slash else "") + seg + "/"
        mask = self.always
        for needle, bits in self._needles:
            if needle in text:
                mask |= bits
        return mask

    def name_mask(self, name: str) -> int:
        """Bits of the detectors a needle or suffix of which matches '/' + `name`."""
        mask = self._names.get(name)
        if mask is not None:
            return mask
        if not name:
            mask = self.all
        else:
            mask = self.always
            s = "/" + name
            for needle, bits in self._needles:
                if needle in s:
                    mask |= bits
            for suffix, bits in self._suffixes:
                if s.endswith(suffix):
                    mask |= bits
        if len(self._names) >= _MAX_NAMES:
            self._names.clear()
        self._names[name] = mask
        return mask

    def of_mask(self, mask: int) -> Candidates:
        """(registry index, claim) of the detectors in `mask`, in registry order."""
        found = self._sets.get(mask)
        if found is None:
            found = tuple((i, d.claim) for i, d in enumerate(self.detectors) if mask & (1 << i))
            self._sets[mask] = found
        return found

    def candidates(self, key: str) -> Candidates:
        """The detectors that may claim `key` (those left out return None for it)."""
        cut = key.rfind("/") + 1
        return self.of_mask(self.folder_mask(key[:cut]) | self.name_mask(key[cut:]))
