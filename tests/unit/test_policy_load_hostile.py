"""Policies a fuzzer wrote: each gets exit 2 with every problem at its line and column,
never a traceback (before: KeyError, ReaderError, RecursionError, OverflowError, an alias
expansion that ran for minutes) and never a silent misreading (an empty location read as
the current folder, `version: true`, a tag key `null` read as "None")."""

from __future__ import annotations

from pathlib import Path

import pytest

from governance.errors import EXIT_BAD_INPUT, PolicyError
from governance.policy import load_policy
from tests.unit.test_policy_load import HEAD, problems, write


def test_an_error_in_a_merged_key_is_placed_where_it_is_written(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        """\
        rules:
          - name: ck
            select: {kind: checkpoint}
            tiers:
              - &t {name: recent, keep_last: 3, max_age: 3x}
              - <<: *t
                name: older
            otherwise: delete
        """,
    )
    why = "invalid duration '3x': expected e.g. 90m, 36h, 7d, 2w"
    # written once, in the anchor: said once, with the other place the alias takes it
    assert found == [
        f"9:50: rules[0].tiers[0].max_age: {why} (also as rules[0].tiers[1].max_age, "
        "through an alias)"
    ]


def test_a_control_character_is_placed(tmp_path: Path) -> None:
    assert problems(tmp_path, "rules:\n  - name: a\x07b\n") == [
        "6:12: YAML cannot hold the character U+0007 (a control character): remove it"
    ]


def test_a_policy_nested_too_deeply_is_refused(tmp_path: Path) -> None:
    assert problems(tmp_path, "x: " + "[" * 400 + "]" * 400 + "\n") == [
        "1:1: the policy is nested too deeply to read"
    ]


def test_aliases_of_aliases_are_refused_before_they_expand(tmp_path: Path) -> None:
    body = "l0: &l0 [a, a, a, a, a, a, a, a, a, a]\n" + "".join(
        f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]\n" for i in range(1, 9)
    )  # 10**9 values from 400 bytes
    assert problems(tmp_path, body) == [
        "1:1: the policy holds over 100,000 values (its aliases expanded): too many to read"
    ]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "protect: {min_age: 99999999999999d}\n",
            "5:20: protect.min_age: duration '99999999999999d' is too long: at most 36500d "
            "(100 years)",
        ),
        (  # validated once, then crashed every plan (as_of - restored_for)
            "protect: {restored_for: 800000d}\n",
            "5:25: protect.restored_for: duration '800000d' is too long: at most 36500d "
            "(100 years)",
        ),
        (
            "rules: [{name: s, select: {kind: log, min_size: .inf}, expire: {after: 1d}}]\n",
            "5:49: rules[0].select.min_size: a size in bytes must be a whole non-negative "
            "number: inf",
        ),
        (
            "rules: [{name: s, select: {kind: log, min_size: 99999EiB}}]\n",
            "5:49: rules[0].select.min_size: size '99999EiB' is too large: at most "
            "9,223,372,036,854,775,807 bytes (just under 8 EiB)",
        ),
    ],
)
def test_numbers_past_what_a_plan_can_count_are_refused(
    tmp_path: Path, body: str, expected: str
) -> None:
    assert expected in problems(tmp_path, body)


def test_an_empty_location_is_not_the_current_folder(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        "apply: {quarantine_url: ''}\nprotect: {paths: ['']}\n",
        head="version: 1\nstorage: [{name: a, url: ''}]\n# \n# \n",
    )
    why = "an empty location: give a folder's path or a URL"
    assert found == [
        f"2:26: storage[0].url: {why}",
        f"5:25: apply.quarantine_url: {why}",
        f"6:19: protect.paths[0]: {why}",
    ]


def test_a_url_no_client_can_parse_is_refused(tmp_path: Path) -> None:
    found = problems(tmp_path, "", head='version: 1\nstorage: [{name: a, url: "http://[::1/x"}]\n')
    assert found == ["2:26: storage[0].url: storage URL 'http://[::1/x/': Invalid IPv6 URL"]


