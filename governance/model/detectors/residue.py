"""Leftovers of failed or interrupted writes: `*.tmp`, `*.partial`, `*.incomplete` files,
Orbax staging folders and Hugging Face `tmp-checkpoint-*` folders (staged, then renamed).
Incomplete multipart uploads are residue too; they carry an `upload_id` rather than a
telling key, so classification handles them before detectors.

Orbax stages a save in `<name>.orbax-checkpoint-tmp/` (current Orbax: `atomicity.
_get_tmp_directory`, no timestamp) or `<name>.orbax-checkpoint-tmp-<timestamp>/` (older
Orbax) and renames it when the save is done: under either name it is residue, never a
checkpoint, whatever it holds (`_CHECKPOINT_METADATA`, items with their `_METADATA`).
"""

from __future__ import annotations

from governance.model.detectors.base import (
    Claim,
    Context,
    Detector,
    Verdict,
    artifact,
    digit_segment,
    find_segment,
)
from governance.model.types import Artifact, CatalogObject, Component, Kind

TMP_SUFFIXES = (".tmp", ".partial", ".incomplete", ".temp")
ORBAX_TMP = ".orbax-checkpoint-tmp"
"""How an Orbax staging folder's name ends (current Orbax), or goes on with `-<timestamp>`
(older Orbax): see `orbax_staging`."""


def orbax_staging(key: str) -> str | None:
    """The prefix of `key` up to and with its first Orbax staging folder
    (`<name>.orbax-checkpoint-tmp/` or `<name>.orbax-checkpoint-tmp-<timestamp>/`), or None.
    Cheap: `str.find`, no regex (asked of every key holding the needle)."""
    n = len(ORBAX_TMP)
    i = key.find(ORBAX_TMP)
    while i != -1:
        j = i + n
        end = key.find("/", j)
        if end == -1:
            return None  # a file's own name: not a folder
        if end == j or key[j] == "-":
            return key[: end + 1]
        i = key.find(ORBAX_TMP, j)
    return None


def residue_component(name: str) -> Component:
    """Residue is removed whole; its parts have no role worth keeping."""
    return Component.OTHER


class ResidueDetector(Detector):
    """Temporary files and staging folders."""

    layout = "residue"
    kind = Kind.RESIDUE
    needles = (ORBAX_TMP, "tmp-checkpoint-")
    suffixes = TMP_SUFFIXES

    def claim(self, key: str) -> Claim | None:
        if ORBAX_TMP in key:
            staged = orbax_staging(key)
            if staged is not None:
                return Claim(staged, deep=True)
        if "tmp-checkpoint-" in key:
            unit = digit_segment(key, "tmp-checkpoint-")
            if unit:
                return Claim(unit, deep=True)
        if key.endswith(TMP_SUFFIXES):
            return Claim(key)
        return None

    def build(self, unit: str, members: list[CatalogObject], ctx: Context) -> Artifact:
        if ORBAX_TMP in unit and orbax_staging(unit) is not None:
            reason, layout = "Orbax staging folder (never committed)", "orbax"
        elif find_segment(unit, "tmp-checkpoint-") != -1:
            reason, layout = "Trainer staging folder tmp-checkpoint-* (never renamed)", "hf"
        else:
            reason, layout = "temporary or partial file", "tmp"
        return artifact(
            unit,
            Kind.RESIDUE,
            layout,
            members,
            residue_component,
            verdict=Verdict(False, reason),
            strippable=False,
        )


def upload_artifact(obj: CatalogObject) -> Artifact:
    """One incomplete multipart upload: residue to abort."""
    return artifact(
        obj.key,
        Kind.RESIDUE,
        "multipart-upload",
        [obj],
        residue_component,
        verdict=Verdict(False, f"incomplete multipart upload {obj.upload_id}"),
        strippable=False,
    )


__all__ = ["ORBAX_TMP", "ResidueDetector", "orbax_staging", "upload_artifact"]
