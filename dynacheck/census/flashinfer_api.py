"""FlashInfer's public API census: each function `flashinfer/__init__.py` re-exports, walked as its
own compiled entry (as if a user called it inside torch.compile), on one deployment.

Unlike FlashInfer's own compile test, nothing is run eagerly first, so first-call JIT paths count.
"""

from __future__ import annotations

import ast
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from dynacheck.census.run import _fatal, _order_key, _site, _trace_first, every_way_fields, site_counts, whichever_way
from dynacheck.deploy.build import DeploymentSpec
from dynacheck.errors import UserError, one_line
from dynacheck.model import Target
from dynacheck.static.argument_calls import read_problem
from dynacheck.sources.text import PARSE_FAILURES, read_source

# cold: nothing is run eagerly first, so a registry that fills on first use is empty when Dynamo traces
DEFAULT_API_DEPLOYMENT = DeploymentSpec(gpu="sm100", platform="cuda", env={"CUDA_HOME": "/usr/local/cuda"}, cold=True)


def public_entries(root: Path) -> list[str]:
    """`module:function` for each function `flashinfer/__init__.py` re-exports (classes left out)."""
    return exported(root)[0]


def exported(root: Path) -> tuple[list[str], dict[str, str]]:
    """`public_entries`, and `module:name` -> why it could not be read, for each name re-exported from a
    module that does not parse (whether it is a function is unknown: the census says so, not skips it). An
    `__init__.py` that cannot be read is a UserError: there is no API to list."""
    init = root / "flashinfer" / "__init__.py"
    tree = _parsed(init)
    if isinstance(tree, str):
        raise UserError(f"Cannot list FlashInfer's public API: {init} {tree}.",
                        "The API census reads what that file re-exports; pass an intact FlashInfer "
                        "(--target flashinfer-python==VERSION).")
    entries, unread = [], {}
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom) or node.level != 1 or not node.module:
            continue
        module = "flashinfer." + node.module
        path = root / Path(*module.split("."))
        source = path.with_suffix(".py") if path.with_suffix(".py").exists() else path / "__init__.py"
        if not source.exists():
            continue
        parsed = _parsed(source)
        if isinstance(parsed, str):
            unread.update({f"{module}:{a.name}": f"{source.relative_to(root)} {parsed}" for a in node.names})
            continue
        defs = {n.name for n in parsed.body if isinstance(n, ast.FunctionDef)}
        entries += [f"{module}:{a.name}" for a in node.names if a.name in defs]
    return sorted(set(entries)), unread


def _parsed(path: Path) -> ast.Module | str:
    """The file's syntax tree, or why there is none ("could not be parsed (SyntaxError: ...)")."""
    try:
        return ast.parse(read_source(path))
    except PARSE_FAILURES as exc:
        what = "could not be read" if isinstance(exc, OSError) else "could not be parsed"
        return f"{what} ({one_line(exc)})"


