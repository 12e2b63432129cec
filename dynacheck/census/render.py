"""Views of a census (one data model, many renderers): terminal table, markdown, HTML, JSON."""

from __future__ import annotations

import html
import json
import re
from collections import Counter
from typing import Any

from dynacheck.census.run import breaks, whichever_way

TOP = 10


def _grid(data: dict[str, Any]) -> tuple[list[str], list[str], dict[tuple[str, str], dict[str, Any]]]:
    columns = [d["name"] for d in data["deployments"]]
    rows: list[str] = []
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    for kind in ("cells", "not_applicable", "errors"):
        for item in data[kind]:
            if _row(item) not in rows:
                rows.append(_row(item))
            if "deployment" in item:
                cells[(item["model"], item["deployment"])] = item | {"kind": kind}
    return columns, rows, cells


def _row(item: dict[str, Any]) -> str:
    """A record's model class; a model file that could not be parsed names no class: its module instead."""
    return item["model"] or item.get("module", "")


def _anchor(model: str, deployment: str) -> str:
    return f"{model}-{deployment}".replace("/", "-")


def cell_text(item: dict[str, Any] | None) -> str:
    if item is None:
        return "error"
    if item.get("kind", "cells") == "not_applicable":
        return "n/a"
    if item.get("kind", "cells") == "errors":
        return "error"
    first = item.get("first_break")
    count = "every way" if not item["fatal_sites"] and item.get("every_way") else f"{item['fatal_sites']}"
    return count + (f" {first['gb_id'] or 'fatal'}" if first else "")


def what_breaks_most(data: dict[str, Any]) -> dict[str, list[tuple[str, int]]]:
    """Functions named by the most cells: first breaks, fixes, and any fatal site."""
    first = Counter(c["first_break"]["function"] for c in data["cells"] if c.get("first_break"))
    fixes = Counter(c["fix"]["at"] for c in data["cells"] if c.get("fix"))
    anywhere = Counter(f for c in data["cells"] for f in c.get("breaks_by_function", []))
    return {"first_break": first.most_common(TOP), "fix": fixes.most_common(TOP),
            "any_fatal_site": anywhere.most_common(TOP)}


def refusals(data: dict[str, Any]) -> dict[str, list[str]]:
    """Reason -> the deployments this framework does not start at all (e.g. a launch flag it lacks)."""
    out: dict[str, list[str]] = {}
    for deployment in data["deployments"]:
        if deployment.get("refused"):
            out.setdefault(deployment["refused"], []).append(deployment["name"])
    return out


def _all_refused(data: dict[str, Any]) -> bool:
    """Every deployment refused by the framework itself: a grid would be one n/a per model and deployment."""
    return not data["cells"] and bool(data["deployments"]) and all(d.get("refused") for d in data["deployments"])


_ALL_REFUSED = "No deployment starts, so no grid is drawn; the models read and each n/a record are in the JSON."


def _summary_lines(data: dict[str, Any]) -> list[str]:
    cells = data["cells"]
    broken = sum(1 for c in cells if c["fatal_sites"])
    every = sum(1 for c in cells if breaks(c) and not c["fatal_sites"])
    refused = [f"- {len(names)} of {len(data['deployments'])} deployments do not start on this SGLang "
               f"({', '.join(names)}): {reason}; every cell of them is n/a."
               for reason, names in refusals(data).items()]
    return refused + [
        f"- {len(cells)} cells walked ({data['stats'].get('models', '?')} registered model classes x "
        f"{len(data['deployments'])} deployments; {data['stats'].get('forwards', '?')} distinct forwards), "
        f"{broken} with at least one unconditional fatal site under piecewise CUDA graphs (fullgraph)"
        + (f", and {every} more that break whichever way their open tests go." if every else "."),
        f"- {len(data['not_applicable'])} cells not applicable (reason read from the sources), "
        f"{len(data['errors'])} model/cell entries could not be walked (listed at the end)."]


