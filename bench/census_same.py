"""Whether two census JSON files hold the same records: deployments, cells, not-applicable records and
errors, compared record for record (the run's `stats` and `targets` are left out, and so is each fix
snippet's seal line, which is signed with the key of the user who ran it).

    python bench/census_same.py A.json B.json      # prints EQUAL (exit 0) or the records that differ (exit 1)

Used to check that a census made another way (more workers, another host, wheel files as targets)
says what the committed one says.
"""

from __future__ import annotations

import json
import re
import sys

PARTS = ("deployments", "cells", "not_applicable", "errors")
_SEAL = re.compile(r"# dynacheck seal: [0-9a-f]+\n?")


def normalized(value):
    if isinstance(value, dict):
        return {k: normalized(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalized(v) for v in value]
    return _SEAL.sub("", value) if isinstance(value, str) else value


def differences(a: dict, b: dict) -> list[str]:
    out = []
    for part in PARTS:
        left, right = normalized(a.get(part, [])), normalized(b.get(part, []))
        if left == right:
            continue
        key = lambda r: (r.get("model"), r.get("deployment"), r.get("name")) if isinstance(r, dict) else r  # noqa: E731
        by_left, by_right = {key(r): r for r in left}, {key(r): r for r in right}
        changed = sorted((k for k in by_left.keys() | by_right.keys() if by_left.get(k) != by_right.get(k)), key=str)
        out.append(f"{part}: {len(left)} against {len(right)} records, {len(changed)} differ")
        for k in changed[:10]:
            l, r = by_left.get(k), by_right.get(k)
            fields = sorted(f for f in (l or {}).keys() | (r or {}).keys() if (l or {}).get(f) != (r or {}).get(f))
            out.append(f"  {k}: " + (", ".join(fields) if l and r else "only in " + ("the first" if l else "the second")))
    return out


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    a, b = (json.load(open(path, encoding="utf-8")) for path in sys.argv[1:])
    found = differences(a, b)
    print("\n".join(found) if found else "EQUAL")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
