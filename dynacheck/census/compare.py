"""Compare two censuses (e.g. two SGLang/FlashInfer releases): which cells got better, worse or
moved their first break, and which models appeared or went away."""

from __future__ import annotations

from typing import Any

from dynacheck.census.run import breaks


def _key(cell: dict[str, Any]) -> tuple[str, str]:
    return cell["model"], cell["deployment"]


def _first(cell: dict[str, Any]) -> str:
    first = cell.get("first_break")
    return f"{first['gb_id'] or 'fatal'} {first['function']}" if first else "-"


def _models(census: dict[str, Any]) -> set[str]:
    """Every model the census names: walked, not applicable, or not walked."""
    return {c["model"] for key in ("cells", "not_applicable", "errors") for c in census.get(key, []) if c["model"]}


def _applicability(before: dict, after: dict, old: dict[str, Any], new: dict[str, Any]) -> dict[str, list]:
    """Cells walked on one side and n/a on the other (e.g. a release that drops the launch flag)."""
    old_na = {_key(c): c["reason"] for c in old.get("not_applicable", [])}
    new_na = {_key(c): c["reason"] for c in new.get("not_applicable", [])}
    return {"not_applicable_after": [{"model": k[0], "deployment": k[1], "fatal_before": before[k]["fatal_sites"],
                                      "reason_after": new_na[k]} for k in sorted(before.keys() & new_na.keys())],
            "applicable_after": [{"model": k[0], "deployment": k[1], "fatal_after": after[k]["fatal_sites"],
                                  "reason_before": old_na[k]} for k in sorted(after.keys() & old_na.keys())]}


def compare(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    before = {_key(c): c for c in old["cells"]}
    after = {_key(c): c for c in new["cells"]}
    old_models, new_models = _models(old), _models(new)
    changed = []
    for key in sorted(before.keys() & after.keys()):
        a, b = before[key], after[key]
        if a["fatal_sites"] != b["fatal_sites"] or _first(a) != _first(b) or breaks(a) != breaks(b):
            changed.append({"model": key[0], "deployment": key[1], "fatal_before": a["fatal_sites"],
                            "fatal_after": b["fatal_sites"], "first_before": _first(a), "first_after": _first(b),
                            "fix_after": (b.get("fix") or {}).get("at", ""),
                            "broke_before": breaks(a), "broke_after": breaks(b)})
    return {"from": old["targets"], "to": new["targets"],
            "added_models": sorted(new_models - old_models), "removed_models": sorted(old_models - new_models),
            "fixed": [c for c in changed if c["broke_before"] and not c["broke_after"]],
            "broken": [c for c in changed if not c["broke_before"] and c["broke_after"]],
            "changed": [c for c in changed if c["broke_before"] and c["broke_after"]],
            "same": len(before.keys() & after.keys()) - len(changed)} | _applicability(before, after, old, new)


def compare_markdown(diff: dict[str, Any], command: str = "") -> str:
    out = [f"# Census diff: {', '.join(diff['from'])} -> {', '.join(diff['to'])}", ""]
    if command:
        out += ["Made with:", "", f"    {command}", ""]
    out += [f"- cells in both: {diff['same'] + len(diff['fixed']) + len(diff['broken']) + len(diff['changed'])}"
            f" ({diff['same']} unchanged)",
            f"- fixed (fatal before, none after): {len(diff['fixed'])}",
            f"- newly broken (clean before, fatal after): {len(diff['broken'])}",
            f"- still fatal, count or first break changed: {len(diff['changed'])}",
            f"- models added: {len(diff['added_models'])} ({', '.join(diff['added_models']) or '-'})",
            f"- models removed: {len(diff['removed_models'])} ({', '.join(diff['removed_models']) or '-'})",
            f"- walked before, not applicable after: {len(diff.get('not_applicable_after', []))} "
            f"({sum(1 for c in diff.get('not_applicable_after', []) if c['fatal_before'])} of them fatal before)",
            f"- not applicable before, walked after: {len(diff.get('applicable_after', []))}", ""]
    reasons: dict[str, int] = {}
    for cell in diff.get("not_applicable_after", []):
        reasons[cell["reason_after"]] = reasons.get(cell["reason_after"], 0) + 1
    if reasons:
        out += ["## Walked before, not applicable after", "", "| cells | why, after |", "|---|---|"]
        out += [f"| {n} | {why} |" for why, n in sorted(reasons.items(), key=lambda kv: -kv[1])] + [""]
    for title, key in (("Fixed", "fixed"), ("Newly broken", "broken"), ("Changed", "changed")):
        if not diff[key]:
            continue
        out += [f"## {title}", "", "| model | deployment | fatal | first break before | first break after | fix after |",
                "|---|---|---|---|---|---|"]
        out += [f"| {c['model']} | {c['deployment']} | {c['fatal_before']} -> {c['fatal_after']} | "
                f"`{c['first_before']}` | `{c['first_after']}` | `{c['fix_after']}` |" for c in diff[key]]
        out.append("")
    return "\n".join(out) + "\n"
