"""The JSON Schemas (draft 2020-12) of dynacheck's JSON outputs, written once here as data.

`schema/scan.schema.json` (what `dynacheck scan --format json` prints), `schema/review.schema.json`
(`dynacheck report --format json` of a scan and/or trace) and `schema/diff.schema.json` (a gate diff)
are generated from these definitions so the three never drift apart; `python -m
dynacheck.report.schemas` rewrites them and a test checks the committed files are current. Major
`schema_version` changes break readers; minor ones only add optional fields.
"""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from dynacheck.model import SCHEMA_VERSION

DRAFT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_DIR = Path(__file__).parent / "schema"
NAMES = ("scan", "review", "diff")

STR = {"type": "string"}
INT = {"type": "integer"}
LINE = {"type": "integer", "minimum": 0}
BOOL = {"type": "boolean"}
STRS = {"type": "array", "items": STR}
SEVERITY = {"enum": ["info", "warning", "error"]}
CONFIDENCE = {"enum": ["low", "medium", "high"]}
OUTCOME_KIND = {"enum": ["graph_break", "frame_skip", "recompile", "hard_error", "trace_time",
                         "skipped_when_compiled", "ok"]}
GB_ID = {"type": "string", "pattern": "^(GB[0-9]{4})?$", "description": "Dynamo's own id, '' when it has none."}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/$defs/{name}"}


def _list(name: str) -> dict[str, Any]:
    return {"type": "array", "items": _ref(name)}


def _record(description: str, props: dict[str, Any]) -> dict[str, Any]:
    """A closed object: every field the model writes is required, nothing else allowed."""
    return {"type": "object", "description": description, "properties": props,
            "required": list(props), "additionalProperties": False}


