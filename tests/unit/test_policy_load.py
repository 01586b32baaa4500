"""Loading policies: the shipped examples validate, and every error names file:line:col."""

from __future__ import annotations

import hashlib
import json
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from governance.cli.main import cli
from governance.cli.policy_cmd import policy as policy_group
from governance.errors import EXIT_BAD_INPUT, PolicyError
from governance.model.types import Component, Kind, RunStatus
from governance.policy import Policy, load_policy, load_policy_text
from governance.policy.models import StorageClass

REPO = Path(__file__).resolve().parents[2]

HEAD = """\
version: 1
storage:
  - name: artifacts
    url: s3://ml-artifacts/
"""  # four lines: the cases below start at line 5


def write(tmp_path: Path, body: str, head: str = HEAD) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(head + textwrap.dedent(body))
    return path


def problems(tmp_path: Path, body: str, head: str = HEAD) -> list[str]:
    path = write(tmp_path, body, head)
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    assert info.value.exit_code == EXIT_BAD_INPUT
    prefix = f"{path}:"
    assert all(p.startswith(prefix) for p in info.value.problems)
    return [p[len(prefix) :] for p in info.value.problems]


# ----------------------------------------------------------------------------- valid


def test_example_policy_validates() -> None:
    path = REPO / "policies" / "retention.yaml"
    loaded = load_policy(path)
    assert loaded.source_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert loaded.source_path == path
    assert [r.name for r in loaded.rules] == [
        "failed-runs", "residue", "checkpoints", "logs", "datasets",
    ]  # fmt: skip
    assert loaded.storage[1].url == "file:///mnt/shared/scratch/"
    assert loaded.layout.placeholders == {"team", "project"}
    ckpt = loaded.rule("checkpoints")
    assert ckpt.select.kind == (Kind.CHECKPOINT,)
    assert ckpt.otherwise == "delete"
    assert ckpt.tiers is not None
    recent, mid, long = ckpt.tiers
    assert (recent.keep_last, recent.max_age) == (3, timedelta(days=30))
    assert mid.keep_components == (Component.WEIGHTS, Component.METADATA)
    assert mid.strips
    assert long.keep == ("final", "best")
    assert long.best_metric is not None
    assert long.best_metric.mode == "min"
    assert long.archive is not None
    assert long.archive.storage_class is StorageClass.DEEP_ARCHIVE
    logs = loaded.rule("logs")
    assert logs.transition is not None
    assert logs.expire is not None
    assert [s.storage_class for s in logs.transition] == ["STANDARD_IA", "GLACIER_IR"]
    assert logs.expire.after == timedelta(days=365)
    assert loaded.rule("datasets").select.min_size == 2**30
    assert loaded.rule("failed-runs").select.run_status == (
        RunStatus.FAILED, RunStatus.ABANDONED,
    )  # fmt: skip
    assert loaded.protect.tags == {"retain": "true", "legal-hold": "*"}
    assert loaded.protect.paths == ("s3://ml-artifacts/releases/**",)
    assert loaded.dedupe is not None
    assert loaded.dedupe.action == "delete"
    assert loaded.approval.expires_after == timedelta(hours=72)
    assert loaded.safety.max_delete_bytes == 50 * 2**40
    assert loaded.price("DEEP_ARCHIVE") == 0.00099
    assert loaded.price("GLACIER_IR") == 0.004  # a built-in default
    assert loaded.budgets[0].select.attributes == {"team": ("nlp",)}


def test_minimal_policy_gets_safe_defaults() -> None:
    loaded = load_policy(REPO / "policies" / "minimal.yaml")
    assert loaded.protect.min_age == timedelta(days=3)
    assert loaded.safety.max_delete_fraction == 0.5
    assert loaded.safety.max_delete_bytes is None
    assert loaded.approval.require_for == ("delete", "strip", "dedupe", "archive", "abort_upload")
    assert loaded.approval.approvers == 1
    assert loaded.approval.allow_self_approval is False
    assert loaded.approval.expires_after == timedelta(hours=72)
    assert (loaded.approval.mode, loaded.approval.notice_period) == ("approve", timedelta(days=7))
    assert loaded.apply.delete_mode == "quarantine"
    assert loaded.apply.quarantine_for == timedelta(days=14)
    assert loaded.apply.quarantine_url_for("s3://ml-artifacts/a/b/") == (
        "s3://ml-artifacts/.govern-quarantine/"
    )
    assert loaded.apply.quarantine_url_for("file:///mnt/scratch/") == (
        "file:///mnt/.govern-quarantine/"
    )
    assert loaded.dedupe is None
    assert loaded.layout.runs == ()
    assert loaded.notify == ()
    assert loaded.budgets == ()


