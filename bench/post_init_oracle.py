"""The static reading of ServerArgs' derived piecewise rules against SGLang's own code, launch by launch.

dynacheck never imports scanned code; this benchmark does, as the oracle. In a separate interpreter it
imports `sglang.srt.server_args` from the cached wheel's tree, builds a `ServerArgs` without running
`__post_init__` (every field at its default, then the launch's flags), stubs what a CPU machine cannot
answer (the GPU helpers `is_sm100_supported()` and its kin, `get_device()`, the model config: a config whose
`architectures` is the model class and which carries a `quantization_config` exactly when the deployment names
a quantization; its model-list flags, which `piecewise_turned_off` reads, are off), and runs the `__post_init__`
steps deploy/post_init.py interprets for every rule, in order: `disable_piecewise_cuda_graph` at the end is the
truth. Each launch is compared with
`deploy.piecewise_off.derived_turns_off` on the same tree (which never imports it).

    python bench/post_init_oracle.py --python PY [--version 0.5.10] [--deployments FILE] [--write bench/RESULTS.md]

PY needs what importing `sglang.srt.server_args` and `sglang.srt.configs.model_config` need (for 0.5.10:
msgspec, psutil, pybase64, pillow, starlette, pyzmq, tqdm, aiohttp, orjson, requests, safetensors, triton,
torchvision, openai, partial_json_parser, huggingface_hub, transformers, dill, sentencepiece,
compressed_tensors, gguf: a venv with --system-site-packages, `pip install` of each). The oracle imports the
whole cached wheel (unpacked into a temporary folder: the JIT kernel sources are read at import).
A launch whose steps raise in the oracle (a branch reading a config field the stub lacks) is counted apart.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import replace
from pathlib import Path

from scan_bench import publish

from dynacheck.census.matrix import default_deployments, load_deployments
from dynacheck.census.models import registered_models
from dynacheck.census.run import _launches
from dynacheck.deploy import piecewise_off, post_init_plan
from dynacheck.sources.cache import default_cache_dir, wheels_dir
from dynacheck.sources.resolve import resolve_target

_ORACLE = r"""
import dataclasses, json, sys, types
import sglang.srt.server_args as sa
from sglang.srt.server_args import ServerArgs
cases = json.loads(sys.stdin.read())
helpers = {"is_sm100_supported": [10], "is_sm90_supported": [9], "is_sm120_supported": [12],
           "is_blackwell_supported": [10, 11, 12], "is_blackwell": [10, 11, 12], "is_hopper_with_cuda_12_3": [9]}
out = []
for case in cases:
    major = case["gpu_major"]
    for name, majors in helpers.items():
        if hasattr(sa, name):
            setattr(sa, name, (lambda m: (lambda: major in m))(majors))
    sa.get_device = lambda *a, **k: "cuda"
    sa.is_hip = lambda: False
    args = ServerArgs.__new__(ServerArgs)
    for f in dataclasses.fields(ServerArgs):
        if f.default is not dataclasses.MISSING:
            setattr(args, f.name, f.default)
        elif f.default_factory is not dataclasses.MISSING:
            setattr(args, f.name, f.default_factory())
        else:
            setattr(args, f.name, None)
    for name, value in case["args"].items():
        setattr(args, name, value)
    args.model_path = "/models/checkpoint"
    hf = types.SimpleNamespace(architectures=[case["architecture"]])
    if case["quantization"]:
        hf.quantization_config = {"quant_method": case["quantization"]}
    # the model-list rules are piecewise_turned_off's (read and tested on their own): off here
    config = types.SimpleNamespace(hf_config=hf, hf_text_config=hf, quantization=case["quantization"] or None,
                                   is_piecewise_cuda_graph_disabled_model=False, is_multimodal=False,
                                   attention_arch=None)  # not MLA: dynacheck leaves use_mla_backend() unknown
    args.get_model_config = lambda: config
    try:
        for step in case["steps"]:
            getattr(args, step)()
        out.append({"off": bool(args.disable_piecewise_cuda_graph), "moe_runner_backend": args.moe_runner_backend})
    except Exception as exc:
        import traceback; out.append({"error": f"{type(exc).__name__}: {exc}"[:200], "where": traceback.format_exc()[-1500:] if case.get("trace") else ""})
