"""Benchmark: how many fatal sites get a fix the patch module applies (not a skeleton, not by hand).

Two scans, both offline from the cached wheels:
- flagship: the GLM-5 preset on sglang 0.5.9 + flashinfer-python 0.6.3 (every configuration: the
  deployment-aware scan will narrow it to the unconditional sites);
- public API: every function flashinfer 0.6.3 exports from `flashinfer/__init__.py` as an entry
  (read statically), counting the fixes whose fake comes from FlashInfer's own declarations.

    python bench/fix_coverage.py [--write bench/RESULTS.md] [--json reports/fixes/coverage.json]
        [--emit reports/fixes/flashinfer_public_fixes.py]
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

from dynacheck.census.flashinfer_api import public_entries
from dynacheck.fixes.coverage import cleared
from dynacheck.fixes.emit import emit_patch
from dynacheck.fixes.patch import guarded_sites
from dynacheck.sources.resolve import resolve_target
from dynacheck.census.flashinfer_api import DEFAULT_API_DEPLOYMENT
from dynacheck.static.scan import scan_targets

COMMAND = ("python bench/fix_coverage.py --write bench/RESULTS.md --json reports/fixes/coverage.json "
           "--emit reports/fixes/flashinfer_public_fixes.py")
SECTION = "## Fix coverage: fatal sites with an applied fix"


LOGGING_WRAPPER = "flashinfer.api_logging.flashinfer_api.<locals>.decorator.<locals>.wrapper"


def only_with_logging(row) -> bool:
    """Reached only through @flashinfer_api's logging wrapper, which exists only when FLASHINFER_LOGLEVEL > 0
    (at the default 0 the decorator returns the function itself): a conditional site."""
    return any(h.function == LOGGING_WRAPPER for h in row.finding.chain)


def unconditional_sites(rows) -> list:
    """One row per site that holds on the scanned deployment (its first finding, no open conditions)."""
    seen, out = set(), []
    for row in rows:
        site = (row.finding.site.file, row.finding.site.line)
        if row.finding.conditions or site in seen:
            continue
        seen.add(site)
        out.append(row)
    return out


def measure(name: str, rows, unit: str = "fatal sites") -> dict:
    out = {"scan": name, "unit": unit}
    for label, chosen in (("all", rows), ("without_loglevel_sites", [r for r in rows if not only_with_logging(r)]),
                          ("unconditional_sites", unconditional_sites(rows))):
        fatal = len(chosen)
        applied = sum(r.applied for r in chosen)
        edited = sum(r.edited for r in chosen)
        declared = sum(r.declared for r in chosen)
        why = collections.Counter()
        for r in chosen:
            if not r.applied:
                first = next((f for f in r.finding.fixes if f.sound), None)
                declined = next((f for f in r.finding.fixes if f.kind == "custom_op" and not f.sound
                                 and f.summary.startswith("No declared op fix")), None)
                reason = declined.summary if declined else (
                    f"first sound fix: {first.kind} at {first.at}" if first else "no sound fix")
                why[reason] += 1
        out[label] = {"fatal": fatal, "applied": applied, "source_edit": edited, "declared": declared,
                      "applied_share": applied / fatal if fatal else 0.0,
                      "declared_share": declared / fatal if fatal else 0.0, "not_cleared": why.most_common()}
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--emit", type=Path, default=None, help="write the public-API patch module here")
    args = parser.parse_args()

    sglang = resolve_target("sglang==0.5.9", offline=True)
    flashinfer = resolve_target("flashinfer-python==0.6.3", offline=True)
    flagship = scan_targets([sglang, flashinfer], [], "glm5")
    entries = public_entries(Path(flashinfer.root))
    public = scan_targets([flashinfer], entries)
    pairs = []  # (entry, fatal site) pairs: each exported function scanned as the only entry
    for entry in entries:
        pairs += cleared(scan_targets([flashinfer], [entry]).findings)
    deployed = []  # the same as the API census walks it: sm100, CUDA, default env (FLASHINFER_LOGLEVEL unset),
    for entry in entries:  # the process's first call, every optional argument at its default
        deployed += cleared(scan_targets([flashinfer], [entry], deployment=DEFAULT_API_DEPLOYMENT,
                                         entry_defaults=True).findings)
    flagship_rows = cleared(flagship.findings, guarded_sites(flagship.findings, flagship.targets))
    results = [measure("flagship (glm5 preset: the GLM-5-NVFP4 SM120 deployment)", flagship_rows),
               measure(f"flashinfer 0.6.3 public API ({len(entries)} exported functions, one scan per function)",
                       pairs, unit="(exported function, fatal site) pairs"),
               measure(f"flashinfer 0.6.3 public API as the API census calls it (sm100, default env, first call, defaults; {len(entries)} "
                       "functions)", deployed, unit="(exported function, fatal site) pairs")]
    for r in results:
        for label in ("all", "without_loglevel_sites", "unconditional_sites"):
            m = r[label]
            print(f"{r['scan']} [{label}]: {m['applied']}/{m['fatal']} applied ({m['applied_share']:.0%}), "
                  f"{m['declared']} from FlashInfer's declarations ({m['declared_share']:.0%})")
    if args.emit:
        args.emit.parent.mkdir(parents=True, exist_ok=True)
        args.emit.write_text(emit_patch(public.findings))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"command": COMMAND, "results": results}, indent=1) + "\n")
    if args.write:
        _write(args.write, results)
    return 0


def _write(path: Path, results: list[dict]) -> None:
    lines = [SECTION, "", f"Command: `{COMMAND}` (offline, cached wheels; torch {_torch()})", "",
             "A site is cleared when the patch module applies a fix on its chain (a custom op at or above it, or a "
             "hoist / assume_constant_result of its function), or, on the flagship, when `dynacheck fix --patch` "
             "guards its line in the source (a bare side-effect call, or a branch on a tensor's value that then "
             "is not taken when compiled); skeletons and hand edits do not count. A fix "
             "\"built from FlashInfer's declarations\" registers ops FlashInfer declares, with their fakes; the other "
             "applied fixes are custom ops whose fake is the function's own body with its out-writing JIT kernel a "
             "no-op (SGLang's `jit_kernel`, `dynacheck/fixes/out_kernels.py`). "
             "\"without LOGLEVEL sites\" leaves out the sites reached only through `@flashinfer_api`'s logging "
             "wrapper, which exists only when FLASHINFER_LOGLEVEL > 0 (default 0).", "",
             "| scan | counted | unit | fatal | cleared by an applied fix | of which a source edit | share | fix built "
             "from FlashInfer's declarations | share |", "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        for label in ("all", "without_loglevel_sites", "unconditional_sites"):
            m = r[label]
            lines.append(f"| {r['scan']} | {label.replace('_', ' ')} | {r['unit']} | {m['fatal']} | {m['applied']} | "
                         f"{m['source_edit']} | {m['applied_share']:.0%} | {m['declared']} | {m['declared_share']:.0%} |")
    lines += ["", "Every site left without an applied fix, with the reason: `reports/fixes/coverage.json`.", ""]
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    if SECTION in text:
        head, _, rest = text.partition(SECTION)
        tail = rest.split("\n## ", 1)
        text = head + "\n".join(lines) + ("\n## " + tail[1] if len(tail) > 1 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + "\n".join(lines)
    path.write_text(text)


def _torch() -> str:
    import torch

    return torch.__version__


if __name__ == "__main__":
    sys.exit(main())