def test_empty_rules_and_text_loading() -> None:
    loaded = load_policy_text(HEAD + "rules: []\n", "inline")
    assert loaded.rules == ()
    assert loaded.source_sha256 == hashlib.sha256((HEAD + "rules: []\n").encode()).hexdigest()
    assert isinstance(loaded, Policy)


def test_classify_options() -> None:
    loaded = load_policy(REPO / "policies" / "retention.yaml")
    as_of = datetime(2026, 11, 30, tzinfo=UTC)
    opts = loaded.classify_options(as_of)
    assert opts.as_of == as_of
    assert opts.run_templates == ("{team}/{project}/runs/{run}/", "runs/{run}/")
    assert opts.completed_markers == ("COMPLETED", "_SUCCESS")
    assert opts.abandoned_after == timedelta(days=7)
    assert opts.grace == timedelta(days=3)
    with pytest.raises(ValueError, match="timezone-aware"):
        loaded.classify_options(datetime(2026, 1, 1))


def test_additions_validate(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        approval: {mode: notice, notice_period: 2d}
        apply: {concurrency: 8, quarantine_url: ./q}
        notify:
          - {type: slack, url: "https://hooks.slack.com/x", on: [plan, failure]}
          - {type: email, to: ops@example.com}
        """,
    )
    loaded = load_policy(path)
    assert loaded.approval.notice_period == timedelta(days=2)
    assert loaded.apply.concurrency == 8
    assert loaded.apply.quarantine_url == f"file://{Path.cwd()}/q/"
    assert loaded.notify[1].to == ("ops@example.com",)
    assert loaded.notify[1].on == ("plan", "apply", "budget", "failure")


# ----------------------------------------------------------------------------- errors


def test_unknown_key_suggests(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        """\
        rules:
          - name: checkpoints
            select: {kind: checkpoint}
            tiers:
              - name: recent
                kep_last: 3
            otherwise: delete
        """,
    )
    assert found == [
        "10:9: rules[0].tiers[0].kep_last: unknown key 'kep_last' (did you mean 'keep_last'?)"
    ]


def test_bad_duration(tmp_path: Path) -> None:
    found = problems(tmp_path, "rules:\n  - {name: r, expire: {after: 14days}}\n")
    assert found == [
        "6:31: rules[0].expire.after: invalid duration '14days': expected e.g. 90m, 36h, 7d, 2w"
    ]


def test_bad_size(tmp_path: Path) -> None:
    found = problems(tmp_path, "safety:\n  max_delete_bytes: 5 TQ\n")
    assert len(found) == 1
    assert found[0].startswith("6:21: safety.max_delete_bytes: invalid size unit 'TQ'")


def test_wrong_type(tmp_path: Path) -> None:
    found = problems(tmp_path, "approval:\n  approvers: two\n  allow_self_approval: [x]\n")
    assert found == [
        "6:14: approval.approvers: expected a whole number, got a string 'two'",
        "7:24: approval.allow_self_approval: expected true or false, got a list ['x']",
    ]


def test_a_misspelt_choice_lists_the_choices_and_suggests_one(tmp_path: Path) -> None:
    body = """\
        apply: {delete_mode: quarentine}
        rules:
          - name: c
            select: {kind: chekpoint}
            tiers: [{name: t, keep: [fnal]}]
            otherwise: delet
        """
    assert problems(tmp_path, body) == [
        "5:22: apply.delete_mode: expected one of 'quarantine', 'versioned' or 'permanent', "
        "got 'quarentine' (did you mean 'quarantine'?)",
        "8:20: rules[0].select.kind: expected one of 'checkpoint', 'weights', 'dataset', "
        "'log', 'eval', 'residue' or 'other', got 'chekpoint' (did you mean 'checkpoint'?)",
        "9:30: rules[0].tiers[0].keep[0]: expected one of 'final' or 'best', got 'fnal' "
        "(did you mean 'final'?)",
        "10:16: rules[0].otherwise: expected one of 'delete' or 'keep', got 'delet' "
        "(did you mean 'delete'?)",
    ]


def test_a_list_given_as_a_mapping_says_list(tmp_path: Path) -> None:
    body = "rules:\n  - name: c\n    select: {kind: log}\n    tiers: {name: x, keep_last: 1}\n"
    found = problems(tmp_path, body)
    assert found[0] == "8:12: rules[0].tiers: expected a list, got a mapping"


def test_keep_and_keep_components_take_one_value_without_brackets(tmp_path: Path) -> None:
    body = """\
        rules:
          - name: c
            select: {kind: checkpoint}
            tiers: [{name: t, keep_last: 1, keep: final, keep_components: weights}]
            otherwise: keep
        """
    [tier] = load_policy(write(tmp_path, body)).rules[0].tiers or ()
    assert tier.keep == ("final",)
    assert tier.keep_components == (Component.WEIGHTS,)


def test_numbers_and_switches_are_not_coerced(tmp_path: Path) -> None:
    # A quoted number, a boolean count or a "yes" would silently change what is kept.
    found = problems(
        tmp_path,
        """\
        safety: {max_delete_fraction: "0.5"}
        approval: {approvers: 2.0, allow_self_approval: "yes"}
        pricing: {STANDARD: "0.023"}
        rules:
          - name: checkpoints
            select: {kind: checkpoint}
            tiers:
              - {name: recent, keep_last: true, keep_every_steps: "5000"}
            otherwise: delete
        """,
    )
    assert found == [
        "5:31: safety.max_delete_fraction: expected a number, got a string '0.5'",
        "6:23: approval.approvers: expected a whole number, got a number 2.0",
        "6:49: approval.allow_self_approval: expected true or false, got a string 'yes'",
        "7:21: pricing.STANDARD: expected a number, got a string '0.023'",
        "12:35: rules[0].tiers[0].keep_last: expected a whole number, got a boolean true",
        "12:59: rules[0].tiers[0].keep_every_steps: expected a whole number, got a string '5000'",
    ]


def test_an_integer_is_a_valid_fraction_and_price(tmp_path: Path) -> None:
    loaded = load_policy(
        write(tmp_path, "safety: {max_delete_fraction: 1}\npricing: {STANDARD: 1}\n")
    )
    assert loaded.safety.max_delete_fraction == 1.0
    assert loaded.price("STANDARD") == 1.0


def test_overlapping_roots(tmp_path: Path) -> None:
    head = (
        "version: 1\nstorage:\n  - {name: a, url: s3://ml-artifacts/}\n"
        "  - {name: b, url: s3://ml-artifacts/nlp}\n"
    )
    found = problems(tmp_path, "", head)
    assert len(found) == 1
    assert found[0].startswith("4:20: storage[1].url: root s3://ml-artifacts/nlp/ is inside ")
    assert "roots must not overlap" in found[0]


@pytest.mark.parametrize(
    ("first", "second", "why"),
    [
        ("s3://ml-artifacts/", "s3a://ml-artifacts/nlp/", "is inside root s3://ml-artifacts/"),
        ("s3://ml-artifacts/x/", "S3A://ml-artifacts/x", "is listed twice"),
        ("/data/x/", "file://localhost/data/x/y", "is inside root file:///data/x/"),
    ],
)
def test_roots_overlap_as_they_are_opened_not_as_spelled(
    tmp_path: Path, first: str, second: str, why: str
) -> None:
    head = (
        f"version: 1\nstorage:\n  - {{name: a, url: '{first}'}}\n  - {{name: b, url: '{second}'}}\n"
    )
    found = problems(tmp_path, "", head)
    assert len(found) == 1
    assert found[0].startswith("4:20: storage[1].url: root ")
    assert why in found[0]


def test_roots_that_only_share_a_name_prefix_do_not_overlap(tmp_path: Path) -> None:
    head = "version: 1\nstorage:\n  - {name: a, url: s3://data/}\n  - {name: b, url: s3://data-archive/}\n"
    assert len(load_policy(write(tmp_path, "", head)).storage) == 2


ARCHIVE_RULE = """\
rules:
  - name: ckpt
    select: {kind: checkpoint}
    tiers:
      - {name: recent, keep_last: 1}
      - {name: cold, keep: [final], archive: {url: '%s'}}
    otherwise: delete
"""  # the archive url is at line 10, column 52


@pytest.mark.parametrize(
    "url",
    [
        "s3://ml-artifacts/",  # the root itself: each copy would land on its original
        "s3a://ml-artifacts/archive/",  # inside it: copies planned again as its data
    ],
)
def test_an_archive_url_must_be_outside_every_root(tmp_path: Path, url: str) -> None:
    found = problems(tmp_path, ARCHIVE_RULE % url)
    shown = url.replace("s3a://", "s3://")  # (named as object URLs spell it)
    assert found == [
        f"10:52: rules[0].tiers[1].archive.url: archive.url {shown} overlaps root "
        "s3://ml-artifacts/: archived copies must go outside every root (a copy there would "
        "overwrite its original, or be planned again as the root's data)"
    ]


def test_a_root_inside_the_archive_url_is_refused_and_a_sibling_is_not(tmp_path: Path) -> None:
    head = "version: 1\nstorage:\n  - {name: a, url: s3://data/runs/}\n"
    found = problems(tmp_path, "\n" + ARCHIVE_RULE % "s3://data/", head)
    assert len(found) == 1
    assert "archive.url s3://data/ overlaps root s3://data/runs/" in found[0]
    policy = load_policy(write(tmp_path, "\n" + ARCHIVE_RULE % "s3://data/archive/", head))
    assert policy.rules[0].tiers is not None


def test_an_empty_count_says_so(tmp_path: Path) -> None:
    assert problems(tmp_path, "approval: {approvers: }\n") == [
        "5:22: approval.approvers: expected a whole number, got an empty value"
    ]


def test_an_empty_storage_list_says_it_needs_an_entry(tmp_path: Path) -> None:
    """Not pydantic's "Tuple should have at least 1 item after validation"."""
    found = problems(tmp_path, "", head="version: 1\nstorage: []\n")
    assert found == ["2:10: storage: needs at least one entry, got none"]


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("s3://ml/", "'ml' is not a valid bucket name"),
        ("file://otherhost/x/", "file URLs need an absolute path"),
        ("nosuchscheme://x/", "unknown scheme 'nosuchscheme'"),
    ],
)
def test_a_root_that_cannot_be_opened_is_a_policy_error(tmp_path: Path, url: str, why: str) -> None:
    head = f"version: 1\nstorage:\n  - {{name: a, url: '{url}'}}\n"
    found = problems(tmp_path, "", head)
    assert len(found) == 1
    assert found[0].startswith("3:20: storage[0].url: ")
    assert why in found[0]


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("s3://", "storage URL 's3://': no bucket name"),
        ("s3:///x/", "no bucket name"),
        ("s3://ml/", "'ml' is not a valid bucket name"),
        ("foo://x/", "storage URL 'foo://x/': unknown scheme 'foo'"),
        ("file://otherhost/q/", "file URLs need an absolute path"),
    ],
)
def test_a_quarantine_url_that_cannot_be_opened_is_a_policy_error(
    tmp_path: Path, url: str, why: str
) -> None:
    """Checked as roots are, so scan and apply never meet it first (without a position)."""
    found = problems(tmp_path, f"apply: {{quarantine_url: '{url}'}}\n")
    assert len(found) == 1
    assert found[0].startswith("5:25: apply.quarantine_url: ")
    assert why in found[0]


