"""Shared test setup.

Fake AWS credentials are set at import time, before boto3 can read anything, so that no
test can ever reach real AWS with someone's real credentials.
"""

from __future__ import annotations

import os

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
