"""Translate backend exceptions (botocore, fsspec built-ins) into the StorageError tree.

One function serves both stores so that an S3 root gives the same error whether it is read
through boto3 or s3fs. s3fs wraps botocore errors in built-ins (`PermissionError`, ...) and
keeps the botocore error as `__cause__`, so the chain is searched for the most specific
cause first.
"""

from __future__ import annotations

import os

from governance.errors import (
    EXIT_BAD_INPUT,
    AccessDeniedError,
    BadCredentialsError,
    BadRegionError,
    NoSuchRootError,
    StorageError,
    UnreachableError,
)
from governance.storage import s3_bucket_problem

NO_SUCH_ROOT_CODES = frozenset({"NoSuchBucket", "404", "NotFound"})
BUCKET_NAME_CODES = frozenset({"NoSuchBucket", "InvalidBucketName"})
"""Answers about the bucket itself (not a key): for a name that breaks S3's naming rules
they mean the name is wrong, and the message says how (`BadBucketNameError`)."""
ACCESS_DENIED_CODES = frozenset(
    {"AccessDenied", "403", "Forbidden", "AllAccessDisabled", "AccountProblem"}
)
BAD_CREDENTIALS_CODES = frozenset(
    {
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "InvalidToken",
        "ExpiredToken",
        "TokenRefreshRequired",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
    }
)
# botocore exceptions (by class name, so this module imports nothing heavy) meaning the
# credentials could not be found or loaded at all.
_CREDENTIAL_EXCEPTIONS = frozenset(
    {
        "NoCredentialsError",
        "PartialCredentialsError",
        "ProfileNotFound",
        "CredentialRetrievalError",
        "TokenRetrievalError",
        "SSOTokenLoadError",
        "UnauthorizedSSOTokenError",
    }
)
_CONFIG_EXCEPTIONS = frozenset({"ConfigParseError", "ConfigNotFound"})
"""botocore's: the AWS config or credentials file named cannot be read."""
# botocore / aiohttp / urllib3 exception classes meaning the endpoint did not answer.
_UNREACHABLE_EXCEPTIONS = frozenset(
    {
        "ConnectionError",  # botocore.exceptions.ConnectionError: base of endpoint errors
        "HTTPClientError",  # botocore: read timeouts, closed connections
        "ClientConnectorError",  # aiohttp (s3fs)
        "ServerDisconnectedError",
        "ServerTimeoutError",
    }
)


class KeyNotFoundError(StorageError, FileNotFoundError):
    """One key is missing (not the whole root): catchable as FileNotFoundError too."""


class KeyOccupiedError(FileExistsError):
    """A write that must not replace an object (`if_absent`: restore's copy back) found one
    at its key: nothing was written. The store's `copy` turns it into a failed result."""

    def __init__(
        self, uri: str, what: str = "holds an object written since it was checked"
    ) -> None:
        super().__init__(f"{uri} {what}: left as it is")


class BadEndpointError(StorageError):
    """An S3 endpoint that is no URL (`endpoint:` in the policy, AWS_ENDPOINT_URL): bad
    input, exit 2."""

    exit_code = EXIT_BAD_INPUT


class BadBucketNameError(NoSuchRootError):
    """An S3 root's bucket name breaks S3's naming rules and the endpoint has no such
    bucket (or refuses the name): bad input (exit 2), said as what is wrong with the name
    rather than only "does not exist". A legacy name of a bucket that exists is never
    refused (see `storage.s3_bucket_problem`)."""


def client_error_code(exc: BaseException) -> tuple[str, str] | None:
    """(Code, Message) of a botocore ClientError, or None for anything else."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return None
    error = response.get("Error") or {}
    code = str(error.get("Code") or "")
    if not code:
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        code = str(status or "")
    return code, str(error.get("Message") or "")


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and its causes/contexts, outermost first, without loops."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not s for s in seen):
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _class_names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def _from_one(root: str, exc: BaseException) -> StorageError | None:
    """The StorageError for one exception of the chain, if it is recognisable."""
    if isinstance(exc, StorageError):
        return exc
    coded = client_error_code(exc)
    if coded is not None:
        code, message = coded
        text = f"{code}: {message}" if message else code
        if code in BUCKET_NAME_CODES:
            misnamed = _bad_bucket_name(root, code, text)
            if misnamed is not None:
                return misnamed
        if code in NO_SUCH_ROOT_CODES:
            return NoSuchRootError(root, f"does not exist ({text})")
        if code in BAD_CREDENTIALS_CODES:
            return BadCredentialsError(root, f"credentials rejected ({text})")
        if code in ACCESS_DENIED_CODES:
            return AccessDeniedError(root, f"access denied ({text})")
        return StorageError(root, text)
    names = _class_names(exc)
    if "InvalidRegionError" in names:
        return BadRegionError(
            root,
            f"{exc}: check the root's `region` in the policy, or AWS_DEFAULT_REGION / "
            "the profile's region",
        )
    if names & _CREDENTIAL_EXCEPTIONS:
        return BadCredentialsError(root, f"no usable credentials ({exc})")
    if names & _CONFIG_EXCEPTIONS:  # an AWS config or credentials file that cannot be read
        return BadCredentialsError(
            root, f"{exc} (AWS_CONFIG_FILE / AWS_SHARED_CREDENTIALS_FILE, or ~/.aws)"
        )
    if isinstance(exc, ValueError) and str(exc).startswith("Invalid endpoint"):
        named = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        where = " (from AWS_ENDPOINT_URL)" if named else ""
        return BadEndpointError(root, f"{exc}{where}: an endpoint is a URL like https://host")
    if names & _UNREACHABLE_EXCEPTIONS or isinstance(exc, TimeoutError):
        return UnreachableError(root, f"endpoint unreachable ({exc})")
    return None


def _bad_bucket_name(root: str, code: str, text: str) -> BadBucketNameError | None:
    """For an S3 root that the endpoint says has no such bucket, or whose name it refuses:
    the error naming what is wrong with the name (None for a valid name, whose bucket
    simply does not exist). `InvalidBucketName` is bad input even for a name S3's rules
    allow (an S3-compatible store with rules of its own)."""
    scheme, _, rest = root.partition("://")
    if scheme != "s3":
        return None
    bucket = rest.partition("/")[0]
    problem = s3_bucket_problem(bucket)
    if problem is None:
        if code != "InvalidBucketName":
            return None
        return BadBucketNameError(root, f"the endpoint refuses the bucket name {bucket!r} ({text})")
    answer = (
        f"and no bucket of that name exists: {code}"
        if code == "NoSuchBucket"
        else f"the endpoint says {text}"
    )
    return BadBucketNameError(root, f"{bucket!r} is not a valid bucket name: {problem} ({answer})")


def translate(root: str, exc: BaseException) -> StorageError:
    """The most specific StorageError for `exc`, naming `root`. Raise it `from exc`.

    Built-ins are the fallback when no botocore cause is found: FileNotFoundError ->
    NoSuchRootError, PermissionError -> AccessDeniedError, other OSError -> StorageError.
    """
    for link in _chain(exc):
        found = _from_one(root, link)
        if found is not None:
            return found
    if isinstance(exc, NotADirectoryError):  # a file where a folder of the path should be
        return NoSuchRootError(root, f"a file is in the way of a folder ({exc})")
    if isinstance(exc, FileNotFoundError):
        return NoSuchRootError(root, f"does not exist ({exc})")
    if isinstance(exc, PermissionError):
        return AccessDeniedError(root, f"access denied ({exc})")
    return StorageError(root, f"{type(exc).__name__}: {exc}")