print(json.dumps(out))
"""

COMMAND = "python bench/post_init_oracle.py --python PY --version {version}{deployments} --write bench/RESULTS.md"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--python", required=True, help="an interpreter that can import sglang.srt.server_args")
    parser.add_argument("--version", default="0.5.10")
    parser.add_argument("--deployments", type=Path, default=None)
    parser.add_argument("--write", type=Path)
    args = parser.parse_args()
    root = Path(resolve_target(f"sglang=={args.version}", offline=True).root)
    deployments = load_deployments(args.deployments) if args.deployments else default_deployments()
    server = root / piecewise_off.SERVER_ARGS
    klass, _, rules = piecewise_off._derived_rules(str(server), piecewise_off._stamp(server))
    if not rules:
        raise SystemExit(f"sglang {args.version} has no piecewise rule on a derived setting: nothing to compare")
    launches = _launches([root], deployments, None)
    order = post_init_plan.post_init_order(klass)  # every rule's steps, run once, in __post_init__'s order
    wanted = {name for rule in rules for name in (*rule.steps.before, rule.steps.method)}
    steps = [name for name in order if name in wanted]
    models = sorted({m.name for m in registered_models(root) if m.name})
    cases, ours = [], []
    for deployment in deployments:
        launch = launches.get(deployment.name)
        if launch is None:
            continue
        for model in models:
            mine = piecewise_off.derived_turns_off([root], replace(launch, architecture=model))
            cases.append({"architecture": model, "gpu_major": launch.gpu_major, "steps": steps,
                          "quantization": deployment.quantization,
                          "args": {k: v for k, v in launch.args.items() if _plain(v)}})
            ours.append((deployment.name, model, bool(mine)))
    wheel = next(wheels_dir(default_cache_dir()).glob(f"sglang-{args.version}-*.whl"), None)
    if wheel is None:
        raise SystemExit(f"no cached sglang {args.version} wheel: pip download --no-deps sglang=={args.version} -d "
                         f"{wheels_dir(default_cache_dir())}")
    with tempfile.TemporaryDirectory(prefix="dynacheck-oracle-") as full:  # the whole wheel: the oracle imports it
        zipfile.ZipFile(wheel).extractall(full)
        done = subprocess.run([args.python, "-c", _ORACLE], input=json.dumps(cases), capture_output=True, text=True,
                              env={"PYTHONPATH": full, "PATH": "/usr/bin:/bin"})
    if done.returncode != 0:
        raise SystemExit(f"{args.python} could not run SGLang's ServerArgs from {root}:\n"
                         + "\n".join(done.stderr.strip().splitlines()[-5:]))
    truth = json.loads(done.stdout.strip().splitlines()[-1])
    table = {"both off": 0, "both on": 0, "dynacheck off, SGLang on (wrong)": 0,
             "SGLang off, dynacheck says nothing (missed)": 0, "SGLang raised (not compared)": 0}
    wrong = []
    for (deployment, model, mine), real in zip(ours, truth):
        if "error" in real:
            table["SGLang raised (not compared)"] += 1
        elif mine and real["off"]:
            table["both off"] += 1
        elif not mine and not real["off"]:
            table["both on"] += 1
        elif mine:
            table["dynacheck off, SGLang on (wrong)"] += 1
            wrong.append(f"{model} {deployment}: dynacheck off, SGLang on ({real['moe_runner_backend']})")
        else:
            table["SGLang off, dynacheck says nothing (missed)"] += 1
            wrong.append(f"{model} {deployment}: SGLang off ({real['moe_runner_backend']}), dynacheck says nothing")
    lines = [f"## ServerArgs' derived piecewise rules against SGLang's own code: sglang {args.version}", "",
             f"Command: `{COMMAND.format(version=args.version, deployments=f' --deployments {args.deployments}' if args.deployments else '')}` "
             f"(PY imports `sglang.srt.server_args` from the cached wheel's tree and runs "
             f"{', '.join(f'`{s}`' for s in steps)} on a stubbed launch, the model lists' rules off; "
             f"{len(models)} registered model classes x {len(launches)} deployments)", "",
             "| launches | count |", "| --- | ---: |"]
    lines += [f"| {k} | {v} |" for k, v in table.items()]
    raised = sorted({r["error"] for r in truth if "error" in r})
    raised_by = sorted({model for (_, model, _), r in zip(ours, truth) if "error" in r})
    if raised_by:
        raised.append(f"on {len(raised_by)} model classes: {', '.join(raised_by)}")
    lines += [""] + [f"- {w}" for w in wrong[:20]] + [f"- SGLang raised: {e}" for e in raised[:5]]
    publish(lines, args.write)
    return 0


def _plain(value) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


if __name__ == "__main__":
    sys.exit(main())
