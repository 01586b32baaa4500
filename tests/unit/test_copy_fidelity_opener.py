"""Which endpoint a quarantine or archive location opens on (`StoreOpener`), and which
class a quarantine copy is written in (`quarantine_class`). Opening an S3Store asks
nothing of the network: no store here makes a request (see
tests/integration/test_copy_fidelity.py for the copies themselves)."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest

from governance.apply import StoreOpener, StoreSettings
from governance.apply.modes import quarantine_class
from governance.apply.restore import _class_back


def test_the_store_opener_gives_a_destination_the_settings_of_the_root_it_serves() -> None:
    """No store is asked anything here: opening an S3Store makes no request."""
    minio = StoreSettings(
        "s3://ml-artifacts/runs/", endpoint_url="http://minio:9000", region="lab-1"
    )
    opener = StoreOpener([minio, StoreSettings("/data/team/")])
    assert not opener.covers("s3://trash/")  # plan roots: unchanged
    trash: Any = opener.destination("s3://trash/q/", serves="s3://ml-artifacts/runs/")
    assert trash.endpoint_url == "http://minio:9000"
    assert opener("s3://trash/q/") is trash  # a later plain call: the same settings
    assert opener("s3://trash/q/p-1/") is not trash
    assert opener("s3://trash/q/p-1/").endpoint_url == "http://minio:9000"  # type: ignore[attr-defined]
    # never served in this process (a purge): the one endpoint all S3 roots share
    assert opener("s3://elsewhere/").endpoint_url == "http://minio:9000"  # type: ignore[attr-defined]
    # a destination covered by a root of its own keeps that root's settings
    aws = StoreSettings("s3://cold/", region="eu-west-1")
    mixed = StoreOpener([minio, aws])
    cold: Any = mixed.destination("s3://cold/archive/", serves="s3://ml-artifacts/runs/")
    assert cold.endpoint_url is None
    # roots on several endpoints, a location no root served yet: defaults, said once
    assert mixed("s3://elsewhere/").endpoint_url is None  # type: ignore[attr-defined]


def test_roots_on_several_endpoints_leave_an_unknown_location_to_the_defaults(
    caplog: pytest.LogCaptureFixture,
) -> None:
    opener = StoreOpener(
        [StoreSettings("s3://bkt-a/", endpoint_url="http://one:9000"), StoreSettings("s3://bkt-b/")]
    )
    with caplog.at_level(logging.WARNING, logger="governance.apply.types"):
        opener("s3://elsewhere/")
        opener("s3://elsewhere/")
    assert [r.getMessage() for r in caplog.records] == [
        "s3://elsewhere/ is under no storage root, and the storage roots use different "
        "endpoints or credentials: opened with the default ones"
    ]
    served: Any = opener.destination("s3://elsewhere/", serves="s3://bkt-a/")
    assert served.endpoint_url == "http://one:9000"


def test_quarantine_class_keeps_a_class_only_where_that_costs_less() -> None:
    gib, two_weeks, month = 2**30, timedelta(days=14), timedelta(days=30)
    assert quarantine_class("GLACIER_IR", two_weeks, gib) == "STANDARD"  # bills 90 days
    assert quarantine_class("GLACIER_IR", month, gib) == "GLACIER_IR"
    assert quarantine_class("STANDARD_IA", two_weeks, gib) == "STANDARD"
    assert quarantine_class("STANDARD_IA", month, gib) == "STANDARD_IA"
    assert quarantine_class("STANDARD_IA", month, 1000) == "STANDARD"  # bills 128 KiB
    assert quarantine_class("ONEZONE_IA", two_weeks, gib) == "ONEZONE_IA"
    assert quarantine_class("INTELLIGENT_TIERING", month, gib) == "STANDARD"
    assert quarantine_class(None, month, gib) == "STANDARD"
    # cheaper to hold, but a copy in them could not be copied back without a restore
    assert quarantine_class("DEEP_ARCHIVE", two_weeks, gib) == "STANDARD"
    assert quarantine_class("GLACIER", month, gib) == "STANDARD"


def test_restore_puts_an_object_back_in_the_class_it_had() -> None:
    assert _class_back("GLACIER_IR", "STANDARD_IA") == "GLACIER_IR"  # as it was removed
    assert _class_back("STANDARD", "GLACIER_IR") == "GLACIER_IR"  # a STANDARD quarantine
    assert _class_back("STANDARD", None) == "STANDARD"
    assert _class_back(None, None) is None  # a filesystem