def test_an_archive_url_that_cannot_be_opened_is_a_policy_error(tmp_path: Path) -> None:
    found = problems(tmp_path, ARCHIVE_RULE % "nosuchscheme://cold/")
    assert found == [
        "10:52: rules[0].tiers[1].archive.url: storage URL 'nosuchscheme://cold/': "
        "unknown scheme 'nosuchscheme'"
    ]


@pytest.mark.parametrize(
    ("endpoint", "why"),
    [
        ("not a url", "expected http://host[:port] or https://host[:port]"),
        ("ftp://x", "expected http://host[:port] or https://host[:port]"),
        ("localhost:9000", "expected http://host[:port] or https://host[:port]"),
        ("http://", "no host name"),
        ("http://minio:99999", "Port out of range"),
        ("http://minio:nine", "Port could not be cast"),
        ("http://key:secret@minio:9000", "credentials come from the profile"),
        ("http://minio:9000/?x=1", "takes no query or fragment"),
    ],
)
def test_a_bad_endpoint_url_is_a_policy_error(tmp_path: Path, endpoint: str, why: str) -> None:
    head = HEAD + f"    endpoint_url: '{endpoint}'\n"
    found = problems(tmp_path, "", head)
    assert len(found) == 1
    assert found[0].startswith(f"5:19: storage[0].endpoint_url: endpoint URL {endpoint!r}: ")
    assert why in found[0]


