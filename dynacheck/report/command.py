"""`dynacheck report`: render a saved scan, a trace folder and/or a gate diff in any format.

Inputs are files other tools wrote, so every way they can be wrong (missing, not JSON, not a
dynacheck document, a schema this version does not read) is one sentence and exit 2.
"""

from __future__ import annotations

import importlib
import io
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from dynacheck.errors import UserError
from dynacheck.readers import load_json_file
from dynacheck.model import SCHEMA_VERSION, Diff, Review, ScanResult, TraceResult
from dynacheck.report import FORMATS, render, write

DEFAULT_HTML = Path("reports/dynacheck-report.html")
READ_ERRORS = (TypeError, KeyError, ValueError, AttributeError, IndexError, RecursionError)


@click.command("report")
@click.option("--scan", "scan_path", type=click.Path(dir_okay=False, path_type=Path),
              help="A scan result (`dynacheck scan --format json`) or a saved review.")
@click.option("--trace", "trace_dir", type=click.Path(path_type=Path),
              help="A trace folder written by `dynacheck trace`; correlated with --scan when both are given.")
@click.option("--diff", "diff_path", type=click.Path(dir_okay=False, path_type=Path),
              help="A gate diff (`dynacheck diff --format json`).")
@click.option("--format", "fmt", type=click.Choice(("terminal", *FORMATS)), default="terminal", show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help=f"Output file (default: stdout; {DEFAULT_HTML} for html).")
@click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="pyproject.toml with [tool.dynacheck] (default: the nearest one): its ignores and inline "
                   "suppressions mark the scan's findings as the scan and the gate do.")
@click.option("-v", "--verbose", is_flag=True, help="Terminal: show every chain and problem.")
@click.option("--source-root", "source_roots", multiple=True, type=click.Path(file_okay=False, path_type=Path),
              help="HTML: a folder that source excerpts may also be read from (a scanned folder outside the "
                   "current one); repeatable.")
def report(scan_path: Path | None, trace_dir: Path | None, diff_path: Path | None, fmt: str,
           out: Path | None, config_file: Path | None, verbose: bool,
           source_roots: tuple[Path, ...] = ()) -> int:
    """Render a scan, a trace and/or a diff as terminal text, JSON, SARIF, HTML, Markdown or GitHub annotations."""
    if not (scan_path or trace_dir or diff_path):
        raise UserError("Nothing to report.", "Give --scan FILE, --trace DIR and/or --diff FILE.")
    review = load_review(scan_path, trace_dir) if (scan_path or trace_dir) else None
    if review is not None and review.scan is not None:
        from dynacheck.gate.policy import apply_policy, load_policy

        review.scan = apply_policy(review.scan, load_policy(config_file), fingerprint=False)
    diff = load_diff(diff_path) if diff_path else None
    if review is not None and diff is not None and fmt not in ("terminal", "html"):
        raise UserError(f"--format {fmt} renders either a review or a diff, not both.",
                        "Drop --diff, or use --format html or terminal.")
    if fmt == "terminal":
        _terminal(review, diff, out, verbose)
        return 0
    if fmt == "html":
        from dynacheck.report.html import render_html
        from dynacheck.report.source import local_roots

        roots = local_roots(review.scan if review is not None else None, source_roots)
        path = write(render_html(review, diff=diff, source_roots=roots), out or DEFAULT_HTML)
        click.echo(f"dynacheck: wrote {path}", err=True)
        return 0
    text = render(diff if diff is not None else review, fmt)  # type: ignore[arg-type]
    if out is None:
        click.echo(text, nl=False)
    else:
        click.echo(f"dynacheck: wrote {write(text, out)}", err=True)
    return 0


def _terminal(review: Review | None, diff: Diff | None, out: Path | None, verbose: bool) -> None:
    from dynacheck.report.console import render_console, render_diff_console

    buffer = io.StringIO() if out is not None else None
    console = Console(file=buffer, width=120, no_color=True) if buffer is not None else Console()
    if review is not None:
        render_console(review, console, verbose=verbose)
    if diff is not None:
        render_diff_console(diff, console, verbose=verbose)
    if buffer is not None and out is not None:
        click.echo(f"dynacheck: wrote {write(buffer.getvalue(), out)}", err=True)


