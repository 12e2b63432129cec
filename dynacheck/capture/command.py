"""`dynacheck capture glm5-nvfp4`: the short GLM-5-NVFP4 capture, with or without the emitted fix.

Exit 0 when every batch size compiled and captured, 1 when a break or a capture failure was seen.
"""

from __future__ import annotations

import importlib
import json
import os
import socket
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from dynacheck.errors import UserError

TARGETS = ("glm5-nvfp4",)
REPLAY_TOLERANCE = 2e-2  # max |replay - eager| / max |eager|; bf16 pieces rerun the same kernels


@click.command("capture")
@click.argument("target", type=click.Choice(TARGETS), default="glm5-nvfp4")
@click.option("--layers", type=click.IntRange(1, 78), default=2, show_default=True,
              help="Decoder layers (the first min(3, N-1) dense, the rest MoE).")
@click.option("--tp", type=click.IntRange(1, 8), default=1, show_default=True, help="Tensor-parallel ranks.")
@click.option("--batch-sizes", default="1,2,4,8", show_default=True, help="Comma-separated sizes to capture.")
@click.option("--dtype", type=click.Choice(["bf16", "fp16", "fp32"]), default="bf16", show_default=True)
@click.option("--experts", type=click.IntRange(1, 256), default=None,
              help="Routed experts (GLM-5 has 256; default 16 at full size, 4 at tiny size; top-k stays 8).")
@click.option("--size", type=click.Choice(["auto", "full", "tiny"]), default="auto", show_default=True,
              help="Layer sizes: full GLM-5 (default on CUDA) or tiny (default on CPU).")
@click.option("--fix/--no-fix", default=False, help="Emit the patch module from the findings, import it, capture.")
@click.option("--scan", "scan_file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="A `dynacheck scan --format json` file: its findings are matched to the breaks seen, and "
                   "--fix applies their fixes (default for --fix: the built-in flagship finding).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="reports/capture", show_default=True,
              help="Folder for the JSON summary, the emitted patch module and the recorder's trace.")
@click.option("--device", type=click.Choice(["auto", "cuda", "cpu"]), default="auto", show_default=True)
@click.option("--quantizer", type=click.Choice(["auto", "flashinfer", "reference"]), default="auto",
              show_default=True, help="auto: FlashInfer's fp4_quantize on CUDA when importable.")
@click.option("--name", default="", help="Summary file name (default capture-fix.json / capture-nofix.json).")
@click.option("--recorder/--no-recorder", default=True, show_default=True,
              help="Re-run the capture under dynacheck's Dynamo recorder (every rank) when it is installed.")
@click.option("--save-outputs", is_flag=True, hidden=True)
def capture(target: str, layers: int, tp: int, batch_sizes: str, dtype: str, experts: int | None, size: str,
            fix: bool, scan_file: str | None, out_dir: str, device: str, quantizer: str, name: str,
            recorder: bool, save_outputs: bool) -> int:
    """Compile and capture a few GLM-5-NVFP4 layers the way SGLang's piecewise runner does."""
    from dynacheck.capture.runner import CaptureOptions

    sizes = _parse_sizes(batch_sizes)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    name = name or f"capture-{'fix' if fix else 'nofix'}.json"
    if scan_file:
        load_scan(scan_file)  # bad input fails now, in one sentence, not after the capture
    if recorder and not os.environ.get(ENV_TRACE_DIR):
        launch = _launch_module()
        if launch is not None:
            args = [target, "--layers", str(layers), "--tp", str(tp), "--batch-sizes", batch_sizes, "--dtype", dtype,
                    "--size", size, "--fix" if fix else "--no-fix", "--out", out_dir,
                    "--device", device, "--quantizer", quantizer, "--name", name, "--no-recorder"]
            args += ["--experts", str(experts)] if experts else []
            args += ["--scan", scan_file] if scan_file else []
            args += ["--save-outputs"] if save_outputs else []
            code = _under_recorder(launch, args, out, name)
            if code is not None:
                return code
    opts = CaptureOptions(layers=layers, tp=tp, batch_sizes=sizes, dtype=dtype, experts=experts, size=size,
                          device=device, quantizer=quantizer, out=str(out), save_outputs=save_outputs)
    fix_info: dict[str, Any] = {"requested": fix}
    if fix:
        fix_info.update(_emit_fix(out, scan_file))
        opts.fix_module = fix_info["module"]
    summary = {
        "schema": "dynacheck.capture/1",
        "target": target,
        "argv": ["dynacheck", "capture", *sys.argv[sys.argv.index("capture") + 1:]] if "capture" in sys.argv else [],
        "options": asdict(opts),
        "fix": fix_info,
        "recorder": _recorder_note(),
        "versions": _versions(),
        "ranks": _run(opts),
    }
    summary["verdict"] = verdict(summary["ranks"])
    if scan_file:
        summary["matches"] = match_scan(scan_file, summary)
    path = out / name
    path.write_text(json.dumps(summary, indent=1, default=str))
    _print(summary, path)
    return 0 if summary["verdict"]["captured_all"] else 1


