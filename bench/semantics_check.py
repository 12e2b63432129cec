"""The Dynamo behaviour the stop-39 and stop-40 scan changes rest on, measured on the torch at hand (CPU or GPU).

Each case is a small function compiled with `fullgraph=True` (eager backend) and called once; the record
says whether it compiled and, if not, Dynamo's graph-break type. CUDA cases are skipped without a GPU.

    python bench/semantics_check.py --out FILE.json

The cases: FlashInfer's capability probe through `torch.cuda.get_device_properties` (static: decided by
the deployment's GPU), SGLang's `device_context` (`torch.get_device_module(d).device(i)`), an
`autograd.Function.apply` whose forward calls a subprocess / is plain / branches on the tensor, an
`@overload`-declared function, and `data_ptr()` arithmetic (FlashInfer 0.7.4's alignment checks).
Stop 40: `torch.cuda.is_current_stream_capturing()` (FlashInfer's top-k dispatch), a registry's first-call
`datetime.now()` (jit/core.py:239), a probe in the arguments of a multi-line call (which line Dynamo
stops at), an identity test kept in a local, a set filled at import (empty or not), and a warn-once
closure flag (api_logging.py:2742-2747). `lines`: the lines of this file in the break's user stack.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import warnings
import json
import subprocess
import sys
from contextlib import contextmanager
from typing import overload

import torch


@functools.cache
def _properties(device):
    return torch.cuda.get_device_properties(device)


def capability_branch(x):
    props = _properties(x.device)
    if props.major * 10 + props.minor < 90:
        return x + 1
    return x - 1


@contextmanager
def device_context(device):
    if device.type == "cpu":
        yield
    else:
        module = torch.get_device_module(device)
        with module.device(device.index):
            yield


def in_device_context(x):
    with device_context(x.device):
        y = x * 2
    return y


class _Launch(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        subprocess.run(["true"])
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad


class _Plain(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        return x * scale

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class _Branchy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        if x.sum() > 0:
            return x * 2
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


def apply_launch(x):
    return _Launch.apply(x)


def apply_plain(x):
    return _Plain.apply(x, 3.0)


def apply_branchy(x):
    return _Branchy.apply(x)


@overload
def overloaded(x: torch.Tensor, flag: bool = False) -> torch.Tensor: ...


@overload
def overloaded(x: torch.Tensor, flag: int = 0) -> torch.Tensor: ...


def overloaded(x, flag=False):
    subprocess.run(["true"])
    return x + 1


def data_ptr_mod(x):
    if x.data_ptr() % 16 == 0:
        return x + 1
    return x


def stream_capturing(x):
    if torch.cuda.is_current_stream_capturing():
        return x + 1
    return x * 2


_REGISTRY: dict = {}


def _register(name):
    if name not in _REGISTRY:
        _REGISTRY[name] = datetime.datetime.now()


def registry_first_call(x):
    _REGISTRY.clear()
    _register("spec")
    return x + 1


def _probe(version):
    return subprocess.check_output(["nvcc", "--version"]) >= version


def _make_spec(name, flags):
    return (name, flags, datetime.datetime.now())


def argument_first(x):
    spec = _make_spec(
        "fp4",
        ["-DENABLE_FP4" if _probe("12.8") else ""],
    )
    return x * len(spec)


def identity_local(x):
    fixed = x is None
    if fixed:
        return x - 1
    return x + 1


class _Context:
    def __init__(self, devices):
        self.archs = set()
        for device in range(devices):
            self.archs.add(device)


_FILLED, _EMPTY = _Context(1), _Context(0)


def filled_set(x):
    if not _FILLED.archs:
        subprocess.check_output(["nvcc", "--version"])
    return x + 1


def empty_set(x):
    if not _EMPTY.archs:
        subprocess.check_output(["nvcc", "--version"])
    return x + 1


def _experimental(f):
    warned = False

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        nonlocal warned
        if not warned:
            warned = True
            warnings.warn("experimental", UserWarning, stacklevel=2)
        return f(*args, **kwargs)

    return wrapper


@_experimental
def warn_once(x):
    return x + 1


CASES = {
    "capability_branch": (capability_branch, True),
    "in_device_context": (in_device_context, True),
    "apply_launch": (apply_launch, False),
    "apply_plain": (apply_plain, False),
    "apply_branchy": (apply_branchy, False),
    "overloaded": (overloaded, False),
    "data_ptr_mod": (data_ptr_mod, False),
    "stream_capturing": (stream_capturing, True),
    "registry_first_call": (registry_first_call, False),
    "argument_first": (argument_first, False),
    "identity_local": (identity_local, False),
    "filled_set": (filled_set, False),
    "empty_set": (empty_set, False),
    "warn_once": (warn_once, False),
}


def run(fn, device: str) -> dict:
    torch._dynamo.reset()
    try:
        torch.compile(fn, backend="eager", fullgraph=True)(torch.ones(4, device=device))
    except Exception as exc:  # noqa: BLE001 - Dynamo's refusal is the measurement
        lines = [f.lineno for f in getattr(exc, "real_stack", None) or () if f.filename == __file__]
        return {"compiles": False, "error": type(exc).__name__, "gb_type": getattr(exc, "gb_type", None),
                "message": str(exc).splitlines()[0][:200], "lines": lines}
    return {"compiles": True}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    out = {"torch": torch.__version__, "python": sys.version.split()[0], "device": device,
           "gpu": torch.cuda.get_device_name() if cuda else None,
           "capability": list(torch.cuda.get_device_capability()) if cuda else None, "cases": {}}
    for name, (fn, needs_cuda) in CASES.items():
        out["cases"][name] = run(fn, device) if cuda or not needs_cuda else {"skipped": "needs a GPU"}
    text = json.dumps(out, indent=1)
    with open(args.out, "w", encoding="utf-8") as handle:
        handle.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
