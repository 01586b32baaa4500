"""Shared test setup.

Fake AWS credentials are set at import time, before boto3 can read anything, so that no
test can ever reach real AWS with someone's real credentials.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_FAKE_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_CONFIG_FILE": "/nonexistent/govern-tests/aws-config",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/govern-tests/aws-credentials",
    "AWS_EC2_METADATA_DISABLED": "true",
}
for _name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE"):
    os.environ.pop(_name, None)
os.environ.update(_FAKE_AWS_ENV)


# Hypothesis profiles. "ci": the same examples on every run (derandomize: a red build can
# be rerun and bisected; it also means no example database), no deadline (a loaded CI
# machine is slow, not wrong), and a reproduction blob printed with every failure.
# GOVERN_HYPOTHESIS_PROFILE names the profile to load ("ci", "default", or any registered
# one; an unknown name fails the run); without it, "ci" when CI is set (to anything but
# "", 0, false or no), else "default", whatever Hypothesis guessed from the environment
# on import (it picks its own "ci" for any CI value, "false" included). `pytest
# --hypothesis-profile NAME` still wins: this file is loaded before the plugin reads that
# option. A test's own `@settings(...)` changes only what it names and takes every other
# value from the profile loaded here (settings made at import inherit the profile: test
# modules are imported after this file).
settings.register_profile(
    "ci",
    parent=settings.get_profile("default"),
    derandomize=True,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],  # as Hypothesis's own "ci" profile
)


def _hypothesis_profile() -> str:
    named = os.environ.get("GOVERN_HYPOTHESIS_PROFILE", "").strip()
    if named:
        return named
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
        return "ci"
    return "default"


settings.load_profile(_hypothesis_profile())