@pytest.mark.parametrize(
    "endpoint",
    ["http://127.0.0.1:9000", "https://s3.eu-west-1.example.com", "http://[::1]:9000/s3/"],
)
def test_endpoint_urls_of_any_http_host_validate(tmp_path: Path, endpoint: str) -> None:
    loaded = load_policy(write(tmp_path, "", HEAD + f"    endpoint_url: '{endpoint}'\n"))
    assert loaded.storage[0].endpoint_url == endpoint


def test_a_url_glob_with_an_unknown_scheme_is_a_policy_error(tmp_path: Path) -> None:
    """Such a glob matches nothing: a protection that silently protects nothing."""
    found = problems(
        tmp_path,
        """\
        protect: {paths: ["s4://ml-artifacts/releases/**", "s3://ml-artifacts/keep/**"]}
        dedupe: {keep: "gz://ml-artifacts/canon/**"}
        rules:
          - {name: old, select: {path: "s5://x/**"}, expire: {after: 1d}}
        """,
    )
    assert found == [
        "5:19: protect.paths[0]: URL glob 's4://ml-artifacts/releases/**': unknown scheme 's4'",
        "6:16: dedupe.keep: URL glob 'gz://ml-artifacts/canon/**': unknown scheme 'gz'",
        "8:32: rules[0].select.path: URL glob 's5://x/**': unknown scheme 's5'",
    ]


