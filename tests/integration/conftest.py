"""A real S3 API over HTTP: moto's server, in-process, on a free port.

Credentials are fake (see tests/conftest.py) and every client is pointed at the local
endpoint, so nothing here can reach AWS.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import pytest
from moto.core import DEFAULT_ACCOUNT_ID
from moto.s3.models import s3_backends
from moto.server import ThreadedMotoServer

assert os.environ["AWS_ACCESS_KEY_ID"] == "testing", "tests/conftest.py must set fake creds"


@contextmanager
def running_moto() -> Iterator[str]:
    """A moto server on a free local port, for the block: its endpoint URL."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    """The endpoint URL of a moto server shared by the whole session."""
    with running_moto() as endpoint:
        yield endpoint


@pytest.fixture
def s3_client(moto_server: str) -> Any:
    """A plain boto3 client on the moto endpoint, for arranging and checking state."""
    return boto3.client("s3", endpoint_url=moto_server, region_name="us-east-1")


@pytest.fixture
def s3_bucket(s3_client: Any) -> str:
    """A fresh, uniquely named, empty bucket."""
    name = f"test-{uuid.uuid4().hex[:20]}"
    s3_client.create_bucket(Bucket=name)
    return name


PutMany = Callable[..., None]


@pytest.fixture
def put_many() -> PutMany:
    """`put_many(bucket, keys, body=b"x")`: create many objects fast (see `_put_many`)."""
    return _put_many


def _put_many(bucket: str, keys: Iterable[str], body: bytes = b"x") -> None:
    """Create objects straight in the moto backend that serves the HTTP endpoint.

    Thousands of HTTP PUTs through the in-process server take seconds; this takes
    milliseconds. Only the arranging is shortcut: every read under test goes over HTTP.
    """
    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    for key in keys:
        backend.put_object(bucket, key, body)


def age_upload_parts(bucket: str, upload_id: str, days: float = 10) -> None:
    """Date the parts of an incomplete upload `days` back, in the moto backend behind
    the HTTP endpoint: an upload's age is its newest part's (moto stamps parts now, and
    reports every upload as initiated on one fixed date in 2010)."""
    from datetime import UTC, datetime, timedelta

    upload = s3_backends[DEFAULT_ACCOUNT_ID]["aws"].get_bucket(bucket).multiparts[upload_id]
    when = (datetime.now(UTC) - timedelta(days=days)).replace(tzinfo=None)  # (moto: naive)
    for part in upload.parts.values():
        part.last_modified = when


def deny_deletes(s3_client: Any, bucket: str, resource: str) -> None:
    """A bucket policy denying everyone `s3:DeleteObject` on `resource` (a key or a
    `prefix/*` pattern of the bucket): moto answers those deletes AccessDenied."""
    statement = {
        "Effect": "Deny",
        "Principal": "*",
        "Action": "s3:DeleteObject",
        "Resource": f"arn:aws:s3:::{bucket}/{resource}",
    }
    policy = {"Version": "2012-10-17", "Statement": [statement]}
    s3_client.put_bucket_policy(Bucket=bucket, Policy=json.dumps(policy))
