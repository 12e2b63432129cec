"""`dynacheck rules`: list the hazard catalogue, or explain one rule the way ruff's rule docs do."""

from __future__ import annotations

import functools
import json
import sys

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dynacheck.catalog import Catalog, Rule, load_catalog, rules_folder

OUTCOME_WORDS = {
    "graph_break": "graph break",
    "frame_skip": "whole frame skipped (runs eagerly)",
    "recompile": "recompile",
    "hard_error": "hard error",
    "trace_time": "no break; runs at trace time",
    "skipped_when_compiled": "no break; silently skipped when compiled",
}


def _console() -> Console:
    # Resolve sys.stdout at call time so in-process callers (tests, other commands) capture it.
    # Piped output has no terminal width; give tables room instead of rich's 80 columns.
    width = None if sys.stdout.isatty() else 160
    return Console(file=sys.stdout, width=width, soft_wrap=False, highlight=False)


def catalog_json(catalog: Catalog, rules: list[Rule]) -> str:
    data = {
        "gb_source": catalog.gb_source,
        "torch_version": catalog.torch_version,
        "rules": [rule.to_dict() for rule in rules],
    }
    return json.dumps(data, indent=2, ensure_ascii=False)


def print_table(catalog: Catalog, rules: list[Rule]) -> None:
    table = Table(title=f"dynacheck rules ({len(rules)}; Dynamo ids from {catalog.gb_source})")
    table.add_column("id", no_wrap=True)
    table.add_column("family", no_wrap=True)
    table.add_column("severity", no_wrap=True)
    table.add_column("GB id", no_wrap=True)
    table.add_column("fullgraph", no_wrap=True)
    table.add_column("title")
    for rule in rules:
        table.add_row(
            rule.id,
            rule.family,
            rule.severity,
            rule.outcome.gb_id or "-",
            "fatal" if rule.outcome.fatal_under_fullgraph else "ok",
            escape(rule.title),
        )
    _console().print(table)


def explain_text(catalog: Catalog, rule: Rule) -> str:
    """The ruff-docs-style page for one rule, as plain Markdown-ish text."""
    out = rule.outcome
    lines = [f"{rule.id} {rule.name} ({rule.family}, {rule.severity})", "", rule.title, ""]
    lines += ["## What it does and why it is bad", "", rule.why, ""]
    what = OUTCOME_WORDS.get(out.kind, out.kind)
    lines += ["## What Dynamo does", ""]
    gb = f"{out.gb_id} " if out.gb_id else ""
    lines.append(f"{gb}{what}" + (f": {out.gb_type}" if out.gb_type else ""))
    if out.detail:
        lines.append(f"Where: {out.detail}")
    lines.append(
        "Under fullgraph=True: "
        + ("compilation raises (SGLang's piecewise CUDA graph start-up aborts)." if out.fatal_under_fullgraph else "no error.")
    )
    if out.explanation:
        lines += ["", f"Dynamo's explanation (from {rule.explained_by}): {out.explanation}"]
    for hint in out.hints:
        lines.append(f"  hint: {hint}")
    lines += ["", "## Example", "", "```python", rule.example, "```", ""]
    lines += checked_against_dynamo(rule.id)
    lines += ["## Fixes, in order", ""]
    for i, fix in enumerate(rule.fixes, 1):
        mark = "" if fix.sound else " (UNSOUND, users ask for it; do not use)"
        lines.append(f"{i}. {fix.kind}{mark}: {' '.join(fix.text.split())}")
    if rule.calls:
        lines += ["", "Matches calls to: " + ", ".join(rule.calls)]
    if rule.methods:
        lines += ["Matches methods on tensors of unknown type: " + ", ".join(f".{m}()" for m in rule.methods)]
    if rule.boundary:
        lines += ["", f"Fired at the Dynamo boundary: {rule.boundary}"]
    return "\n".join(lines)


def checked_against_dynamo(rule_id: str) -> list[str]:
    """The rule's firing fixture and what the real Dynamo said about it (rules/messages.json)."""
    seen = _messages()
    entry = seen.get("rules", {}).get(rule_id)
    if not entry:
        return []
    lines = [f"## Checked against Dynamo (torch {seen.get('torch', '?')}, `backend=\"eager\"`)", "",
             f"Firing fixture `{entry['fixture']}`:", "", "```python", entry["code"].rstrip(), "```", ""]
    first = entry.get("first_line", 1)
    for brk in entry.get("default") or []:
        where = f"line {brk['line'] - first + 1} of the fixture" if brk.get("line") else "the fixture"
        lines.append(f"Default compile: {brk['gb_id'] or 'no GB id'} at {where}:")
        lines += [f"    {text}" for text in brk["message"].splitlines()]
    if not entry.get("default"):
        lines.append("Default compile: one graph, no break.")
    full = entry.get("fullgraph")
    if full:
        lines.append(f"fullgraph=True: raises {full['gb_id'] or '(no GB id)'}:")
        lines += [f"    {text}" for text in full["message"].splitlines()[:3]]
    else:
        lines.append("fullgraph=True: compiles (no error).")
    return lines + [""]


@functools.lru_cache(maxsize=1)
def _messages() -> dict:
    path = rules_folder() / "messages.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


@click.command("rules")
@click.option("--explain", "explain_id", metavar="ID", help="Explain one rule (e.g. DC001).")
@click.option("--family", help="Only list rules of this family.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="Output format.",
)
def rules(explain_id: str | None, family: str | None, fmt: str) -> int:
    """List the hazard catalogue, or explain one rule with --explain ID."""
    catalog = load_catalog()
    if explain_id:
        rule = catalog.get(explain_id)  # UserError with the closest ids when unknown
        if fmt == "json":
            click.echo(catalog_json(catalog, [rule]))
        else:
            click.echo(explain_text(catalog, rule))
        return 0
    selected = list(catalog.rules)
    if family:
        selected = [r for r in selected if r.family == family]
        if not selected:
            from dynacheck.errors import UserError

            raise UserError(f"No rule family {family!r}.", f"Families: {', '.join(catalog.families())}.")
    if fmt == "json":
        click.echo(catalog_json(catalog, selected))
    else:
        print_table(catalog, selected)
    return 0