def test_an_empty_value_in_block_style_is_placed_at_its_key(tmp_path: Path) -> None:
    """ruamel places an empty value at the next token: lines below, or past the end."""
    found = problems(
        tmp_path,
        """\
        # a comment
        approval:

        safety:
          max_delete_fraction:
        rules:
          - name: x
            select: {kind: log}
            expire:
              after:
        """,
    )
    assert found == [
        "6:1: approval: expected a mapping, got an empty value",
        "9:3: safety.max_delete_fraction: expected a number, got an empty value",
        "14:7: rules[0].expire.after: expected a duration such as 90m, 36h, 7d or 2w, got an "
        "empty value",
    ]


def test_an_empty_list_item_is_placed_at_its_dash(tmp_path: Path) -> None:
    """ruamel places `-` alone one column past its dash (past the line's end): an empty
    item of a block list (`-`, or `- null`) is placed at its dash; one in a flow list
    (`[x, null]`) at itself."""
    found = problems(
        tmp_path,
        """\
        rules:
          - name: x
            select: {kind: log}
            expire: {after: 1d}
          -
          - null
        """,
        head='version: 1\nstorage: [{name: a, url: "file:///tmp/x/"}, null]\n',
    )
    assert found == [
        "2:45: storage[1]: expected a mapping, got an empty value",
        "7:3: rules[1]: expected a mapping, got an empty value",
        "8:3: rules[2]: expected a mapping, got an empty value",
    ]


def test_one_transition_step_without_a_list_is_placed_and_named_as_written(
    tmp_path: Path,
) -> None:
    found = problems(
        tmp_path,
        """\
        rules:
          - name: logs
            select: {kind: log}
            transition:
              after: 14d
              storage_class: GLACIR
              extra: 1
        """,
    )
    assert [p.split(": ", 2)[:2] for p in found] == [
        ["10:22", "rules[0].transition.storage_class"],
        ["11:7", "rules[0].transition.extra"],
    ]


def test_a_number_key_is_placed_at_itself(tmp_path: Path) -> None:
    found = problems(tmp_path, "pricing: {STANDRD: 0.1, GLACIER: 0.2, 1: 2}\n")
    assert [p.split(": ", 2)[:2] for p in found] == [
        ["5:11", "pricing.STANDRD"],
        ["5:39", "pricing.1"],
    ]


def test_every_bad_price_is_reported(tmp_path: Path) -> None:
    assert problems(tmp_path, "pricing: {GLACIER: -1, STANDARD_IA: -2}\n") == [
        "5:20: pricing.GLACIER: must be at least 0.0, got -1",
        "5:37: pricing.STANDARD_IA: must be at least 0.0, got -2",
    ]
    found = problems(tmp_path, "pricing: {STANDRD: 0.1, GLACIER: -1, DEEP_ARCHIVE: .nan}\n")
    assert found[1:] == [
        "5:34: pricing.GLACIER: must be at least 0.0, got -1",
        "5:52: pricing.DEEP_ARCHIVE: must be a finite number, got nan",
    ]
    assert problems(tmp_path, "pricing: {standard: 0.1, STANDARD: 0.2}\n") == [
        "5:26: pricing.STANDARD: 'STANDARD' prices the class 'standard' prices already: give "
        "each class once"
    ]


def test_an_empty_otherwise_is_reported_with_the_other_problems(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        """\
        rules:
          - name: ck
            select: {kind: checkpoint}
            tiers: [{name: t, keep_last: 0}]
            otherwise:
        """,
    )
    assert [p.split(": ", 2)[1] for p in found] == ["rules[0].tiers", "rules[0].tiers[0].keep_last"]
    assert "'otherwise: delete|keep' is required" in found[0]


def test_messages_say_what_was_given_in_the_policy_s_words(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        "rules:\n  - {name: x, select: {kind: log, run_status: [1], tags: {retain: [x]}},"
        " expire: {after: 1d}}\n",
        head="version: 1\nstorage: [null]\n# \n# \n",
    )
    assert found == [
        "2:11: storage[0]: expected a mapping, got an empty value",
        "6:48: rules[0].select.run_status[0]: expected one of 'running', 'completed', "
        "'failed', 'abandoned' or 'unknown', got 1",
        "6:67: rules[0].select.tags.retain: expected text, got a list ['x']",
    ]
    assert not [p for p in found if "Input should" in p or "NoneType" in p]


def test_a_misspelt_select_key_is_one_problem(tmp_path: Path) -> None:
    found = problems(
        tmp_path, "rules: [{name: x, select: {kind: log, tag: {a: b}}, expire: {after: 1d}}]\n"
    )
    assert len(found) == 1
    assert "unknown select key 'tag' (did you mean 'tags'?)" in found[0]


