"""`dynacheck fix --emit FILE [--patch OUT.diff] [--scan scan.json]`: write the patch module that applies the
fixes, and/or a unified diff that makes the same fixes in the scanned sources."""

from __future__ import annotations

from pathlib import Path

import click

from dynacheck.errors import UserError


@click.command("fix")
@click.option("--emit", "emit_path", type=click.Path(dir_okay=False), default=None,
              help="Where to write the patch module (import it before start-up, or from sitecustomize.py).")
@click.option("--patch", "patch_path", type=click.Path(dir_okay=False), default=None,
              help="Where to write a unified diff of the scanned sources that makes the fixes (needs --scan).")
@click.option("--scan", "scan_file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="A `dynacheck scan --format json` file; default: the built-in GLM-5-NVFP4 flagship finding.")
def fix(emit_path: str | None, patch_path: str | None, scan_file: str | None) -> int:
    """Generate a patch module that applies each finding's sound fix, or a source diff (no hand edits)."""
    from dynacheck.capture.command import load_scan
    from dynacheck.fixes.emit import emission_lines, emit_patch

    if not emit_path and not patch_path:
        raise UserError("Nothing to write.", "Pass --emit FILE (patch module) and/or --patch OUT.diff --scan scan.json.")
    if patch_path and not scan_file:
        raise UserError("--patch needs the scan it edits.", "Pass --scan scan.json from `dynacheck scan --format json`.")
    if scan_file:
        result = load_scan(scan_file)
        findings = result.findings
    else:
        from dynacheck.capture.flagship import flagship_findings

        findings = flagship_findings()
    if emit_path:
        Path(emit_path).parent.mkdir(parents=True, exist_ok=True)
        Path(emit_path).write_text(emit_patch(findings))
        for line in emission_lines(findings, emit_path):
            click.echo(line)
    if patch_path:
        from dynacheck.fixes.patch import make_patch

        diff, done, module_only = make_patch(findings, result.targets)
        Path(patch_path).parent.mkdir(parents=True, exist_ok=True)
        Path(patch_path).write_text(diff)
        click.echo(f"dynacheck: wrote {patch_path}: {len(done)} source edit(s); {len(module_only)} fix(es) not expressible as "
                   "a source edit (listed at the top of the diff)")
    return 0