def load_review(scan_path: Path | None, trace_dir: Path | None) -> Review:
    """A review from a scan file and/or a trace folder (correlated by the dynamic room)."""
    review = _review_from(load_json(scan_path, "scan"), scan_path) if scan_path else Review()
    if trace_dir is None:
        return review
    if review.trace is not None:
        raise UserError(f"{scan_path} already holds a trace.", "Drop --trace, or pass a bare scan with --scan.")
    trace = _dynamic("dynacheck.dynamic.advice", "advise")(_load_trace(trace_dir))
    correlate = _dynamic("dynacheck.dynamic.correlate", "correlate")
    try:
        return correlate(review.scan, trace)
    except UserError:
        raise
    except (OSError, *READ_ERRORS) as exc:
        raise UserError(f"Cannot match the trace in {trace_dir} with the scan: {exc}.",
                        "Re-run `dynacheck trace` and `dynacheck scan` with this dynacheck version.") from exc


def load_diff(path: Path) -> Diff:
    data = load_json(path, "diff")
    if not isinstance(data, dict) or not {"before", "after"} <= set(data):
        raise UserError(f"{path} is not a dynacheck diff.", "Write one with `dynacheck diff --format json`.")
    _check(data, "diff", path)
    try:
        return Diff.from_dict(data)
    except READ_ERRORS as exc:
        raise UserError(f"{path} is not a readable dynacheck diff ({exc}).",
                        "Write it again with this dynacheck version.") from exc


def load_json(path: Path, what: str) -> Any:
    """A JSON input file: plain file, size- and depth-limited, every failure one sentence."""
    return load_json_file(path, what, f"Write it with `dynacheck {what} --format json`.")


def _review_from(data: Any, path: Path) -> Review:
    if not isinstance(data, dict):
        raise UserError(f"{path} is not a dynacheck scan.", "Write one with `dynacheck scan --format json`.")
    if "findings" in data and "targets" in data:
        _version(data, path)
        _check(data, "scan", path)
        return _build(lambda: Review(scan=ScanResult.from_dict(data)), path)
    if data and set(data) <= {"scan", "trace", "matches"}:
        for part in ("scan", "trace"):
            if isinstance(data.get(part), dict):
                _version(data[part], path)
        _check(data, "review", path)
        return _build(lambda: Review.from_dict(data), path)
    raise UserError(f"{path} is not a dynacheck scan or review.", "Write one with `dynacheck scan --format json`.")


def _build(make, path: Path) -> Review:
    try:
        return make()
    except READ_ERRORS as exc:
        raise UserError(f"{path} is not a readable dynacheck scan ({exc}).",
                        "Write it again with this dynacheck version.") from exc


def _version(data: dict, path: Path) -> None:
    found = str(data.get("schema_version", ""))
    if found.split(".")[0] != SCHEMA_VERSION.split(".")[0]:
        raise UserError(f"{path} has schema_version {found or '(none)'}; this dynacheck reads {SCHEMA_VERSION}.",
                        "Re-create it with this dynacheck version.")


def _check(data: Any, name: str, path: Path) -> None:
    """Schema-check the input when jsonschema is installed, so a bad field is named, not a traceback."""
    try:
        import jsonschema
    except ImportError:
        return
    from dynacheck.report.schemas import load_schema

    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(load_schema(name)).iter_errors(data))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise UserError(f"{path} does not match the dynacheck {name} schema at {where}: {error.message[:200]}.",
                        "Write it again with this dynacheck version.")


def _load_trace(trace_dir: Path) -> TraceResult:
    if not trace_dir.exists():
        raise UserError(f"The trace folder {trace_dir} does not exist.", "Pass the folder `dynacheck trace` wrote.")
    load_trace = _dynamic("dynacheck.dynamic.merge", "load_trace")
    try:
        return load_trace(trace_dir)
    except UserError:
        raise
    except (OSError, *READ_ERRORS) as exc:
        raise UserError(f"Cannot read the trace in {trace_dir}: {exc}.",
                        "Pass the folder `dynacheck trace` wrote.") from exc


def _dynamic(module: str, name: str):
    """A function of the dynamic room, imported only when a trace is given."""
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise UserError("Reading traces needs dynacheck's dynamic recorder, which this install lacks.",
                        "Install the full dynacheck, or report the scan alone.") from exc
