"""`govern demo`: build a sample tree of training runs on local disk and run the main job on it."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import click

from governance.cli.context import AppContext, pass_app
from governance.cli.output import emit_json, format_option, stdout_console
from governance.errors import ArgumentError

MARKER = ".govern-demo"


@click.command()
@click.option(
    "--dir",
    "workdir",
    type=click.Path(path_type=Path),
    default=Path("govern-demo"),
    show_default=True,
    help="Folder for the sample storage, its catalog and reports.",
)
@format_option("table", "json")
@pass_app
def demo(app: AppContext, workdir: Path, fmt: str) -> None:
    """Build a sample storage tree on local disk and run scan and plan on it."""
    from dataclasses import replace

    from governance.demo import build_demo_tree
    from governance.scan.runner import scan_store
    from governance.storage import open_store

    workdir = workdir.resolve()
    if workdir.exists() and any(workdir.iterdir()) and not (workdir / MARKER).exists():
        raise ArgumentError(
            f"--dir {workdir}: folder exists and was not made by govern demo; choose another"
        )
    if workdir.exists():
        shutil.rmtree(workdir)
    storage = workdir / "storage"
    storage.mkdir(parents=True)
    (workdir / MARKER).write_text("made by govern demo; safe to delete\n")
    now = datetime.now(UTC)
    tree = build_demo_tree(storage, now)
    app.settings = replace(app.settings, catalog_url=f"sqlite:///{workdir / 'catalog.db'}")
    engine = app.engine
    summary = scan_store(engine, open_store(str(storage)), actor=app.settings.identity, name="demo")
    if fmt == "json":
        emit_json({"dir": str(workdir), "scan": summary.as_dict()})
        return
    from governance.policy.units import format_bytes

    console = stdout_console()
    console.print(f"[bold]govern demo[/bold]: sample storage at {storage}")
    console.print(
        f"  wrote {tree.files:,} files, {format_bytes(tree.bytes)} (sparse: little real disk use)"
    )
    console.print(
        f"  scanned {summary.objects:,} objects, {format_bytes(summary.bytes)} into {workdir / 'catalog.db'}"
    )