DEFS: dict[str, dict[str, Any]] = {
    "Hop": _record("One function on the way from the entry to the hazard, and why the call was believed.", {
        "function": {**STR, "description": "Qualified name, e.g. flashinfer.jit.cpp_ext.get_cuda_version."},
        "file": {**STR, "description": "Path relative to the target root."},
        "line": {**LINE, "description": "Line of the call that leads to the next hop (the def for the entry)."},
        "via": {**STR, "description": "How the callee was resolved: entry, import, same module, local definition, self method, "
                "super(), attribute type, nn.Module call -> forward, constructor -> __init__, class hierarchy "
                "fallback, dispatch table, decorator wrapper, return value, factory."},
        "confidence": CONFIDENCE,
        "package": {**STR, "description": "Distribution owning the file, e.g. flashinfer-python."},
        "note": {**STR, "description": "e.g. 'functools.cache: traced through'."},
        "code": {**STR, "description": "The source line at `line`."},
    }),
    "Site": _record("Where the untraceable call happens.", {
        "file": STR, "line": LINE,
        "function": {**STR, "description": "Qualified name of the function holding the call."},
        "callee": {**STR, "description": "What is called there, e.g. subprocess.check_output."},
        "code": STR, "package": STR, "column": LINE,
    }),
    "Outcome": _record("What Dynamo does when it reaches the site.", {
        "kind": OUTCOME_KIND, "gb_id": GB_ID,
        "gb_type": {**STR, "description": "Dynamo's Unsupported.gb_type text."},
        "fatal_under_fullgraph": BOOL,
        "explanation": {**STR, "description": "Dynamo's explanation from graph_break_registry.json."},
        "hints": STRS, "detail": STR,
    }),
    "Fix": _record("One way out, placed at a boundary; sound=false for a fix users ask for that would not work.", {
        "kind": {**STR, "description": "custom_op, assume_constant_result, hoist, allow_in_graph, prewarm, guard, "
                 "remove, disable."},
        "at": {**STR, "description": "Qualified name of the function the fix wraps or edits."},
        "summary": {**STR, "description": "One sentence: what and why here (or why not, when unsound)."},
        "file": STR, "line": LINE, "snippet": STR, "sound": BOOL,
    }),
    "Finding": _record("A hazard reachable from an entry, with its shortest chain, outcome and fixes.", {
        "rule": {"type": "string", "pattern": "^DC[0-9]{3,}$"},
        "title": STR, "severity": SEVERITY, "site": _ref("Site"),
        "chain": {"type": "array", "items": _ref("Hop"), "minItems": 1},
        "outcome": _ref("Outcome"), "fixes": _list("Fix"),
        "confidence": {**CONFIDENCE, "description": "The weakest hop's confidence."},
        "fingerprint": {**STR, "description": "Stable across line moves; the gate's key."},
        "entry": STR, "family": STR,
        "status": {"enum": ["predicted", "confirmed", "seen_only", "suppressed"]},
        "note": STR, "also_reached_by": {"type": "integer", "minimum": 0},
        "conditions": {**_list("Condition"), "description": "What the chain still depends on that the deployment "
                       "did not decide; empty: the finding holds on the scanned deployment."},
    }),
    "Condition": _record("A fact the chain depends on that the deployment left open.", {
        "text": STR, "file": STR, "line": LINE,
        "kind": {**STR, "description": "flag, env, runtime, platform, config, except, first_call or value."},
    }),
    "PlanEntry": _record("One fix of the fix plan and the unconditional sites it clears.", {
        "kind": STR, "at": STR, "sites": {"type": "integer", "minimum": 0},
        "fatal_sites": {"type": "integer", "minimum": 0},
    }),
    "Target": _record("A source tree that was scanned.", {
        "spec": STR, "name": STR, "version": STR,
        "root": {**STR, "description": "Folder holding the top-level packages; hop files are relative to it."},
        "kind": {**STR, "description": "pip, wheel, folder or installed."},
    }),
    "Problem": _record("Input that was skipped.", {"kind": STR, "file": STR, "message": STR}),
    "ScanStats": _record("How much was read and how long it took.", {
        "files_in_trees": INT, "files_parsed": INT, "cache_hits": INT, "functions_visited": INT,
        "seconds": {"type": "number", "minimum": 0},
        "reused": {"type": "boolean", "description": "Answered from the result cache: no input changed since a "
                   "scan with the same targets, entries and deployment (files_parsed and cache_hits are 0)."},
    }),
    "ScanResult": _record("The output of `dynacheck scan --format json`.", {
        "targets": _list("Target"), "entries": STRS, "findings": _list("Finding"),
        "problems": _list("Problem"), "stats": _ref("ScanStats"),
        "schema_version": {"type": "string", "pattern": "^1\\.[0-9]+$"},
        "tool_version": STR, "torch_version": STR,
        "deployment": {"type": "object", "description": "The deployment facts the walk evaluated ({} = none), and "
                       "how the entry was compiled and called: `fullgraph` (why fullgraph=True is assumed), "
                       "`first_call` (no eager warm-up: --first-call), `required_args_only` (--required-args-only)."},
        "fix_plan": {**_list("PlanEntry"), "description": "Fixes ranked by the unconditional fatal sites they clear."},
        "first_break": {"type": "object", "description": "The fatal site Dynamo meets first, in trace order, on a "
                        "chain that holds on the deployment: function, file, line, callee, rule, gb_id, and chain (the hops "
                        "Dynamo takes to it in trace order: function, file, line, code) ({} = none)."},
    }),
    "Frame": _record("One frame of a user stack.", {"file": STR, "line": LINE, "function": STR, "code": STR}),
    "Event": _record("One thing the recorder saw in one process.", {
        "kind": STR, "pid": INT, "rank": INT, "gb_id": GB_ID, "gb_type": STR, "reason": STR,
        "explanation": STR, "hints": STRS, "user_stack": _list("Frame"),
        "site": {"anyOf": [_ref("Frame"), {"type": "null"}]},
        "compiled_frame": STR, "phase": STR, "fatal_under_fullgraph": BOOL,
        "count": {"type": "integer", "minimum": 0}, "detail": STR, "argv": STRS, "time": {"type": "number"},
        "ranks": {"type": "array", "items": INT}, "pids": {"type": "array", "items": INT},
        "fixes": {**_list("Fix"), "description": "For an observed break: the fix the scan would place, from the stack."},
    }),
    "ProcessInfo": _record("One process of the traced command.", {
        "pid": INT, "rank": INT, "argv": STRS, "events": INT, "ended": STR,
    }),
    "Match": _record("A static finding and the dynamic events that correspond to it.", {
        "status": {"enum": ["confirmed", "predicted_only", "seen_only"]},
        "fingerprint": STR,
        "events": {"type": "array", "items": {"type": "integer", "minimum": 0}},
        "note": STR,
    }),
    "TraceResult": _record("Every process of one traced command, merged.", {
        "command": STRS, "processes": _list("ProcessInfo"), "events": _list("Event"), "exit_code": INT,
        "schema_version": {"type": "string", "pattern": "^1\\.[0-9]+$"}, "torch_version": STR,
    }),
    "Review": _record("A scan, a trace, or both with their matches.", {
        "scan": {"anyOf": [_ref("ScanResult"), {"type": "null"}]},
        "trace": {"anyOf": [_ref("TraceResult"), {"type": "null"}]},
        "matches": _list("Match"),
    }),
    "Diff": _record("Findings of two dependency sets compared by fingerprint.", {
        "before": STRS, "after": STRS, "added": _list("Finding"), "removed": _list("Finding"),
        "changed": _list("Finding"), "unchanged": _list("Finding"), "suppressed": _list("Finding"),
        "notes": {**STRS, "description": "What one side's findings mean, e.g. 'after: SGLang turns piecewise CUDA "
                  "graphs off for ...' (the release does not compile the model on that launch). Optional: "
                  "older diffs have none."},
    }),
}
DEFS["Diff"]["required"].remove("notes")

