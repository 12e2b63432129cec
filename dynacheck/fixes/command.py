"""`dynacheck fix --emit FILE [--scan scan.json]`: write the patch module that applies the fixes."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("fix")
@click.option("--emit", "emit_path", type=click.Path(dir_okay=False), required=True,
              help="Where to write the patch module (import it before start-up, or from sitecustomize.py).")
@click.option("--scan", "scan_file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="A `dynacheck scan --format json` file; default: the built-in GLM-5-NVFP4 flagship finding.")
def fix(emit_path: str, scan_file: str | None) -> int:
    """Generate a patch module that applies each finding's sound fix (no hand edits)."""
    from dynacheck.capture.command import load_scan
    from dynacheck.fixes.emit import emission_lines, emit_patch

    if scan_file:
        findings = load_scan(scan_file).findings
    else:
        from dynacheck.capture.flagship import flagship_findings

        findings = flagship_findings()
    Path(emit_path).parent.mkdir(parents=True, exist_ok=True)
    Path(emit_path).write_text(emit_patch(findings))
    for line in emission_lines(findings, emit_path):
        click.echo(line)
    return 0