def markdown(data: dict[str, Any], command: str = "") -> str:
    columns, rows, cells = _grid(data)
    out = [f"# Dynamo break census: {', '.join(data['targets'])}", ""]
    if command:
        out += ["Made with:", "", f"    {command}", ""]
    out += [_LEGEND, ""] + _summary_lines(data)
    if _all_refused(data):
        listed = [f"- {row}: {why}" for row, why in _errors(data)]
        return "\n".join(out + ["", _ALL_REFUSED] + (["", "## Not walked", ""] + listed if listed else [])) + "\n"
    out += ["", "## What breaks most", ""]
    most = what_breaks_most(data)
    for label, key in (("First break (function)", "first_break"), ("First fix (where)", "fix"),
                       ("Any fatal site (function)", "any_fatal_site")):
        out += [f"| {label} | cells |", "|---|---|"] + [f"| `{n}` | {c} |" for n, c in most[key]] + [""]
    out += ["## Models x deployments", "", "| model | " + " | ".join(columns) + " |",
            "|---|" + "---|" * len(columns)]
    for row in rows:
        texts = []
        for col in columns:
            item = cells.get((row, col))
            text = cell_text(item)
            if item and item["kind"] == "cells" and breaks(item):
                text = f"[{text}](#{_anchor(row, col).lower()})"
            texts.append(text)
        out.append(f"| {row} | " + " | ".join(texts) + " |")
    out += ["", "## Cells with fatal sites", ""]
    for item in data["cells"]:
        if not breaks(item):
            continue
        out.append(f"### {_anchor(item['model'], item['deployment'])}")
        first, fix = item.get("first_break"), item.get("fix")
        out.append(f"{item['model']} on {item['deployment']} (walked from `{item['entry']}`: {item['entry_how']}): "
                   f"{item['fatal_sites']} fatal, {item['conditional_sites']} conditional{_every_way_text(item)}.")
        if first:
            out.append(f"First break: {first['gb_id'] or 'fatal (no GB id)'} {first['rule']} at "
                       f"`{first['file']}:{first['line']}` in `{first['function']}` ({first['title']}).")
            out.append("Chain: " + " -> ".join(f"`{h['function'].rsplit('.', 2)[-2:][-1]}` ({h['file']}:{h['line']})"
                                               for h in first["chain"]))
        if fix:
            out.append(f"Fix first: {fix['kind']} at `{fix['at']}` (clears {fix['fatal_sites']} fatal sites).")
        out.append("")
    if data["not_applicable"] or data["errors"]:
        out += ["## Not applicable / not walked", ""]
        out += [f"- {model}: {reason}" for model, reason in _reasons(data)]
    return "\n".join(out) + "\n"


_LEGEND = ("Each cell: unconditional fatal sites on that deployment, then the GB id of the first break "
           "Dynamo meets in trace order (`fatal` = a fatal site without a Dynamo id, e.g. a data-dependent "
           "branch). `n/a`: nothing is compiled there: the model takes no such checkpoint, the piecewise runner "
           "compiles nothing for the class (a draft-only class, no `.model` or no `.layers`: each reason says what "
           "this release's runner does), the release turns piecewise CUDA graphs off for the model on that launch "
           "(sglang 0.5.10+: a listed architecture, a multimodal model, or a MoE runner ServerArgs picks for it "
           "that turns them off, unless --enforce-piecewise-cuda-graph), "
           "the deployment does not start, or the model does not start on it (a layer "
           "its constructors build cannot be built with the checkpoint's quant config); reasons at the end. "
           "Details per cell below and in the JSON.")


def _errors(data: dict[str, Any]) -> list[tuple[str, str]]:
    """(model, or module where no class is known, reason) of each entry that could not be walked."""
    return [(_row(item), item["reason"]) for item in data["errors"]]


def _reasons(data: dict[str, Any]) -> list[tuple[str, str]]:
    """(model, reason) of each n/a record and walk error, once each; a deployment the framework refuses is
    said once in the summary, not per model."""
    seen = {(item["model"], reason) for reason in refusals(data) for item in data["not_applicable"]}
    out = []
    for item in data["not_applicable"] + data["errors"]:
        key = (_row(item), item["reason"])
        if key not in seen:
            seen.add(key)
            out.append(key)
    return out


_CSS = ("body{font-family:sans-serif;margin:1em}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
        "padding:2px 6px;font-size:12px}td.ok{background:#e6f4ea}td.bad{background:#fde8e8}td.na{color:#999}"
        "details{margin:4px 0}code{font-size:12px}")