@pytest.mark.parametrize(("given", "shown"), [("true", "true"), ("1.0", "1.0")])
def test_the_version_is_the_whole_number_1(tmp_path: Path, given: str, shown: str) -> None:
    found = problems(tmp_path, "", head=f"version: {given}\nstorage: [{{name: a, url: /d/}}]\n")
    assert found == [
        f"1:10: version: unsupported policy version {shown} (this govern reads version 1)"
    ]


def test_a_key_that_is_not_text_is_refused(tmp_path: Path) -> None:
    assert problems(tmp_path, "protect: {tags: {null: z, true: y}}\n") == [
        "5:18: protect.tags: an empty key (null): keys are text (quote it if it is meant)",
        "5:27: protect.tags: the key true: keys are text (quote it if it is meant)",
    ]


def test_concurrency_is_capped_as_the_setting_is(tmp_path: Path) -> None:
    found = problems(tmp_path, "apply: {concurrency: 100000}\n")
    assert found == ["5:22: apply.concurrency: must be at most 512, got 100000"]


def test_bytes_that_are_not_utf8_are_placed(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_bytes(HEAD.encode() + b"# caf\xe9\n")
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    assert info.value.exit_code == EXIT_BAD_INPUT
    at = len(HEAD.encode()) + len(b"# caf")
    assert info.value.problems == [
        f"{path}:5:6: not UTF-8 text (invalid continuation byte at byte {at})"
    ]


@pytest.mark.parametrize(
    ("content", "place"),
    [
        # columns in characters, as an editor counts them: two of two bytes each first
        ("rules:\n  - name: \u00e9\u00e9".encode() + b"\xff\n", "6:13"),
        # a lone carriage return ends a line, as YAML reads it
        (HEAD.replace("\n", "\r").encode() + b"# caf\xe9\r", "5:6"),
        (HEAD.replace("\n", "\r\n").encode() + b"# caf\xe9\r\n", "5:6"),
    ],
)
def test_bytes_that_are_not_utf8_are_placed_as_an_editor_shows_them(
    tmp_path: Path, content: bytes, place: str
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_bytes(content if content.startswith(b"version") else HEAD.encode() + content)
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    [problem] = info.value.problems
    assert problem.startswith(f"{path}:{place}: not UTF-8 text")


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("2024-02-30", "day is out of range for month"),
        ("!!int abc", "invalid literal for int()"),
        ("!!bool maybe", "not a value of the type its tag names"),
        ("1" * 5000, "an integer of over 4,300 digits"),
    ],
)
def test_a_scalar_yaml_cannot_read_is_placed(tmp_path: Path, value: str, why: str) -> None:
    # (and hides no other problem: the key it is given under is unknown)
    unknown, found = problems(tmp_path, f"description: {value}\n")
    assert unknown == "5:1: description: unknown key 'description'"
    assert found.startswith("5:14: a value YAML cannot read: ")
    assert why in found


def test_values_yaml_cannot_read_hide_no_other_problem(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        """\
        rules:
          - name: logs
            select: {kind: lgo}
            expire: {after: 2024-02-30}
          - name: logs2
            select: {kind: log}
            expire: {after: !!int abc}
            expire: {after: 1d}
        """,
    )
    # each unreadable value once (not also as a bad duration: read as text meanwhile)
    assert [p.split(": ", 2)[:2] for p in found] == [
        ["7:20", "rules[0].select.kind"],
        ["8:21", "a value YAML cannot read"],
        ["11:21", "a value YAML cannot read"],
        ["12:5", "rules[1].expire"],
    ]


def test_a_misspelt_key_is_one_problem_not_also_a_missing_one(tmp_path: Path) -> None:
    found = problems(tmp_path, "", head="version: 1\nstorage: [{nmae: a, url: /tmp/a/}]\n")
    assert found == ["2:12: storage[0].nmae: unknown key 'nmae' (did you mean 'name'?)"]
    [price] = problems(tmp_path, "pricing: {GLACER: '0.1'}\n")
    assert "unknown storage class 'GLACER'" in price