def test_file_url_globs_are_absolute_and_localhost_is_the_local_disk(tmp_path: Path) -> None:
    """`file://localhost/x` is `file:///x` (object URLs are spelled so: otherwise the glob
    matches nothing); `file://data/x` names a host, not a path, and is refused."""
    policy = load_policy(write(tmp_path, 'protect: {paths: ["file://localhost/data/keep/**"]}\n'))
    assert policy.protect.paths == ("file:///data/keep/**",)
    found = problems(tmp_path, 'protect: {paths: ["file://data/keep/**"]}\n')
    assert found == [
        "5:19: protect.paths[0]: URL glob 'file://data/keep/**': file URLs need an absolute "
        "path (file:///abs/dir/**)"
    ]


def test_block_given_as_list(tmp_path: Path) -> None:
    found = problems(tmp_path, "safety:\n  - 1\n")
    assert found == ["6:3: safety: expected a mapping, got a list"]


def test_unknown_storage_class(tmp_path: Path) -> None:
    found = problems(tmp_path, "pricing:\n  STANDARD: 0.02\n  GLACIR: 0.004\n")
    assert len(found) == 1
    assert found[0].startswith(
        "7:3: pricing.GLACIR: unknown storage class 'GLACIR' (did you mean 'GLACIER'?)"
    )


def test_tier_that_keeps_nothing(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        """\
        rules:
          - name: checkpoints
            tiers:
              - name: recent
                keep_last: 2
              - name: empty
                max_age: 30d
            otherwise: keep
        """,
    )
    assert found == [
        "10:9: rules[0].tiers[1]: tier 'empty' keeps nothing: give keep_last, "
        "keep_every_steps, keep_daily, keep_weekly or keep"
    ]


def test_a_rules_own_checks_are_reported_with_its_keys_errors(tmp_path: Path) -> None:
    """All problems at once: pydantic checks a rule's keys together only once each key
    is valid, so a bad value in a tier used to hide the rule's missing `otherwise`."""
    found = problems(
        tmp_path,
        """\
        rules:
          - name: checkpoints
            select: {kind: checkpoint}
            tiers:
              - {name: recent, keep_last: "3"}
              - {name: old, max_age: 90d}
        """,
    )
    assert found == [
        "8:5: rules[0].tiers: 'otherwise: delete|keep' is required with tiers "
        "(what happens to a checkpoint no tier keeps)",
        "9:35: rules[0].tiers[0].keep_last: expected a whole number, got a string '3'",
        "10:9: rules[0].tiers[1]: tier 'old' keeps nothing: give keep_last, "
        "keep_every_steps, keep_daily, keep_weekly or keep",
    ]


def test_bounds_and_forms_are_said_in_words_with_the_value(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        """\
        safety: {max_delete_fraction: 1.5}
        notify: [{type: webhook, url: "ftp://hooks.example/x"}]
        """,
        head=HEAD.replace("name: artifacts", "name: my bucket"),
    )
    assert found == [
        "3:11: storage[0].name: expected a name of letters, digits, '_', '.' and '-', "
        "got 'my bucket'",
        "5:31: safety.max_delete_fraction: must be at most 1.0, got 1.5",
        "6:31: notify[0].url: expected an http:// or https:// URL, got 'ftp://hooks.example/x'",
    ]


def test_otherwise_missing(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        """\
        rules:
          - name: checkpoints
            select: {kind: checkpoint}
            tiers:
              - {name: recent, keep_last: 3}
        """,
    )
    assert found == [
        "8:5: rules[0].tiers: 'otherwise: delete|keep' is required with tiers "
        "(what happens to a checkpoint no tier keeps)"
    ]


