"""A PostgreSQL role that may read the catalog but not write it (an approver's, an
analyst's) lists runs and artifacts after the nightly job's scan: classified in memory,
what the owner's `ls` prints. It failed with "permission denied for table artifacts"
(exit 2) until the owner ran `ls runs` once. Real roles on the real server."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy.engine import make_url

from governance.cli.main import cli
from tests.catalogs import PG_URL, _drop_schema, _pg_schema_url, _with_schema
from tests.fixtures.builders import hf_run, local_writer, marker

pytestmark = pytest.mark.skipif(not PG_URL, reason="GOVERN_TEST_POSTGRES_URL is not set")


@pytest.fixture
def schema() -> Iterator[str]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    _with_schema(name, "CREATE SCHEMA {schema}")
    try:
        yield name
    finally:
        _drop_schema(name)


def _govern(url: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--catalog", url, "-q", *args])
    return result.exit_code, result.stdout, result.stderr


def test_a_reading_role_lists_runs_and_artifacts_after_a_new_scan(
    tmp_path: Path, schema: str
) -> None:
    assert PG_URL is not None
    storage = tmp_path / "storage"
    hf_run(local_writer(storage), "runs/a/", steps=(100, 200))
    marker(local_writer(storage), "runs/a/")
    policy = tmp_path / "policy.yaml"
    policy.write_text(f"version: 1\nstorage: [{{name: s, url: {storage}/}}]\nrules: []\n")
    owner = _pg_schema_url(PG_URL, schema)
    assert _govern(owner, "scan", "--policy", str(policy))[0] == 0
    role = f"r_{uuid.uuid4().hex[:10]}"
    _with_schema(
        schema,
        f"CREATE ROLE {role} LOGIN; GRANT USAGE ON SCHEMA {{schema}} TO {role}; "
        f"GRANT SELECT ON ALL TABLES IN SCHEMA {{schema}} TO {role}",
    )
    try:
        reader = _pg_schema_url(
            make_url(PG_URL).set(username=role).render_as_string(hide_password=False), schema
        )
        explain = ["explain", f"{storage.as_uri()}/runs/a/checkpoint-100/", "--policy", str(policy)]
        explained = _govern(reader, *explain, "--format", "json")
        got = {
            what: _govern(reader, "ls", what, "--format", "json") for what in ("runs", "artifacts")
        }
        want = {
            what: _govern(owner, "ls", what, "--format", "json") for what in ("runs", "artifacts")
        }
    finally:
        _with_schema(schema, f"DROP OWNED BY {role}; DROP ROLE {role}")
    assert explained[0] == 0, explained[2]
    assert explained[1] == _govern(owner, *explain, "--format", "json")[1]
    for what in ("runs", "artifacts"):
        assert got[what][0] == 0, got[what][2]
        assert want[what][0] == 0
        assert got[what][1] == want[what][1]
    assert '"run": "a"' in got["runs"][1]