def test_a_class_priced_twice_hides_no_other_price_problem(tmp_path: Path) -> None:
    found = problems(tmp_path, "pricing: {STANDARD: -1, standard: 0.02, GLACIER: .nan}\n")
    assert [p.split(": ", 2)[1] for p in found] == [
        "pricing.STANDARD",
        "pricing.standard",
        "pricing.GLACIER",
    ]
    assert "prices the class 'STANDARD' prices already" in found[1]
    [huge] = problems(tmp_path, "pricing: {STANDARD: 1e306}\n")  # (the bill became infinite)
    assert huge == "5:21: pricing.STANDARD: must be at most 1000000.0, got 1e+306"


def test_standard_tags_are_read_and_other_values_named_as_yaml_reads_them(
    tmp_path: Path,
) -> None:
    loaded = load_policy(
        write(tmp_path, "", head="version: 1\nstorage: [{name: !!str r, url: !!str /tmp/a/}]\n")
    )
    assert loaded.storage[0].name == "r"
    found = problems(
        tmp_path, "rules: [{name: 2024-06-01, select: {kind: log}, expire: {after: 1d}}]\n"
    )
    assert found == [
        "5:16: rules[0].name: expected text, got a date 2024-06-01 (quote it if it is meant as "
        "text)"
    ]


def test_keys_that_are_not_text_or_that_fold_into_one_are_refused(tmp_path: Path) -> None:
    found = problems(tmp_path, "protect: {tags: {[legal, hold]: x, 1: y, 0x1: z, true: w}}\n")
    assert found == [
        "5:18: protect.tags: a list as a key: keys are text (quote it if it is meant)",
        "5:42: protect.tags.1: duplicate key '1' (given first at line 5): give each key once",
        "5:50: protect.tags: the key true: keys are text (quote it if it is meant)",
    ]


def test_a_url_that_lost_a_slash_is_refused_in_a_policy_too(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        "protect: {paths: ['s3:/bucket/releases/**']}\n",
        head='version: 1\nstorage: [{name: a, url: "s3:/bucket/"}, {name: c, url: "file:/tmp/x/"}]\n',
    )
    assert found == [
        "2:26: storage[0].url: URL 's3:/bucket/': did you mean 's3://bucket/'?",
        "3:19: protect.paths[0]: URL 's3:/bucket/releases/**': did you mean "
        "'s3://bucket/releases/**'?",
    ]
    loaded = load_policy(
        write(tmp_path, "", head="version: 1\nstorage: [{name: c, url: 'file:/tmp/x/'}]\n")
    )
    assert loaded.storage[0].url == "file:///tmp/x/"


def test_an_empty_condition_is_refused_not_read_as_match_everything(tmp_path: Path) -> None:
    """`select: {kind: , path: }` validated, and its expire deleted every artifact of the
    root (only a safety limit stopped the plan)."""
    found = problems(
        tmp_path, "rules: [{name: old-logs, select: {kind: , path: }, expire: {after: 1d}}]\n"
    )
    assert [p.split(": ", 2)[1] for p in found] == ["rules[0].select.kind", "rules[0].select.path"]
    assert all("an empty condition" in p for p in found)


def test_an_empty_list_for_a_placeholder_is_refused_not_read_as_match_nothing(
    tmp_path: Path,
) -> None:
    """`project: []` validated, and its rule silently matched nothing."""
    found = problems(
        tmp_path,
        "layout: {runs: ['{project}/runs/{run}/']}\n"
        "rules: [{name: logs, select: {kind: log, project: []}, expire: {after: 1d}}]\n",
    )
    assert found == [
        "6:51: rules[0].select.project: an empty condition: give a value, or leave the key "
        "out (as it is, it would match nothing)"
    ]


def test_a_newline_in_a_value_cannot_start_a_problem_line_of_its_own(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        "",
        head='version: 1\nstorage: [{name: a, url: "/tmp/x\\nfake.yaml:1:1: y/"}, '
        '{name: b, url: "/tmp/x\\nfake.yaml:1:1: y/"}]\n',
    )
    assert found
    assert all("\n" not in p for p in found)
    assert any("/tmp/x\\x0afake.yaml:1:1: y/" in p for p in found)


