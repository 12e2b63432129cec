"""Pick a renderer for a Diff: the reports room's when it is installed, the gate's own otherwise."""

from __future__ import annotations

import dataclasses
import importlib
import os
from collections.abc import Callable
from pathlib import Path

from dynacheck.errors import UserError
from dynacheck.gate import annotations, text
from dynacheck.model import Diff, Finding, ScanResult, Target

_FALLBACKS: dict[str, Callable[[Diff], str]] = {
    "terminal": text.render_terminal,
    "markdown": text.render_markdown,
    "json": text.render_json,
    "github": annotations.render_github,
}


def render_diff(diff: Diff, fmt: str) -> str:
    """Text of `diff` in `fmt`; formats only the reports room draws (sarif, html) need it installed."""
    report_render = _report_render(fmt)
    if report_render is not None:
        return report_render(diff, fmt)
    if fmt in _FALLBACKS:
        return _FALLBACKS[fmt](diff)
    raise UserError(f"Format '{fmt}' needs dynacheck's report module, which is not installed here.",
                    f"Use one of: {', '.join(_FALLBACKS)}.")


def _report_render(fmt: str) -> Callable[[Diff, str], str] | None:
    """`dynacheck.report.render` when that room is installed and draws `fmt`."""
    try:
        module = importlib.import_module("dynacheck.report")
    except ModuleNotFoundError as exc:
        if exc.name == "dynacheck.report":
            return None
        raise
    if fmt not in getattr(module, "FORMATS", ()):
        return None
    return getattr(module, "render", None)


def repository_root(start: Path | None = None) -> Path:
    """The folder holding `.git` above `start` (GitHub and code scanning resolve paths from there), else `start`."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return folder
    return here


def relative_to_workdir(diff: Diff, targets: tuple[Target, ...], workdir: Path | None = None) -> Diff:
    """Make finding files openable from `workdir` (default: the repository root; annotations and SARIF need that).

    Scanned files are named relative to their target root; when that root lies under `workdir`,
    the path from `workdir` is what a reviewer clicks and what GitHub attaches to changed lines.
    """
    move = _mover(targets, workdir or repository_root())
    return dataclasses.replace(
        diff,
        **{name: tuple(_moved(f, move) for f in getattr(diff, name))
           for name in ("added", "removed", "changed", "unchanged", "suppressed")},
    )


def relative_to_repository(result: ScanResult, root: Path | None = None) -> ScanResult:
    """The scan's findings with files named from the repository root, as `gate` names them."""
    move = _mover(result.targets, root or repository_root())
    return dataclasses.replace(result, findings=tuple(_moved(f, move) for f in result.findings))


def _mover(targets: tuple[Target, ...], base: Path) -> Callable[[str], str]:
    base = base.resolve()
    roots = [Path(t.root).resolve() for t in targets if t.root]

    def move(file: str) -> str:
        if not file or Path(file).is_absolute():
            return file
        for root in roots:
            candidate = root / file
            if candidate.exists():
                try:
                    return Path(os.path.relpath(candidate, base)).as_posix() if candidate.is_relative_to(base) else file
                except ValueError:
                    return file
        return file

    return move


def _moved(finding: Finding, move: Callable[[str], str]) -> Finding:
    site = dataclasses.replace(finding.site, file=move(finding.site.file))
    chain = tuple(dataclasses.replace(hop, file=move(hop.file)) for hop in finding.chain)
    return dataclasses.replace(finding, site=site, chain=chain)


def emit(rendered: str, out: str | None) -> None:
    """Write to `out`, or to stdout."""
    import click

    if out:
        path = Path(out)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(rendered, encoding="utf-8")
        except OSError as exc:
            raise UserError(f"Cannot write {path}: {exc.strerror or exc}.") from None
    else:
        click.echo(rendered, nl=False)


