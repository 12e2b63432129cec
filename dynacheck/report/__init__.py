"""Reports: one data model in (`Review`, `ScanResult` or a gate `Diff`), many renderers out.

Renderers read the model and nothing else; each is imported only when its format is asked for.
The terminal view prints through rich (`dynacheck.report.console.render_console`); the rest return text.
"""

from __future__ import annotations

from pathlib import Path

from dynacheck.errors import UserError
from dynacheck.model import Diff, Review, ScanResult

FORMATS = ("json", "sarif", "html", "markdown", "github")


def render(review_or_diff: Review | ScanResult | Diff, fmt: str) -> str:
    """The report as text in one of FORMATS."""
    if fmt == "json":
        from dynacheck.report.json_out import render_json

        return render_json(review_or_diff)
    if fmt == "sarif":
        from dynacheck.report.sarif import render_sarif

        return render_sarif(review_or_diff)
    if fmt == "html":
        from dynacheck.report.html import render_html

        if isinstance(review_or_diff, Diff):
            return render_html(None, diff=review_or_diff)
        return render_html(review_or_diff)
    if fmt == "markdown":
        from dynacheck.report.markdown import render_markdown

        return render_markdown(review_or_diff)
    if fmt == "github":
        from dynacheck.report.github import render_github

        return render_github(review_or_diff)
    raise UserError(f"Unknown report format {fmt!r}.", f"Use one of: {', '.join(FORMATS)}.")


def write(text: str, out_path: str | Path) -> Path:
    """Write a rendered report, creating its folder; a path that cannot be written is a UserError."""
    path = Path(out_path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"Cannot write the report to {path}: {exc.strerror or exc}.",
                        "Choose another --out path.") from exc
    return path