ENV_TRACE_DIR = "DYNACHECK_TRACE_DIR"  # set by `dynacheck trace` in every process it starts


def _launch_module() -> Any:
    try:
        return importlib.import_module("dynacheck.dynamic.launch")
    except ImportError:
        return None


def _under_recorder(launch: Any, args: list[str], out: Path, name: str) -> int | None:
    """Run this capture again as a child under the recorder; fold the merged per-rank trace into the
    summary. None when the child wrote no summary (the caller then runs without the recorder)."""
    summary_path = out / name
    summary_path.unlink(missing_ok=True)
    trace_dir = out / f"trace-{Path(name).stem}"
    code = launch.run_traced([sys.executable, "-m", "dynacheck", "capture", *args], trace_dir)
    if not summary_path.exists():
        click.echo(f"capture under the recorder wrote no summary (exit {code}); running without the recorder")
        return None
    summary = json.loads(summary_path.read_text())
    try:
        from dynacheck.dynamic.merge import load_trace

        trace = load_trace(trace_dir)
    except Exception as exc:  # a recorder problem must not hide the capture's own result
        summary["recorder"] = {"used": True, "trace_dir": str(trace_dir), "error": f"{type(exc).__name__}: {exc}"}
    else:
        summary["recorder"] = {
            "used": True, "trace_dir": str(trace_dir),
            "ranks": sorted({p.rank for p in trace.processes}),
            "processes": [p.to_dict() for p in trace.processes],
            "events": [e.to_dict() for e in trace.events],
        }
        summary["verdict"]["recorded_breaks"] = [
            {"kind": e.kind, "gb_id": e.gb_id, "site": e.site.to_dict() if e.site else None, "rank": e.rank,
             "count": e.count, "fatal_under_fullgraph": e.fatal_under_fullgraph}
            for e in trace.events if e.gb_id or e.kind in ("graph_break", "fullgraph_error", "frame_skip")
        ]
    summary_path.write_text(json.dumps(summary, indent=1, default=str))
    click.echo(f"recorder: {len(summary['recorder'].get('events', []))} event(s) from "
               f"{len(summary['recorder'].get('processes', []))} process(es) in {trace_dir}")
    return code


def _parse_sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise UserError(f"--batch-sizes must be comma-separated integers, got {text!r}.", "Example: 1,2,4,8") from None
    if not sizes or min(sizes) < 1:
        raise UserError("--batch-sizes needs at least one size of 1 or more.", "Example: 1,2,4,8")
    return sizes


def load_scan(scan_file: str) -> Any:
    """The ScanResult in a `dynacheck scan --format json` file (or a saved review), read like `report --scan`:
    plain file, size and depth limits, schema check; bad input is a one-sentence UserError."""
    from dynacheck.report.command import load_review

    review = load_review(Path(scan_file), None)
    if review.scan is None:
        raise UserError(f"{scan_file} holds no scan.", "Write one with `dynacheck scan --format json`.")
    return review.scan


def _emit_fix(out: Path, scan_file: str | None) -> dict[str, Any]:
    from dynacheck.fixes.emit import chosen_fixes, emit_patch

    if scan_file:
        findings, source = load_scan(scan_file).findings, scan_file
    else:
        from dynacheck.capture.flagship import flagship_findings

        findings, source = flagship_findings(), "built-in flagship finding"
    module = out / "dynacheck_fixes.py"
    module.write_text(emit_patch(findings))
    return {"module": str(module), "findings_from": source,
            "fixes": [f"{fx.kind} at {fx.at}" for fx, _ in chosen_fixes(findings)]}


def _run(opts: Any) -> list[dict[str, Any]]:
    from dynacheck.capture.runner import run_rank, tp_worker

    if opts.tp == 1:
        try:
            return [run_rank(0, opts)]
        except UserError:
            raise
        except Exception as exc:  # e.g. FlashInfer's JIT build failing: the summary says so, no traceback
            import traceback

            return [{"rank": 0, "error": f"{type(exc).__name__}: {exc}"[:2000],
                     "traceback": traceback.format_exc()[-4000:]}]
    import torch
    import torch.multiprocessing as mp

    if opts.device != "cpu" and torch.cuda.is_available() and torch.cuda.device_count() < opts.tp:
        raise UserError(f"--tp {opts.tp} needs {opts.tp} GPUs; this machine has {torch.cuda.device_count()}.")
    for stale in Path(opts.out).glob("rank*.json"):
        stale.unlink()
    mp.spawn(tp_worker, args=(opts, _free_port()), nprocs=opts.tp, join=True)
    ranks = []
    for r in range(opts.tp):
        f = Path(opts.out, f"rank{r}.json")
        ranks.append(json.loads(f.read_text()) if f.exists() else {"rank": r, "error": "rank wrote no result"})
    return ranks


