"""The error tree. Each class carries the exit code from the CLI contract (spec/cli.md).

The CLI maps these to exit codes in one place; core code raises them with a message that
names the input and what is wrong, so the user sees one clear line.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_REFUSED = 3


class GovernanceError(Exception):
    """Base of every error `govern` reports to a user."""

    exit_code = EXIT_FAILED


class BadInputError(GovernanceError):
    """The user gave something unusable: a policy, an argument, a URL, credentials."""

    exit_code = EXIT_BAD_INPUT


class ArgumentError(BadInputError):
    """A command-line argument is wrong."""


class PolicyError(BadInputError):
    """A policy file is invalid; `problems` lists every error found, each with a position."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or [message]


class OutputError(GovernanceError):
    """Standard output (or error) cannot be written: a full disk, an I/O error. What the
    command did until then stands (a plan saved stays saved); the rest is not printed."""


class CatalogError(BadInputError):
    """The catalog cannot be opened or is corrupt."""


class CatalogLostError(CatalogError):
    """The catalog's server went away in the middle of a command (a restart, a
    terminated session, the network): an operation that failed, not bad input. Running
    the command again finishes what it began (apply and restore resume)."""

    exit_code = EXIT_FAILED


class UnknownPlanError(BadInputError):
    """No plan with that id."""


class StorageError(GovernanceError):
    """A storage root failed; the message names the root."""

    def __init__(self, root: str, message: str) -> None:
        super().__init__(f"{root}: {message}")
        self.root = root


class NoSuchRootError(StorageError):
    """The bucket or path does not exist."""

    exit_code = EXIT_BAD_INPUT


class AccessDeniedError(StorageError):
    """Credentials were refused or lack permission."""

    exit_code = EXIT_BAD_INPUT


class BadCredentialsError(StorageError):
    """Credentials are missing, malformed or unknown to the endpoint."""

    exit_code = EXIT_BAD_INPUT


class BadRegionError(StorageError):
    """The region asked for (the policy's `region`, AWS_DEFAULT_REGION) is not one."""

    exit_code = EXIT_BAD_INPUT


class UnreachableError(StorageError):
    """The endpoint did not answer."""


class RefusedError(GovernanceError):
    """An operation was refused on purpose: approval missing, plan stale or expired, a limit."""

    exit_code = EXIT_REFUSED


class ApprovalError(RefusedError):
    """The plan is not approved (or cannot be approved by this identity)."""


class StalePlanError(RefusedError):
    """The world changed since the plan was made."""


class PlanExpiredError(RefusedError):
    """The plan's approval has expired."""


class SafetyLimitError(RefusedError):
    """A plan exceeds a safety limit."""
