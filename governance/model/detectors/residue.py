"""Leftovers of failed or interrupted writes: `*.tmp`, `*.partial`, `*.incomplete` files,
Orbax `*.orbax-checkpoint-tmp-*` folders and Hugging Face `tmp-checkpoint-*` folders
(staged, then renamed). Incomplete multipart uploads are residue too; they carry an
`upload_id` rather than a telling key, so classification handles them before detectors.
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
ORBAX_TMP = ".orbax-checkpoint-tmp-"


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
            i = key.find(ORBAX_TMP)
            end = key.find("/", i)
            if end != -1:
                return Claim(key[: end + 1], deep=True)
        if "tmp-checkpoint-" in key:
            unit = digit_segment(key, "tmp-checkpoint-")
            if unit:
                return Claim(unit, deep=True)
        if key.endswith(TMP_SUFFIXES):
            return Claim(key)
        return None

    def build(self, unit: str, members: list[CatalogObject], ctx: Context) -> Artifact:
        if ORBAX_TMP in unit:
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


__all__ = ["ResidueDetector", "upload_artifact"]