def test_an_alias_bomb_with_a_key_given_twice_is_refused_at_once(tmp_path: Path) -> None:
    """Reporting the key given twice walked the composed tree through every alias."""
    body = "version: 1\nl0: &l0 [a, a, a, a, a, a, a, a, a, a]\n" + "".join(
        f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]\n" for i in range(1, 10)
    )
    assert problems(tmp_path, body) == [
        "1:1: the policy holds over 100,000 values (its aliases expanded): too many to read"
    ]


def test_a_huge_value_is_not_repeated_whole(tmp_path: Path) -> None:
    [found] = problems(tmp_path, f"protect: {{min_age: '{'7' * 100_000}x'}}\n")
    assert found.startswith("5:20: protect.min_age: invalid duration '777")
    assert found.endswith(" ... (cut)")
    assert len(found) < 1100


def test_third_round_inputs_are_each_one_placed_problem(tmp_path: Path) -> None:
    """A third fuzzing round: a list under a custom tag crashed the placing of its
    item's error; `file://` named the current folder, `s3:bucket` a local one; `6M` read
    as six minutes; `tags: {}` and a bad glob class validated (the first matched every
    artifact, the second crashed every plan); a key `~` was also an unknown key 'None';
    `VERSION` had no "did you mean"; `017` and `17` folded into one tag key."""
    found = problems(
        tmp_path,
        """\
        apply: {quarantine_url: "file://"}
        protect: {min_age: 6M, run_status: !x [bogus], tags: {017: a, 17: b}}
        VERSION: 1
        rules: [{name: r, select: {path: "/tmp/x/[z-a]/**", tags: {}, ~: x}, expire: {after: 1d}}]
        """,
        head='version: 1\nstorage: [{name: a, url: "/tmp/a/"}, {name: b, url: "s3:bucket-x"}]\n'
        "# \n# \n",
    )
    assert found == [
        "2:53: storage[1].url: URL 's3:bucket-x': did you mean 's3://bucket-x'?",
        "5:25: apply.quarantine_url: URL 'file://': a file URL needs a path (file:///abs/path)",
        "6:20: protect.min_age: invalid duration '6M': M is not a unit (months have no fixed "
        "length): write minutes as m, or months as days (180d)",
        "6:36: protect.run_status[0]: expected one of 'running', 'completed', 'failed', "
        "'abandoned' or 'unknown', got 'bogus'",
        "6:63: protect.tags.17: duplicate key '17' (given first at line 6): give each key once",
        "7:1: VERSION: unknown key 'VERSION' (did you mean 'version'?)",
        "8:34: rules[0].select.path: glob 'file:///tmp/x/[z-a]/**' is not a pattern: bad "
        "character range z-a at position 15",
        "8:59: rules[0].select.tags: an empty condition: give a value, or leave the key out "
        "(as it is, it would match every artifact)",
        "8:63: rules[0].select: an empty key (null): keys are text (quote it if it is meant)",
    ]


def test_a_reused_anchor_is_legal_and_says_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(HEAD + "protect: {tags: {a: &x b, c: &x d}}\n")
    assert dict(load_policy(path).protect.tags) == {"a": "b", "c": "d"}
    assert capsys.readouterr().err == ""


def test_attributes_is_not_a_select_key_a_policy_writes(tmp_path: Path) -> None:
    """`attributes` is where a selector gathers layout placeholders: written as a key it
    was taken (`attributes: {team: nlp}` as `team: nlp`), a key no document names."""
    found = problems(
        tmp_path,
        "layout: {runs: ['{team}/runs/{run}/']}\n"
        "rules: [{name: logs, select: {kind: log, attributes: {team: nlp}}, "
        "expire: {after: 1d}}]\n",
    )
    assert found == [
        "6:54: rules[0].select.attributes: unknown select key 'attributes': not a selector "
        "key nor a placeholder of layout.runs (team)"
    ]


@pytest.mark.parametrize("char", ["\u2028", "\u2029", "\x85"])
def test_a_line_separator_yaml_readers_disagree_on_is_placed_not_misread(
    tmp_path: Path, char: str
) -> None:
    """ruamel ended a line at U+2028 inside a comment: a syntax error at a place an
    editor does not show (YAML 1.2 reads it as an ordinary character)."""
    found = problems(tmp_path, f"# pasted from a wiki:{char} keep logs a week\n")
    assert found == [
        f"5:22: the character U+{ord(char):04X} (a line separator to some YAML readers, not "
        "to others): remove it"
    ]