def test_transition_up_the_waterfall(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        """\
        rules:
          - name: logs
            transition:
              - {after: 14d, storage_class: GLACIER_IR}
              - {after: 60d, storage_class: STANDARD_IA}
        """,
    )
    assert len(found) == 1
    assert found[0].startswith(
        "9:37: rules[0].transition[1].storage_class: transition to STANDARD_IA goes up "
        "the waterfall from GLACIER_IR"
    )


def test_the_waterfall_is_s3_lifecycles_standard_ia_before_intelligent_tiering(
    tmp_path: Path,
) -> None:
    """S3 lifecycle moves STANDARD_IA objects to INTELLIGENT_TIERING, never the reverse."""
    ladder = """\
        rules:
          - name: logs
            transition:
              - {after: 30d, storage_class: %s}
              - {after: 60d, storage_class: %s}
        """
    loaded = load_policy(write(tmp_path, ladder % ("STANDARD_IA", "INTELLIGENT_TIERING")))
    assert [t.storage_class for t in loaded.rules[0].transition or []] == [
        StorageClass.STANDARD_IA,
        StorageClass.INTELLIGENT_TIERING,
    ]
    [found] = problems(tmp_path, ladder % ("INTELLIGENT_TIERING", "STANDARD_IA"))
    assert "transition to STANDARD_IA goes up the waterfall from INTELLIGENT_TIERING" in found
    assert "(STANDARD > STANDARD_IA > INTELLIGENT_TIERING > ONEZONE_IA > GLACIER_IR" in found


def test_transition_after_must_increase_and_expire_come_last(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        """\
        rules:
          - name: logs
            transition:
              - {after: 60d, storage_class: STANDARD_IA}
              - {after: 14d, storage_class: GLACIER_IR}
          - name: late
            transition: [{after: 60d, storage_class: STANDARD_IA}]
            expire: {after: 30d}
        """,
    )
    assert found == [
        "9:17: rules[0].transition[1].after: after 14d must be later than the previous step (60d)",
        "12:21: rules[1].expire.after: expire after 30d comes before the last transition (60d)",
    ]


def test_select_key_not_a_placeholder(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        """\
        layout:
          runs: ["{team}/runs/{run}/"]
        rules:
          - name: nlp
            select: {kind: log, teem: nlp}
            expire: {after: 7d}
        """,
    )
    assert found == [
        "9:25: rules[0].select.teem: unknown select key 'teem' (did you mean 'team'?): "
        "not a selector key nor a placeholder of layout.runs (team)"
    ]


def test_a_select_key_typo_under_templates_with_only_run_says_so(tmp_path: Path) -> None:
    """`runs/{run}/` declares a template; it has no placeholder but `run` (a selector
    key): the message must not say "none declared"."""
    found = problems(
        tmp_path,
        """\
        layout:
          runs: ["runs/{run}/"]
        rules:
          - name: logs
            select: {knd: log}
            expire: {after: 7d}
        """,
    )
    assert found == [
        "9:14: rules[0].select.knd: unknown select key 'knd' (did you mean 'kind'?): "
        "not a selector key nor a placeholder of layout.runs (it has none besides {run})"
    ]


def test_best_without_best_metric(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        """\
        rules:
          - name: checkpoints
            tiers:
              - name: long-term
                keep: [final, best]
            otherwise: delete
        """,
    )
    assert found == [
        "9:9: rules[0].tiers[0].keep: keep: [best] needs best_metric: {name: ..., mode: min|max}"
    ]


def test_duplicate_rule_names(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        """\
        rules:
          - {name: logs, expire: {after: 7d}}
          - {name: other, expire: {after: 7d}}
          - {name: logs, expire: {after: 9d}}
        """,
    )
    assert found == ["8:12: rules[2].name: duplicate rule name 'logs' (also rules[0])"]


def test_bad_layout_template(tmp_path: Path) -> None:
    found = problems(tmp_path, 'layout:\n  runs: ["runs/{name}/"]\n')
    assert found == ["6:10: layout.runs[0]: template 'runs/{name}/' has no {run} placeholder"]


def test_missing_required_key(tmp_path: Path) -> None:
    found = problems(tmp_path, "storage:\n  - {name: a}\n", head="version: 1\n")
    assert found == ["3:5: storage[0].url: missing required key 'url'"]


