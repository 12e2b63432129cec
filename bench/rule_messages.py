"""Record what the real Dynamo says on every rule's firing fixture: rules/messages.json.

`dynacheck rules --explain ID` shows it under "Checked against Dynamo": the fixture's code, the
break Dynamo reports under the default compile (GB id, line, its own words) and what
`fullgraph=True` does. Regenerate after changing a fixture or upgrading torch:

    PYTHONPATH=$PWD python bench/rule_messages.py

tests/test_rules_oracle.py checks the file is current for the installed torch's GB ids.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import logging
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "rules"
OUT = ROOT / "rules" / "messages.json"
NOT_ON_CPU = {"DC062", "DC071", "DC080", "DC135"}
# fixtures importing a package that is not a dev dependency: recorded where it is installed
# (bench/cute_dsl_oracle.sh's venv), else the entry already in messages.json is kept
NEEDS_MODULE = {"DC072": "cutlass.cute", "DC063": "cudnn"}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False


def fixture(entry: str):
    module_name, qual = entry.split(":")
    class_name, method = qual.split(".")
    module = importlib.import_module(module_name)
    cls = getattr(module, class_name)
    return cls, getattr(cls(), method), Path(module.__file__)


def record(rule) -> dict:
    import torch

    from dynacheck.dynamic.oracle import judge

    cls, fn, path = fixture(rule.fixture_fire)
    verdict = judge(fn, lambda: torch.ones(4), near=str(path))
    source, first = inspect.getsourcelines(cls)
    here = [b for b in verdict.breaks if b.file and Path(b.file).resolve() == path.resolve()]
    fg = verdict.fullgraph_error
    return {
        "fixture": rule.fixture_fire,
        "code": "".join(source).rstrip() + "\n",
        "first_line": first,
        "default": [{"gb_id": b.gb_id, "line": b.line, "message": b.message} for b in (here or verdict.breaks)],
        "fullgraph": None if fg is None else {"gb_id": fg.gb_id, "line": fg.line, "message": fg.message},
    }


def main() -> int:
    import torch

    from dynacheck.catalog import load_catalog

    warnings.simplefilter("ignore")
    logging.getLogger("torch").setLevel(logging.ERROR)
    sys.path.insert(0, str(FIXTURES))
    messages = {"torch": torch.__version__, "rules": {}}
    kept = json.loads(OUT.read_text())["rules"] if OUT.exists() else {}
    for rule in load_catalog().rules:
        if rule.id in NOT_ON_CPU:
            continue
        if rule.id in NEEDS_MODULE and not _installed(NEEDS_MODULE[rule.id]):
            if rule.id in kept:
                messages["rules"][rule.id] = kept[rule.id]
            continue
        messages["rules"][rule.id] = record(rule)
    text = json.dumps(messages, indent=1, sort_keys=True) + "\n"
    out = Path(sys.argv[sys.argv.index("--out") + 1]) if "--out" in sys.argv else OUT
    out.write_text(text.replace(str(ROOT) + "/", "").replace(str(ROOT)[-8:] + "/", ""))  # no machine paths
    print(f"wrote {out}: {len(messages['rules'])} rules, torch {torch.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