def to_html(data: dict[str, Any], command: str = "") -> str:
    """A self-contained page (no network): the grid, each fatal cell linking to its chain and fix."""
    esc = html.escape
    columns, rows, cells = _grid(data)
    out = [f"<!doctype html><meta charset='utf-8'><title>dynacheck census</title><style>{_CSS}</style>",
           f"<h1>Dynamo break census: {esc(', '.join(data['targets']))}</h1>"]
    if command:
        out.append(f"<p>Made with <code>{esc(command)}</code></p>")
    out.append(f"<p>{_code_spans(esc(_LEGEND))}</p>")
    out.append("<ul>" + "".join(f"<li>{esc(line[2:])}</li>" for line in _summary_lines(data)) + "</ul>")
    if _all_refused(data):
        listed = "".join(f"<li>{esc(row)}: {_code_spans(esc(why))}</li>" for row, why in _errors(data))
        return "\n".join(out + [f"<p>{esc(_ALL_REFUSED)}</p>"]
                         + ([f"<h2>Not walked</h2><ul>{listed}</ul>"] if listed else [])) + "\n"
    most = what_breaks_most(data)
    out.append("<h2>What breaks most</h2>")
    for label, key in (("First break", "first_break"), ("First fix", "fix"), ("Any fatal site", "any_fatal_site")):
        out.append(f"<table><tr><th>{label}</th><th>cells</th></tr>" + "".join(
            f"<tr><td><code>{esc(n)}</code></td><td>{c}</td></tr>" for n, c in most[key]) + "</table><br>")
    out.append("<h2>Models x deployments</h2><table><tr><th>model</th>" +
               "".join(f"<th>{esc(c)}</th>" for c in columns) + "</tr>")
    for row in rows:
        out.append(f"<tr><td>{esc(row)}</td>")
        for col in columns:
            item = cells.get((row, col))
            text = esc(cell_text(item))
            if item and item["kind"] == "cells" and breaks(item):
                out.append(f"<td class=bad><a href='#{esc(_anchor(row, col))}'>{text}</a></td>")
            elif item and item["kind"] == "cells":
                out.append(f"<td class=ok>{text}</td>")
            else:
                title = esc(item["reason"]) if item else ""
                out.append(f"<td class=na title='{title}'>{text}</td>")
        out.append("</tr>")
    out.append("</table><h2>Cells with fatal sites</h2>")
    for item in data["cells"]:
        if not breaks(item):
            continue
        first, fix = item.get("first_break"), item.get("fix")
        body = [f"<p>walked from <code>{esc(item['entry'])}</code> ({esc(item['entry_how'])}); "
                f"{item['fatal_sites']} fatal, {item['conditional_sites']} conditional"
                f"{_code_spans(esc(_every_way_text(item)))}</p>"]
        if first:
            body.append(f"<p>First break: <b>{esc(first['gb_id'] or 'fatal (no GB id)')}</b> {esc(first['rule'])} "
                        f"{esc(first['title'])} at <code>{esc(first['file'])}:{first['line']}</code></p><ol>" +
                        "".join(f"<li><code>{esc(h['function'])}</code> {esc(h['file'])}:{h['line']} "
                                f"<code>{esc(h['code'])}</code></li>" for h in first["chain"]) + "</ol>")
        if fix:
            body.append(f"<p>Fix first: {esc(fix['kind'])} at <code>{esc(fix['at'])}</code> "
                        f"(clears {fix['fatal_sites']} fatal sites)</p>")
        out.append(f"<details id='{esc(_anchor(item['model'], item['deployment']))}'><summary>"
                   f"{esc(item['model'])} x {esc(item['deployment'])}: {esc(cell_text(item))}</summary>"
                   + "".join(body) + "</details>")
    if data["not_applicable"] or data["errors"]:
        out.append("<h2>Not applicable / not walked</h2><ul>" + "".join(
            f"<li>{esc(model)}: {_code_spans(esc(reason))}</li>" for model, reason in _reasons(data)) + "</ul>")
    return "\n".join(out) + "\n"


def _every_way_text(item: dict[str, Any]) -> str:
    """`; it breaks whichever way ... goes` for a cell whose breaks cover every way of its open tests, else ''."""
    return f"; it breaks {whichever_way(item['every_way'])}" if item.get("every_way") else ""


def _code_spans(text: str) -> str:
    """`x` in escaped text as <code>x</code> (the reasons and the legend are written for markdown)."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", text)


def to_json(data: dict[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False) + "\n"


def terminal(data: dict[str, Any]) -> str:
    """A plain table for the terminal: one line per model, one column per deployment."""
    if _all_refused(data):
        return "\n".join([line[2:] for line in _summary_lines(data)] + [_ALL_REFUSED]
                         + [f"not walked: {row}: {why}" for row, why in _errors(data)]) + "\n"
    columns, rows, cells = _grid(data)
    width = max([len(r) for r in rows] + [5])
    lines = [" " * width + "  " + " ".join(f"{c:>12}" for c in columns)]
    for row in rows:
        lines.append(f"{row:<{width}}  " + " ".join(f"{cell_text(cells.get((row, c))):>12}" for c in columns))
    return "\n".join(lines + [""] + [line[2:] for line in _summary_lines(data)]) + "\n"