ROOTS = {"scan": "ScanResult", "review": "Review", "diff": "Diff"}
TITLES = {
    "scan": "dynacheck scan result",
    "review": "dynacheck review (scan and/or trace with matches)",
    "diff": "dynacheck diff of two dependency sets",
}


def _reachable(root: str) -> list[str]:
    seen: list[str] = []
    todo = [root]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.append(name)
        todo.extend(_refs(DEFS[name]))
    return sorted(seen)


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        out = [node["$ref"].rsplit("/", 1)[-1]] if "$ref" in node else []
        for value in node.values():
            out.extend(_refs(value))
        return out
    if isinstance(node, list):
        return [r for item in node for r in _refs(item)]
    return []


def build(name: str) -> dict[str, Any]:
    """The schema document for one output ('scan', 'review' or 'diff')."""
    root = ROOTS[name]
    return {
        "$schema": DRAFT,
        "$id": f"urn:dynacheck:schema:{name}:{SCHEMA_VERSION.split('.')[0]}",
        "title": TITLES[name],
        "description": f"dynacheck {name} JSON, schema_version {SCHEMA_VERSION}. See docs/json-schema.md.",
        "$ref": f"#/$defs/{root}",
        "$defs": {n: DEFS[n] for n in _reachable(root)},
    }


def load_schema(name: str) -> dict[str, Any]:
    """The committed schema file, as shipped in the package."""
    text = resources.files("dynacheck.report").joinpath(f"schema/{name}.schema.json").read_text("utf-8")
    return json.loads(text)


def dumps(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Rewrite the schema files (or, with --check, say whether they are current)."""
    check = "--check" in (argv if argv is not None else sys.argv[1:])
    stale = []
    for name in NAMES:
        path = SCHEMA_DIR / f"{name}.schema.json"
        text = dumps(build(name))
        if path.exists() and path.read_text("utf-8") == text:
            continue
        stale.append(path.name)
        if not check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, "utf-8")
    if stale:
        print(("stale: " if check else "wrote: ") + ", ".join(stale))
    return 1 if check and stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
