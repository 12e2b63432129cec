"""The static ServerArgs reader against SGLang's own argument parser, flag by flag.

dynacheck never imports scanned code; this benchmark does, as the oracle: in a separate interpreter
it builds SGLang's real `argparse` parser (`ServerArgs.add_cli_args`) and dumps every action, then
compares each with what `deploy/server_args.py` read from the same sources without importing them.

    python bench/server_args_oracle.py --python /tmp/ov/bin/python [--version 0.5.23] [--write bench/RESULTS.md]

The interpreter given needs what importing `sglang.srt.server_args` needs (for 0.5.23: msgspec,
psutil, pybase64, triton, pillow, starlette, pyzmq, tqdm, aiohttp; a venv with
--system-site-packages over this one's torch). The tree comes from the wheel cache (offline).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from scan_bench import publish

from dynacheck.deploy.server_args import read_schema
from dynacheck.sources.resolve import resolve_target

_DUMP = r"""
import argparse, json
from sglang.srt.server_args import ServerArgs
parser = argparse.ArgumentParser()
ServerArgs.add_cli_args(parser)
out = []
for action in parser._actions:
    if not action.option_strings or action.dest == "help":
        continue
    zero = action.nargs == 0
    out.append({"flags": action.option_strings, "dest": action.dest, "takes_value": not zero,
                "const": repr(action.const) if zero else None, "default": repr(action.default),
                "type": getattr(action.type, "__name__", "") if action.type else ""})
print(json.dumps(out))
"""


def real_actions(python: str, root: Path) -> list[dict]:
    done = subprocess.run([python, "-c", _DUMP], capture_output=True, text=True,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    if done.returncode != 0:
        raise SystemExit(f"{python} could not build SGLang's parser from {root}:\n"
                         + "\n".join(done.stderr.strip().splitlines()[-3:]))
    return json.loads(done.stdout.strip().splitlines()[-1])


def compare(actions: list[dict], schema) -> dict:
    """Per real flag: found statically, same dest, same arity (a value or none), and for a flag that
    stores True the same; per dest with a literal default read: the same default as argparse's."""
    flags = [(flag, a) for a in actions for flag in a["flags"]]
    missing = [f for f, _ in flags if f not in schema.flags]
    wrong_dest = [f for f, a in flags if f in schema.flags and schema.flags[f][0] != a["dest"]]
    value_actions = ("store_true", "store_false", "ignore")
    wrong_arity = [f for f, a in flags if f in schema.flags and (schema.flags[f][1] not in value_actions) != a["takes_value"]]
    wrong_true = [f for f, a in flags if f in schema.flags and not a["takes_value"] and a["const"] == "True"
                  and schema.flags[f][1] != "store_true"]
    extra = sorted(set(schema.flags) - {f for f, _ in flags})
    defaults = {a["dest"]: a["default"] for a in actions}
    checked = [d for d in schema.defaults if d in defaults]
    wrong_default = [d for d in checked if repr(schema.defaults[d]) != defaults[d]]
    return {"flags": len(flags), "missing": missing, "wrong_dest": wrong_dest, "wrong_arity": wrong_arity,
            "wrong_true": wrong_true, "extra": extra, "defaults_checked": len(checked),
            "wrong_default": wrong_default, "resolvable": len(schema.resolvable)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--python", required=True, help="an interpreter that can import sglang.srt.server_args")
    parser.add_argument("--version", default="0.5.23")
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args()
    target = resolve_target(f"sglang=={args.version}", offline=True)
    root = Path(target.root)
    schema = read_schema(root / "sglang" / "srt" / "server_args.py")
    got = compare(real_actions(args.python, root), schema)
    shown = lambda items: ", ".join(f"`{i}`" for i in items[:8]) + (" ..." if len(items) > 8 else "") or "none"  # noqa: E731
    lines = [f"## ServerArgs read statically against SGLang's own parser: sglang {args.version}", "",
             f"Command: `python bench/server_args_oracle.py --python PY --version {args.version} --write bench/RESULTS.md` "
             "(PY imports `sglang.srt.server_args` from the cached wheel's tree; its parser is the oracle)", "",
             "| measure | value |", "| --- | --- |",
             f"| flags of the real parser | {got['flags']} |",
             f"| read statically with the same dest and arity | **{got['flags'] - len(set(got['missing'] + got['wrong_dest'] + got['wrong_arity']))}** |",
             f"| missing | {len(got['missing'])}: {shown(got['missing'])} |",
             f"| other dest | {len(got['wrong_dest'])}: {shown(got['wrong_dest'])} |",
             f"| value vs no value wrong | {len(got['wrong_arity'])}: {shown(got['wrong_arity'])} |",
             f"| stores True, read otherwise | {len(got['wrong_true'])}: {shown(got['wrong_true'])} |",
             f"| read statically, not in the parser | {len(got['extra'])}: {shown(got['extra'])} |",
             f"| literal defaults compared with argparse's | {got['defaults_checked']}, {len(got['wrong_default'])} differ: {shown(got['wrong_default'])} |",
             f"| fields left unknown as resolvable (a start-up hook may set them) | {got['resolvable']} |", ""]
    publish(lines, args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