def test_several_errors_at_once_sorted_by_position(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        protect: {min_age: soon}
        rules:
          - name: r
            expire: {after: 3d, when: now}
        safety: {max_delete_fraction: 1.5}
        """,
        head="version: 2\nstorage:\n  - {name: a, url: /data, bucket: x}\n",
    )
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    assert str(info.value) == f"invalid policy {path}: 5 problems"
    positions = [p[len(str(path)) + 1 :].split(": ")[0] for p in info.value.problems]
    assert positions == ["1:10", "3:27", "4:20", "7:25", "8:31"]
    assert (
        "version: unsupported policy version 2 (this govern reads version 1)"
        in (info.value.problems[0])
    )


def test_yaml_syntax_error(tmp_path: Path) -> None:
    found = problems(tmp_path, "rules:\n  - name: [unclosed\n")
    assert len(found) == 1
    assert found[0].startswith("7:1: YAML syntax error:")


def test_duplicate_yaml_keys_are_each_reported_with_the_other_problems(tmp_path: Path) -> None:
    """ruamel stops at the first key given twice: that one was the only problem reported,
    every other one hidden behind it."""
    found = problems(
        tmp_path,
        "rules: []\nrules: []\nprotect: {min_age: 3x}\nsafety: {max_delete_fraction: 1, "
        "max_delete_fraction: 2}\n",
    )
    assert found == [
        "6:1: rules: duplicate key 'rules' (given first at line 5): give each key once",
        "7:20: protect.min_age: invalid duration '3x': expected e.g. 90m, 36h, 7d, 2w",
        "8:34: safety.max_delete_fraction: duplicate key 'max_delete_fraction' (given first "
        "at line 8): give each key once",
    ]
    # a key given twice fails the policy even when the rest of it is valid
    assert problems(tmp_path, "rules: []\nrules: []\n") == [
        "6:1: rules: duplicate key 'rules' (given first at line 5): give each key once"
    ]


def test_empty_file(tmp_path: Path) -> None:
    found = problems(tmp_path, "", head="# nothing\n")
    assert found == ["1:1: the policy is empty (expected at least version and storage)"]


def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(PolicyError, match=f"policy file not found: {missing}"):
        load_policy(missing)


# ----------------------------------------------------------------------------- the CLI


def test_cli_validate_table_and_json() -> None:
    path = str(REPO / "policies" / "retention.yaml")
    result = CliRunner().invoke(policy_group, ["validate", path])
    assert result.exit_code == 0
    assert result.stdout == "policy OK: 5 rules, 2 roots\n"
    # (the example's dedupe and budgets blocks are validated, and nothing acts on them
    # yet: said so)
    assert result.stderr == (
        "warning: dedupe: validated, not planned yet (plans have no dedupe actions, and each "
        "says so in a note)\n"
        "warning: budgets: validated, not evaluated yet (no budget alerts are raised)\n"
    )
    result = CliRunner().invoke(policy_group, ["validate", path, "--format", "json"])
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc["valid"] is True
    assert doc["path"] == path
    assert doc["sha256"] == hashlib.sha256(Path(path).read_bytes()).hexdigest()
    assert doc["rules"] == ["failed-runs", "residue", "checkpoints", "logs", "datasets"]
    assert [w.split(":")[0] for w in doc["warnings"]] == ["dedupe", "budgets"]


def test_cli_validate_warns_that_a_notice_period_is_announced_to_no_one(tmp_path: Path) -> None:
    """`approval.mode: notice` promises a veto window announced through `notify`, which
    sends nothing yet: a valid policy, and a warning that plans become applicable
    without anyone being told."""
    path = write(tmp_path, "approval: {mode: notice, notice_period: 2d}\nrules: []\n")
    result = CliRunner().invoke(policy_group, ["validate", str(path)])
    assert result.exit_code == 0
    assert result.stderr.startswith("warning: approval.mode notice: notifications are not sent")
    plain = write(tmp_path, "rules: []\n")
    assert CliRunner().invoke(policy_group, ["validate", str(plain)]).stderr == ""


def test_cli_validate_warns_that_notify_sends_nothing_yet(tmp_path: Path) -> None:
    """docs say notify and dedupe are validated only; validate said nothing of either."""
    path = write(
        tmp_path,
        "notify: [{type: slack, url: 'https://hooks.slack.com/services/x', on: [plan]}]\n"
        "rules: []\n",
    )
    result = CliRunner().invoke(policy_group, ["validate", str(path)])
    assert result.exit_code == 0
    assert result.stderr == (
        "warning: notify: validated, nothing is sent yet (no message on plans or failures)\n"
    )
    # with approval.mode notice, its own warning already says notifications are not sent
    notice = write(
        tmp_path,
        "approval: {mode: notice, notice_period: 2d}\n"
        "notify: [{type: slack, url: 'https://hooks.slack.com/services/x', on: [plan]}]\n"
        "rules: []\n",
    )
    said = CliRunner().invoke(policy_group, ["validate", str(notice)]).stderr.splitlines()
    assert [line.split(":")[1].strip() for line in said] == ["approval.mode notice"]


def test_cli_validate_warns_that_class_changes_on_filesystems_are_never_made(
    tmp_path: Path,
) -> None:
    """A policy of local roots that transitions or archives by storage class is valid,
    but every plan reports those actions as not applicable: validate says so now."""
    body = """\
    rules:
      - name: logs
        select: {kind: log}
        transition: [{after: 7d, storage_class: STANDARD_IA}, {after: 30d, storage_class: GLACIER_IR}]
      - name: ck
        select: {kind: checkpoint}
        tiers: [{name: final, keep: [final], archive: {storage_class: DEEP_ARCHIVE}}]
        otherwise: keep
    """
    local = "version: 1\nstorage:\n  - {name: disk, url: /data/}\n"
    result = CliRunner().invoke(policy_group, ["validate", str(write(tmp_path, body, local))])
    assert result.exit_code == 0
    assert result.stderr == (
        "warning: storage classes: no root of this policy has them (none is an S3 bucket): "
        "rule logs (transition to STANDARD_IA, GLACIER_IR), ck (archive to DEEP_ARCHIVE): "
        "reported as not applicable in every plan, never carried out\n"
    )
    on_s3 = CliRunner().invoke(policy_group, ["validate", str(write(tmp_path, body))])
    assert (on_s3.exit_code, on_s3.stderr) == (0, "")


def test_cli_validate_raises_policy_error(tmp_path: Path) -> None:
    path = write(tmp_path, "bogus: 1\n")
    result = CliRunner().invoke(policy_group, ["validate", str(path)])
    assert isinstance(result.exception, PolicyError)
    assert result.exception.problems == [f"{path}:5:1: bogus: unknown key 'bogus'"]


def test_cli_validate_json_reports_an_invalid_policy_on_stdout(tmp_path: Path) -> None:
    """`validate --format json | jq` sees a verdict, not an empty stdout; exit 2 still."""
    path = write(tmp_path, "bogus: 1\nrules: [{nam: x}]\n")
    result = CliRunner().invoke(cli, ["policy", "validate", str(path), "--format", "json"])
    assert result.exit_code == EXIT_BAD_INPUT
    doc = json.loads(result.stdout)
    assert doc["valid"] is False
    assert doc["path"] == str(path)
    assert f"{path}:5:1: bogus: unknown key 'bogus'" in doc["problems"]
    assert len(doc["problems"]) >= 2  # every problem, as the table form prints them
    assert "error:" in result.stderr
    assert all(p in result.stderr for p in doc["problems"])


def test_policy_built_in_code_checks_placeholders_too() -> None:
    data = {
        "version": 1,
        "storage": [{"name": "a", "url": "s3://bucket/"}],
        "layout": {"runs": ["{team}/{run}/"]},
        "budgets": [{"select": {"team": "nlp"}, "monthly_usd": 10}],
    }
    assert Policy.model_validate(data).budgets[0].select.attributes == {"team": ("nlp",)}
    data["budgets"] = [{"select": {"project": "x"}, "monthly_usd": 10}]
    with pytest.raises(ValueError, match="unknown select key 'project'"):
        Policy.model_validate(data)


def test_a_region_that_is_no_region_name_is_refused_at_its_line(tmp_path: Path) -> None:
    """botocore would refuse it at the first request (exit 1, no file or line): the
    policy says so where it is written."""
    bad = HEAD + '    region: "bad region!"\n'
    assert problems(tmp_path, "", bad) == [
        "5:13: storage[0].region: 'bad region!' is not a region name: letters, digits and "
        "'-' (e.g. us-east-1)"
    ]
    good = write(tmp_path, "", HEAD + "    region: eu-central-1\n")
    assert load_policy(good).storage[0].region == "eu-central-1"


def test_an_invalid_region_from_the_environment_is_bad_input_naming_where_to_look() -> None:
    from botocore.exceptions import InvalidRegionError

    from governance.errors import EXIT_BAD_INPUT
    from governance.storage.errors import translate

    err = translate("s3://ml-artifacts/", InvalidRegionError(region_name="bad region!"))
    assert err.exit_code == EXIT_BAD_INPUT
    assert "AWS_DEFAULT_REGION" in str(err)
    assert "s3://ml-artifacts/" in str(err)
