"""`govern demo`: build a sample tree of training runs on local disk and run the main job on it."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

import click

from governance.cli.context import AppContext, pass_app
from governance.cli.output import GivenPath, emit_json, format_option, stdout_console
from governance.errors import ArgumentError, GovernanceError
from governance.wording import shown

MARKER = ".govern-demo"


def prepare_workdir(workdir: Path) -> Path:
    """A fresh demo folder; refuses to wipe a folder that govern demo did not make, and
    says why a folder cannot be made there (a file in the way, no such place)."""
    if workdir.exists() and not workdir.is_dir():
        raise ArgumentError(f"--dir {shown(str(workdir))}: is a file, not a folder")
    if workdir.exists() and any(workdir.iterdir()) and not (workdir / MARKER).exists():
        raise ArgumentError(
            f"--dir {shown(str(workdir))}: folder exists and was not made by govern demo; "
            "choose another"
        )
    try:
        if workdir.exists():
            shutil.rmtree(workdir)
        (workdir / "storage").mkdir(parents=True)
        (workdir / MARKER).write_text("made by govern demo; safe to delete\n")
    except OSError as exc:
        raise ArgumentError(
            f"--dir {shown(str(workdir))}: cannot make the folder: {exc.strerror or exc}"
        ) from exc
    return workdir / "storage"


def _inside(catalog_url: str, workdir: Path) -> bool:
    """Whether the catalog is a SQLite file in the demo's folder (which is made anew)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError as BadURL

    try:
        url = make_url(catalog_url)
    except BadURL:
        return False
    name = url.database
    if not url.drivername.startswith("sqlite") or not name or name == ":memory:":
        return False
    return Path(name).resolve().is_relative_to(workdir)


def write_demo_policy(workdir: Path, storage: Path) -> Path:
    template = resources.files("governance").joinpath("demo_policy.yaml").read_text()
    path = workdir / "retention.yaml"
    path.write_text(template.replace("{storage_url}", storage.as_uri() + "/"))
    return path


@click.command()
@click.option(
    "--dir",
    "workdir",
    type=GivenPath(path_type=Path),
    default=Path("govern-demo"),
    show_default=True,
    help="Folder for the sample storage, its policy, catalog and reports.",
)
@format_option("table", "json")
@pass_app
def demo(app: AppContext, workdir: Path, fmt: str) -> None:
    """Build a sample storage tree on local disk and run scan and plan on it."""
    from governance.demo import build_demo_tree
    from governance.plan.service import make_plan
    from governance.policy import load_policy
    from governance.report import render, write_report
    from governance.scan.service import scan_roots

    workdir = workdir.resolve()
    # Its own SQLite catalog in the folder, unless `--catalog` names one on purpose (the
    # demo on PostgreSQL, say); never GOVERN_CATALOG_URL, which may name a real catalog.
    # A catalog named is opened first: one that cannot be used leaves no tree behind.
    if click.get_current_context().find_root().params.get("catalog") is None:
        app.settings = replace(app.settings, catalog_url=f"sqlite:///{workdir / 'catalog.db'}")
    elif not _inside(app.settings.catalog_url, workdir):  # (else made anew with the folder)
        app.engine  # noqa: B018 (opened and checked now)
    storage = prepare_workdir(workdir)
    tree = build_demo_tree(storage, datetime.now(UTC))
    policy_path = write_demo_policy(workdir, storage)
    policy = load_policy(policy_path)
    results = list(scan_roots(app, policy, ()))
    for result in results:
        if isinstance(result, GovernanceError):
            raise result
    summary = results[0]
    assert not isinstance(summary, GovernanceError)
    made = make_plan(app.engine, policy, datetime.now(UTC), actor=app.settings.identity)
    html_path = workdir / "plan.html"
    with html_path.open("w", encoding="utf-8") as out:
        write_report(made, "html", out)
    if fmt == "json":
        emit_json(
            {
                "dir": str(workdir),
                "policy": str(policy_path),
                "scan": summary.as_dict(),
                "plan": json.loads(render(made, "json")),
                "html": str(html_path),
            }
        )
        return
    from governance.catalog.engine import safe_url
    from governance.policy.units import format_bytes
    from governance.report.table import print_table

    console = stdout_console()
    console.print(f"[bold]govern demo[/bold]: sample storage at {storage}")
    console.print(
        f"  wrote {tree.files:,} files, {format_bytes(tree.total_bytes)} "
        "(sparse: real sizes, little disk use)"
    )
    catalog = safe_url(app.settings.catalog_url)
    console.print(
        f"  scanned {summary.objects:,} objects, {format_bytes(summary.bytes)} into {catalog}"
    )
    console.print(f"  policy {policy_path}")
    console.print()
    print_table(made, console)
    console.print()
    console.print(f"HTML report: {html_path}")
    govern = f"govern --catalog {catalog}"
    console.print("Next steps (destructive actions wait for someone other than the planner):")
    example = made.actions[0].artifact.uri if made.actions else "URL"
    console.print(f"  {govern} explain {example} --policy {policy_path}", soft_wrap=True)
    console.print(
        f"  {govern} --as reviewer approve {made.plan_id} --comment 'looks right'", soft_wrap=True
    )
    console.print(f"  {govern} apply {made.plan_id} --policy {policy_path}", soft_wrap=True)
    console.print(f"  {govern} restore {made.plan_id} --policy {policy_path}", soft_wrap=True)
    console.print(f"  {govern} audit --verify", soft_wrap=True)
