"""Durations, sizes and URL globs of the policy language."""

from __future__ import annotations

import os
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from governance.policy.select import glob_match, glob_to_regex, normalize_glob, normalize_root_url
from governance.policy.units import (
    MAX_DURATION_SECONDS,
    format_bytes,
    format_duration,
    parse_duration,
    parse_size,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90m", timedelta(minutes=90)),
        ("36h", timedelta(hours=36)),
        ("7d", timedelta(days=7)),
        ("2w", timedelta(weeks=2)),
        ("30s", timedelta(seconds=30)),
        ("1d12h", timedelta(days=1, hours=12)),
        ("1.5h", timedelta(minutes=90)),
        (" 7D ", timedelta(days=7)),
        ("0d", timedelta(0)),
    ],
)
def test_parse_duration(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("7", "add a unit"),
        ("7y", "invalid duration '7y'"),
        ("", "invalid duration"),
        ("-3d", "cannot be negative"),
        (14, "got 14"),
        (True, "got true"),
        (None, "got an empty value"),
        ("36501d", "too long: at most 36500d"),
        ("99999999999999d", "too long"),  # (an OverflowError of timedelta, before)
        ("d7", "invalid duration"),
    ],
)
def test_parse_duration_errors(value: object, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        parse_duration(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("td", "text"),
    [
        (timedelta(days=365), "365d"),
        (timedelta(hours=36), "1d12h"),
        (timedelta(minutes=90), "1h30m"),
        (timedelta(0), "0s"),
    ],
)
def test_format_duration(td: timedelta, text: str) -> None:
    assert format_duration(td) == text


@given(st.integers(min_value=0, max_value=MAX_DURATION_SECONDS))
def test_duration_round_trip(seconds: int) -> None:
    td = timedelta(seconds=seconds)
    assert parse_duration(format_duration(td)) == td


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("512KiB", 512 * 1024),
        ("64MiB", 64 * 2**20),
        ("1.5GiB", 1610612736),
        ("2TB", 2 * 10**12),
        ("100B", 100),
        ("50TiB", 50 * 2**40),
        ("1 kb", 1000),
        ("4096", 4096),
        (4096, 4096),
        ("1.5 GiB", 1610612736),
    ],
)
def test_parse_size(text: str | int, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("12QB", "invalid size unit 'QB'"),
        ("lots", "invalid size 'lots'"),
        ("-1MiB", "cannot be negative"),
        (-5, "cannot be negative"),
        ("1.5", "must be whole"),
        (True, "expected a size"),
    ],
)
def test_parse_size_errors(value: object, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        parse_size(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 B"),
        (512, "512 B"),
        (1024, "1 KiB"),
        (1610612736, "1.5 GiB"),
        (64 * 2**20, "64 MiB"),
        (2**20 - 1, "1 MiB"),
        (50 * 2**40, "50 TiB"),
    ],
)
def test_format_bytes(n: int, text: str) -> None:
    assert format_bytes(n) == text


@given(st.integers(min_value=0, max_value=2**62))
def test_size_round_trips(n: int) -> None:
    assert parse_size(str(n)) == n
    assert parse_size(f"{n}B") == n
    # the display form has one decimal: parsing it back lands within 5% of the value
    back = parse_size(format_bytes(n))
    assert abs(back - n) <= max(1, n * 0.05)


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(["KiB", "MiB", "GiB", "KB"]))
def test_size_units_are_exact(count: int, unit: str) -> None:
    factor = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "KB": 10**3}[unit]
    assert parse_size(f"{count}{unit}") == count * factor


@pytest.mark.parametrize(
    ("pattern", "url", "matches"),
    [
        ("s3://b/releases/**", "s3://b/releases/v1/model.pt", True),
        ("s3://b/releases/**", "s3://b/other/v1", False),
        ("s3://b/*/x", "s3://b/a/x", True),
        ("s3://b/*/x", "s3://b/a/c/x", False),
        ("s3://b/a/**/x", "s3://b/a/x", True),
        ("s3://b/a/**/x", "s3://b/a/1/2/x", True),
        ("s3://b/run-?", "s3://b/run-1", True),
        ("s3://b/run-?", "s3://b/run-/", False),
        ("s3://b/ckpt-[0-9]", "s3://b/ckpt-7", True),
        ("s3://b/ckpt-[!0-9]", "s3://b/ckpt-7", False),
        ("s3://b/a.b", "s3://b/axb", False),
        ("bert-*", "bert-large", True),
    ],
)
def test_glob_match(pattern: str, url: str, matches: bool) -> None:
    assert glob_match(pattern, url) is matches


def test_glob_is_compiled_once() -> None:
    assert glob_to_regex("s3://x/**") is glob_to_regex("s3://x/**")


def test_plain_paths_become_file_urls() -> None:
    assert normalize_glob("/data/x/**") == "file:///data/x/**"
    assert normalize_glob("s3://b/k") == "s3://b/k"
    assert normalize_glob("rel/dir/") == f"file://{os.getcwd()}/rel/dir/"
    assert normalize_root_url("/mnt/scratch") == "file:///mnt/scratch/"
