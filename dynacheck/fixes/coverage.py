"""Which fatal sites a set of applied fixes clears: the measure behind `bench/fix_coverage.py`.

A custom op hides everything below it from Dynamo, so a fatal site is cleared when an applied
custom-op fix sits on its chain below the entry; a hoist or assume_constant_result clears the
sites inside the function it replaces; a hazard line that `fix --patch` guards in the source is
cleared by that edit. Which fix clears a site, and whether that fix was built from the library's own
op declarations, is reported per site.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import AbstractSet, Sequence

from dynacheck.fixes.emit import _canonical, _declared_code, applied_fixes
from dynacheck.model import Finding, Fix


@dataclass(frozen=True)
class Cleared:
    finding: Finding
    fix: Fix | None  # None: no applied fix of the patch module clears it
    declared: bool  # the fix was built from the library's own op declarations
    edited: bool = False  # not cleared by the patch module, but by a guard that `fix --patch` writes

    @property
    def applied(self) -> bool:
        return self.fix is not None or self.edited


def cleared(findings: Sequence[Finding], edited: AbstractSet[tuple[str, int]] = frozenset()) -> list[Cleared]:
    """One row per fatal finding: the applied fix that clears it, if any (declared-op fixes preferred).

    edited: (file, line) of the hazard lines the source patch guards (`patch.guarded_sites`)."""
    applied = [fix for fix, _ in applied_fixes(findings)]
    by_place: dict[str, Fix] = {}
    for fix in sorted(applied, key=lambda f: not _declared_code(f)):
        by_place.setdefault(_canonical(fix.at), fix)
    rows = []
    for finding in findings:
        if not finding.outcome.fatal_under_fullgraph:
            continue
        own = next((f for f in finding.fixes if f.sound), None)
        hit = by_place.get(_canonical(own.at)) if own is not None and own.kind == "custom_op" else None
        for hop in () if hit else finding.chain[1:]:
            fix = by_place.get(_canonical(hop.function))
            if fix is not None and (fix.kind == "custom_op" or hop is finding.chain[-1]):
                hit = fix
                break
        code = _declared_code(hit) if hit is not None else ""
        rows.append(Cleared(finding, hit, bool(code) and "_wrap_out_kernel(" not in code,  # a body-derived fake
                            hit is None and (finding.site.file, finding.site.line) in edited))

    return rows