def verdict(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """Merge ranks: every size captured (or compiled, on CPU)? which breaks, on which ranks? worst replay error."""
    entries = [e for r in ranks for e in r.get("batch_sizes", [])]
    breaks: dict[tuple, dict[str, Any]] = {}
    for r in ranks:
        for ev in r.get("breaks", []):
            site = ev.get("site") or {}
            key = (ev.get("gb_id"), site.get("function"), site.get("line"))
            merged = breaks.setdefault(key, {"gb_id": ev.get("gb_id"), "gb_type": ev.get("gb_type"),
                                             "site": site, "fatal_under_fullgraph": ev.get("fatal_under_fullgraph"),
                                             "innermost": ev.get("detail"), "ranks": [],
                                             "chain": _user_chain(ev)})
            merged["ranks"].append(r.get("rank"))
    errors = [e.get("replay", {}).get("max_rel") for e in entries if e.get("replay")]
    worst = max(errors) if errors else None
    ok = bool(entries) and not any(r.get("error") for r in ranks) and all(
        e.get("compiled") and e.get("captured") is not False for e in entries)
    return {"captured_all": ok, "fatal_break": any(b["fatal_under_fullgraph"] for b in breaks.values()),
            "breaks": list(breaks.values()), "max_replay_rel": worst, "tolerance": REPLAY_TOLERANCE,
            "replay_matches": worst is not None and worst <= REPLAY_TOLERANCE,
            "rank_errors": [r["error"] for r in ranks if r.get("error")]}


def match_scan(scan_file: str, summary: dict[str, Any]) -> dict[str, Any]:
    """The scan's findings matched to the breaks this run saw (`dynacheck.dynamic.correlate`)."""
    try:
        from dynacheck.dynamic.correlate import correlate
        from dynacheck.model import Event, TraceResult
    except ImportError:
        return {"note": "dynacheck.dynamic is not installed: findings not matched"}
    scan = load_scan(scan_file)
    events = tuple(Event.from_dict(ev) for r in summary["ranks"] for ev in r.get("breaks", []))
    review = correlate(scan, TraceResult(command=tuple(summary.get("argv", ())), processes=(), events=events))
    by_fp = {f.fingerprint: f for f in scan.findings}
    confirmed = [m for m in review.matches if m.status == "confirmed"]
    return {
        "confirmed": [{"fingerprint": m.fingerprint, "rule": by_fp[m.fingerprint].rule,
                       "site": by_fp[m.fingerprint].site.function, "events": list(m.events)}
                      for m in confirmed if m.fingerprint in by_fp],
        "seen_only": [{"events": list(m.events), "note": m.note} for m in review.matches if m.status == "seen_only"],
        "predicted_only": sum(1 for m in review.matches if m.status == "predicted_only"),
    }


def _user_chain(ev: dict[str, Any]) -> list[str]:
    """The traced frames from the compiled forward down to the break, as `function (file:line)`."""
    return [f"{f['function']} ({Path(f['file']).name}:{f['line']})" for f in ev.get("user_stack", [])]


def _recorder_note() -> dict[str, Any]:
    """Whether this process runs under the recorder (the parent fills in the merged trace afterwards)."""
    if os.environ.get(ENV_TRACE_DIR):
        return {"used": True, "trace_dir": os.environ[ENV_TRACE_DIR]}
    if _launch_module() is None:
        return {"used": False, "note": "dynacheck.dynamic is not installed; breaks come from Dynamo's exception "
                                       "(real_stack), not from the recorder"}
    return {"used": False, "note": "--no-recorder"}


def _versions() -> dict[str, str]:
    from importlib import metadata

    found = {}
    for dist in ("torch", "flashinfer-python", "apache-tvm-ffi", "transformers"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = ""
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _print(summary: dict[str, Any], path: Path) -> None:
    v = summary["verdict"]
    for r in summary["ranks"]:
        if r.get("error"):
            click.echo(f"rank {r.get('rank')}: error {r['error']}")
        for e in r.get("batch_sizes", []):
            state = "captured" if e.get("captured") else ("compiled (no CUDA graphs)" if e.get("compiled") else
                                                          f"FAILED {e.get('error_type', '')} {e.get('gb_id', '')}")
            err = e.get("replay", {}).get("max_rel")
            click.echo(f"rank {r['rank']} batch {e['batch_size']:>3}: {state}"
                       + (f", replay vs eager max rel {err:.2e}" if err is not None else ""))
        for s in r.get("skipped", []):
            click.echo(f"rank {r['rank']} skipped: {s}")
    for b in v["breaks"]:
        site = b["site"] or {}
        click.echo(f"break {b['gb_id']} ({b['gb_type']}) at {site.get('function')} "
                   f"{site.get('file')}:{site.get('line')} ranks {b['ranks']}"
                   + (" — fatal under fullgraph" if b["fatal_under_fullgraph"] else ""))
    click.echo(f"summary: {path}")
