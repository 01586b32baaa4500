"""A copy on one S3 endpoint of an object over CopyObject's 5 GiB, in parts.

boto3's managed copy does this too, but cannot send what a copy govern makes needs:
`BucketKeyEnabled` (an SSE-KMS object under a Bucket Key lost it, and every read of the
copy then called KMS itself, billed per request) and `If-None-Match: *` on the completion
(restore's copy back must never replace an object written at the key meanwhile). Each
part is copied only while the source is the object seen (`x-amz-copy-source-if-match`),
so a source rewritten mid-copy fails the copy, which is then aborted: no half-made
upload is left to bill storage.

Example::

    answer = copy_in_parts(client, {"Bucket": "b", "Key": "runs/r1/model.pt"},
                           PartsCopy(size=12 * GiB, etag="9b2c...-96", dest_bucket="b",
                                     dest_key="archive/model.pt", args={...}))
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client
    from mypy_boto3_s3.type_defs import CopySourceTypeDef

log = logging.getLogger(__name__)

MIN_PART_BYTES = 5 * 1024**2
"""S3's smallest part (all but the last)."""
MAX_PART_BYTES = 5 * 1024**3
MAX_PARTS = 10_000


@dataclass(frozen=True, slots=True)
class PartsCopy:
    """One copy in parts: the source's size and ETag (as a HEAD saw them), where it goes,
    and what the new object is made with (CreateMultipartUpload's arguments: metadata,
    headers, class, encryption, tags)."""

    size: int
    etag: str
    dest_bucket: str
    dest_key: str
    args: Mapping[str, Any] = field(default_factory=dict)
    part_bytes: int = 256 * 1024**2 // 4
    threads: int = 8
    if_absent: bool = False  # complete only where no object is at the key
    if_match: str | None = None  # complete only while the key holds this ETag (a copy onto
    # itself: a write landing after the last part's check is not replaced by old bytes)


def part_ranges(size: int, part_bytes: int) -> list[tuple[int, int]]:
    """Inclusive byte ranges covering `size` bytes: parts of `part_bytes` (raised to S3's
    5 MiB floor, and as far as 10,000 parts need), the last one shorter. Over 10,000
    parts of 5 GiB no upload can hold the object: ValueError."""
    if size > MAX_PARTS * MAX_PART_BYTES:
        raise ValueError(f"{size:,} bytes: over {MAX_PARTS:,} parts of 5 GiB, S3's most")
    part = min(max(part_bytes, MIN_PART_BYTES, -(-size // MAX_PARTS)), MAX_PART_BYTES)
    return [(start, min(start + part, size) - 1) for start in range(0, size, part)]


def copy_in_parts(client: S3Client, source: CopySourceTypeDef, job: PartsCopy) -> dict[str, Any]:
    """Copy `source` as `job` says; CompleteMultipartUpload's answer (its ETag and, on a
    versioned bucket, VersionId). Any failure aborts the upload and is raised: a part's
    PreconditionFailed (the source changed), the completion's (`if_absent`: the key holds
    an object)."""
    upload = client.create_multipart_upload(
        Bucket=job.dest_bucket, Key=job.dest_key, **dict(job.args)
    )["UploadId"]
    try:
        ranges = part_ranges(job.size, job.part_bytes)
        quoted = f'"{job.etag.strip(chr(34))}"'

        def one(numbered: tuple[int, tuple[int, int]]) -> dict[str, Any]:
            number, (first, last) = numbered
            answer = client.upload_part_copy(
                Bucket=job.dest_bucket,
                Key=job.dest_key,
                UploadId=upload,
                PartNumber=number,
                CopySource=source,
                CopySourceRange=f"bytes={first}-{last}",
                CopySourceIfMatch=quoted,
            )
            return {"PartNumber": number, "ETag": answer["CopyPartResult"]["ETag"]}

        with ThreadPoolExecutor(max_workers=max(1, min(job.threads, len(ranges)))) as pool:
            parts = list(pool.map(one, enumerate(ranges, 1)))
        completion: dict[str, Any] = {"MultipartUpload": {"Parts": parts}}
        if job.if_absent:
            completion["IfNoneMatch"] = "*"
        if job.if_match:
            completion["IfMatch"] = f'"{job.if_match.strip(chr(34))}"'
        done = client.complete_multipart_upload(
            Bucket=job.dest_bucket, Key=job.dest_key, UploadId=upload, **completion
        )
    except BaseException:
        try:
            client.abort_multipart_upload(Bucket=job.dest_bucket, Key=job.dest_key, UploadId=upload)
        except Exception as exc:  # (the copy's own error is the one raised)
            log.warning(
                "s3://%s/%s: the failed copy's multipart upload %s could not be aborted (%s): "
                "its parts stay billed until it is (an AbortIncompleteMultipartUpload "
                "lifecycle rule, or `aws s3api abort-multipart-upload`)",
                job.dest_bucket,
                job.dest_key,
                upload,
                exc,
            )
        raise
    return dict(done)
