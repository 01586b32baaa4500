"""Which roots a scan lists and how many parallel calls each gets."""

from __future__ import annotations

from governance.policy import load_policy_text
from governance.scan.targets import resolve_roots

POLICY = """\
version: 1
storage:
  - {name: busy, url: "s3://busy-bucket/", concurrency: 64}
  - {name: plain, url: "s3://plain-bucket/"}
"""


def test_a_root_s_own_concurrency_is_used_unless_the_command_gives_one() -> None:
    """policy.md: `storage[].concurrency` bounds a root's parallel calls, defaulting to the
    global setting. It was validated and then never read: every root got the setting."""
    busy, plain = resolve_roots(load_policy_text(POLICY), ())
    assert (busy.concurrency, plain.concurrency) == (64, None)
    assert busy.workers(None, 16) == 64  # the root's own
    assert plain.workers(None, 16) == 16  # the global setting (GOVERN_CONCURRENCY)
    assert busy.workers(8, 16) == 8  # `govern scan --concurrency 8` wins
    [named] = resolve_roots(load_policy_text(POLICY), ["s3://busy-bucket/"])
    assert named.workers(None, 16) == 64