def api_census(targets: Sequence[Target], *, deployment: DeploymentSpec = DEFAULT_API_DEPLOYMENT,
               cache_dir: Path | None = None, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """One record per exported function: safe inside torch.compile (fullgraph) or not, first break, fix."""
    from dynacheck.static.scan import ScanSession, scan_targets

    started = time.perf_counter()
    target = next((t for t in targets if t.name == "flashinfer-python" or (Path(t.root) / "flashinfer").is_dir()),
                  None)
    if target is None:
        raise UserError("The FlashInfer API census needs a FlashInfer target.",
                        "Add --target flashinfer-python==0.6.3 (or the version you run).")
    session = ScanSession.open(targets, cache_dir)
    records = []
    entries, unread = exported(Path(target.root))
    for i, entry in enumerate(entries, 1):
        try:
            result = scan_targets(targets, [entry], None, cache_dir=cache_dir, deployment=deployment,
                                  session=session, entry_defaults=True)
        except UserError as exc:
            records.append({"function": entry, "safe": None, "error": str(exc)})
            continue
        fatal = _fatal(result.findings)
        fatal_sites, conditional_sites = site_counts(result.findings)
        record = {"function": entry, "safe": not fatal, "fatal_sites": fatal_sites,
                  "conditional_sites": conditional_sites,
                  "first_break": (_trace_first(result) or _site(min(fatal, key=_order_key))) if fatal else None,
                  "every_way": None,
                  "fix": result.fix_plan[0].to_dict() if result.fix_plan else None}
        ways = every_way_fields(result.findings) if not fatal else None  # breaks whichever way its tests go
        record |= ways | {"safe": False} if ways else {}
        depends = [d for p in result.problems if p.kind == "argument_call"
                   if (d := read_problem(p.file, p.message)) is not None]
        if record["safe"] and depends:  # nothing found, but it calls what its caller passes: not known safe
            record |= {"safe": False, "depends_on": depends}
        records.append(record)
        if progress and i % 10 == 0:
            progress(f"flashinfer API census: {i}/{len(entries)} functions")
    records += [{"function": name, "safe": None, "error": why} for name, why in sorted(unread.items())]
    return {"census_version": "1", "kind": "flashinfer-api", "target": target.spec, "version": target.version,
            "deployment": {"gpu": deployment.gpu, "platform": deployment.platform, "env": deployment.env,
                           "first_call": deployment.cold},
            "functions": records, "seconds": round(time.perf_counter() - started, 2)}


def api_markdown(data: dict[str, Any], command: str = "") -> str:
    rows = data["functions"]
    safe = sum(1 for r in rows if r.get("safe"))
    depends = sum(1 for r in rows if r.get("depends_on"))
    out = [f"# FlashInfer public API under torch.compile: {data['target']}", ""]
    if command:
        out += ["Made with:", "", f"    {command}", ""]
    out += [f"Deployment: {data['deployment']}. Each exported function walked as the compiled entry "
            "(fullgraph=True, no eager warm-up first), called with its required arguments only (the others at "
            "their defaults); the first break is the one Dynamo meets first, in trace order.", "",
            f"{safe} of {len(rows)} exported functions are safe; {len(rows) - safe - depends} break or could not be "
            f"walked; {depends} call a value their caller passes, so whether they break depends on that argument.",
            "", "\"Safe\" covers the scanned code: a call into a package outside the targets is not followed and "
            "counts as a break only where a rule names it (tvm-ffi, cuda-python, pynvml, ctypes, and the CuTe DSL's "
            "`cutlass.cute.compile` from nvidia-cutlass-dsl, DC072, and the cuDNN frontend's handle and version "
            "calls, DC063). A function whose only break would be in another "
            "unscanned call reads safe (docs/census.md). A function whose breaks all wait on tests the deployment "
            "does not decide is not safe when every way those tests can go breaks (its fatal count, of "
            "unconditional sites, is then 0). One with no break found that calls a required argument, or a "
            "value read from it (`fi_trace(func_or_method)`), or a method of the `self` a module-level function "
            "takes, is not called safe: it depends on that argument (static/argument_calls.py).",
            "", "| function | safe | fatal | first break | fix first |", "|---|---|---|---|---|"]
    for r in rows:
        first, fix = r.get("first_break"), r.get("fix")
        where = f"{first['gb_id'] or 'fatal'} `{first['function'].rsplit('.', 1)[-1]}` ({first['file']}:{first['line']})" \
            if first else ("error: " + r["error"] if r.get("error") else "")
        if first and r.get("every_way"):
            where += ", " + whichever_way(r["every_way"])
        if r.get("depends_on"):
            call = r["depends_on"][0]
            where = f"depends on `{call['argument']}`: `{call['call']}` ({call['file']}:{call['line']})"
        fix_text = f"{fix['kind']} at `{fix['at']}`" if fix else ""
        safe_text = "yes" if r.get("safe") else "depends" if r.get("depends_on") else "no"
        out.append(f"| `{r['function']}` | {safe_text} | {r.get('fatal_sites', '')} | {where} | {fix_text} |")
    return "\n".join(out) + "\n"
