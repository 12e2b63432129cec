"""The emitted patch module: generated source, the known fp4_quantize fake, skeletons, rebinding."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from dynacheck.capture.flagship import flagship_findings
from dynacheck.fixes.emit import chosen_fixes, emit_patch, first_sound_fixes
from dynacheck.fixes.known_fakes import fp4_scale_shape
from dynacheck.model import Finding, Fix, Outcome, ScanResult, Site

ROOT = Path(__file__).resolve().parents[1]
STUB = ROOT / "tests" / "fixtures" / "capture" / "stub_flashinfer"


def _finding(*fixes: Fix) -> Finding:
    return Finding(rule="DC999", title="t", severity="error",
                   site=Site(file="f.py", line=1, function="m.f", callee="x"),
                   chain=(), outcome=Outcome(kind="graph_break", gb_id="GB0007"), fixes=fixes)


def test_flagship_emits_one_custom_op_and_skips_unsound_fixes():
    pairs = chosen_fixes(flagship_findings())
    assert [(f.kind, f.at) for f, _ in pairs] == [("custom_op", "flashinfer.fp4_quantization.fp4_quantize")]
    src = emit_patch(flagship_findings())
    compile(src, "dynacheck_fixes.py", "exec")
    assert 'torch.library.custom_op(\'dynacheck::fp4_quantize\'' in src
    assert "register_fake" in src and "prewarm" not in src.split('"""', 2)[2]
    assert emit_patch(flagship_findings()) == src  # deterministic


def test_alias_and_canonical_name_give_one_fix():
    f1 = _finding(Fix(kind="custom_op", at="flashinfer.fp4_quantize", summary=""))
    f2 = _finding(Fix(kind="custom_op", at="flashinfer.fp4_quantization.fp4_quantize", summary=""))
    assert len(chosen_fixes([f1, f2])) == 1


@pytest.mark.parametrize("m,k,swizzled,expected", [
    (1, 6144, True, (128 * 384 // 384, 384)),
    (130, 2048, True, (256, 128)),
    (3, 576, True, (128, 36)),
    (3, 2048, False, (3, 128)),
])
def test_scale_shape_formula(m, k, swizzled, expected):
    assert fp4_scale_shape(m, k, swizzled=swizzled) == expected


def test_scale_shape_8x4_layout_pads_rows_to_8():
    assert fp4_scale_shape(3, 2048, layout_8x4=True) == (8, 128)


def test_unknown_function_gets_a_disabled_skeleton_with_instructions():
    src = emit_patch([_finding(Fix(kind="custom_op", at="somelib.kernels.run", summary=""))])
    assert "SKELETON" in src and "ENABLE_FIX_1 = False" in src and "NotImplementedError" in src
    ns: dict = {"__name__": "patch"}
    exec(compile(src, "p.py", "exec"), ns)
    assert ns["APPLIED"] == ["skeleton, disabled until filled in: somelib.kernels.run"]


def test_assume_constant_result_and_hoist_wrappers_apply(monkeypatch):
    lib = types.ModuleType("dc_lib")
    calls = []

    def probe():
        calls.append(1)
        return 13

    def version():
        calls.append(2)
        return 12

    lib.probe, lib.version = probe, version
    user = types.ModuleType("dc_user")
    user.version = version  # `from dc_lib import version` elsewhere
    monkeypatch.setitem(sys.modules, "dc_lib", lib)
    monkeypatch.setitem(sys.modules, "dc_user", user)
    src = emit_patch([
        _finding(Fix(kind="assume_constant_result", at="dc_lib.probe", summary="")),
        _finding(Fix(kind="hoist", at="dc_lib.version", summary="")),
    ])
    ns: dict = {"__name__": "patch"}
    exec(compile(src, "p.py", "exec"), ns)
    assert getattr(lib.probe, "_dynamo_marked_constant", False) is True
    assert lib.version is user.version and lib.version() == 12 and lib.version.__wrapped__ is version
    assert calls == [2]  # hoisted: computed once at import, not again when read
    assert "hoist: dc_user.version" in ns["APPLIED"] and "hoist: dc_lib.version" in ns["APPLIED"]


def test_missing_library_is_reported_not_raised():
    src = emit_patch(flagship_findings())
    code = "import sys; sys.modules['flashinfer'] = None\n" + src + "\nprint(APPLIED)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "skipped (not importable" in out.stdout


def _run_with_stub(script: str) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": f"{ROOT}:{STUB}", "PATH": "/usr/bin:/bin", "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                          timeout=300, env=env)


@pytest.mark.slow
def test_patch_turns_the_gb0007_break_into_a_custom_op_and_rebinds_every_holder(tmp_path):
    """Stand-in flashinfer with the real call structure: before the patch fullgraph fails with GB0007 in
    get_cuda_version; after it, the call compiles to one dynacheck::fp4_quantize node with eager's outputs."""
    patch = tmp_path / "dynacheck_fixes.py"
    patch.write_text(emit_patch(flagship_findings()))
    res = _run_with_stub(f"""
        import json, torch, flashinfer, flashinfer.fp4_quantization as fq
        from flashinfer import fp4_quantize as held_by_user   # a holder made before the patch
        from dynacheck.capture.breaks import break_event
        gs = torch.tensor([448.0 * 6 / 4])
        def f(x):
            return flashinfer.fp4_quantize(x, gs)
        x = torch.randn(3, 64) * 2
        out = {{}}
        try:
            torch.compile(f, backend="eager", fullgraph=True)(x)
            out["before"] = "compiled"
        except Exception as e:
            ev = break_event(e)
            out["before"] = [ev.gb_id, ev.site.function]
        torch._dynamo.reset()
        import importlib.util
        spec = importlib.util.spec_from_file_location("dynacheck_fixes", {str(patch)!r})
        mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
        out["applied"] = mod.APPLIED
        out["user_rebound"] = held_by_user is not fq.fp4_quantize.__wrapped__
        graphs = []
        def grab(gm, ex):
            graphs.append(gm); return gm
        q, sf = torch.compile(f, backend=grab, fullgraph=True)(x)
        qe, sfe = fq.fp4_quantize.__wrapped__(x, gs)
        out["equal"] = torch.equal(q, qe) and torch.equal(sf, sfe)
        nodes = [n for n in graphs[0].graph.nodes if n.op == "call_function"]
        out["ops"] = [str(n.target) for n in nodes if "fp4" in str(n.target)]
        xt = torch.randn(64, 32).T   # column-major input: eager transposes; the fake must too
        op = torch.ops.dynacheck.fp4_quantize.default
        with torch._subclasses.fake_tensor.FakeTensorMode() as mode:
            fake = op(mode.from_tensor(xt), mode.from_tensor(gs), 16, False, True, False, None)
        real = fq.fp4_quantize.__wrapped__(xt, gs)
        layout = lambda ts: [[list(a.shape), list(a.stride())] for a in ts]
        out["colmajor"] = layout(fake) == layout(real)
        print(json.dumps(out))
    """)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["before"] == ["GB0007", "flashinfer.jit.cpp_ext.get_cuda_version"]
    assert "custom_op dynacheck::fp4_quantize: flashinfer.fp4_quantize" in out["applied"]
    assert "custom_op dynacheck::fp4_quantize: flashinfer.fp4_quantization.fp4_quantize" in out["applied"]
    assert out["user_rebound"] is True  # `from flashinfer import fp4_quantize` made before the patch
    assert "custom_op dynacheck::fp4_quantize: __main__.held_by_user" in out["applied"]
    assert out["equal"] is True
    assert out["ops"] == ["dynacheck.fp4_quantize.default"]
    assert out["colmajor"] is True


def test_fix_command_writes_the_module(tmp_path):
    from dynacheck.cli import main

    target = tmp_path / "fx" / "dynacheck_fixes.py"
    with pytest.raises(SystemExit) as exc:
        main(["fix", "--emit", str(target)])
    assert exc.value.code == 0
    assert target.read_text() == emit_patch(flagship_findings())


def test_fix_command_reads_a_scan_file(tmp_path):
    from dynacheck.cli import main

    real = flagship_findings()[0]  # a schema-valid finding (scan files are schema-checked)
    scan = ScanResult(targets=(), entries=(), findings=(
        dataclasses.replace(real, fixes=(Fix(kind="hoist", at="dc_lib.version", summary=""),)),))
    path = tmp_path / "scan.json"
    path.write_text(json.dumps(scan.to_dict()))
    target = tmp_path / "p.py"
    with pytest.raises(SystemExit) as exc:
        main(["fix", "--emit", str(target), "--scan", str(path)])
    assert exc.value.code == 0
    assert "Fix 1: hoist at dc_lib.version" in target.read_text()


def test_fix_command_rejects_a_file_that_is_not_a_scan(tmp_path):
    from dynacheck.cli import main

    path = tmp_path / "scan.json"
    path.write_text("[1, 2]")
    with pytest.raises(SystemExit) as exc:
        main(["fix", "--emit", str(tmp_path / "p.py"), "--scan", str(path)])
    assert exc.value.code == 2


def test_only_the_first_sound_fix_is_applied_and_manual_ones_are_listed():
    finding = _finding(Fix(kind="remove", at="dc_lib.log", summary="Delete the logging call."),
                       Fix(kind="hoist", at="dc_lib.log", summary=""))
    assert chosen_fixes([finding]) == []
    src = emit_patch([finding])
    assert "To do by hand" in src and "remove at dc_lib.log: Delete the logging call." in src
    assert "_fix_1" not in src


def test_patch_never_breaks_start_up(monkeypatch):
    """Arguments, class methods, nested functions and raising probes are reported, not raised."""
    lib = types.ModuleType("dc_lib2")

    class Spec:
        def build(self):
            return 1

    def needs_arg(path):
        return path

    def broken():
        raise RuntimeError("no sm100 here")

    lib.Spec, lib.needs_arg, lib.broken = Spec, needs_arg, broken
    monkeypatch.setitem(sys.modules, "dc_lib2", lib)
    fixes = [Fix(kind="hoist", at=a, summary="") for a in (
        "dc_lib2.needs_arg", "dc_lib2.Spec.build", "dc_lib2.broken", "dc_lib2.make.<locals>.inner", "nolib.x.y")]
    fixes.append(Fix(kind="assume_constant_result", at="dc_lib2.Spec.build", summary=""))
    ns: dict = {"__name__": "patch"}
    exec(compile(emit_patch([_finding(f) for f in fixes]), "p.py", "exec"), ns)
    applied = ns["APPLIED"]
    assert "manual (takes arguments: compute it at model load yourself): hoist dc_lib2.needs_arg" in applied
    assert "manual (takes arguments: compute it at model load yourself): hoist dc_lib2.Spec.build" in applied
    assert "failed (RuntimeError: no sm100 here): hoist at dc_lib2.broken" in applied
    assert any(a.startswith("manual (a nested function") for a in applied)
    assert "skipped (not importable here): nolib.x.y" in applied
    assert "assume_constant_result: dc_lib2.Spec.build" in applied
    assert getattr(Spec.build, "_dynamo_marked_constant", False) is True
    assert lib.needs_arg is needs_arg  # untouched


def test_factory_fixes_for_one_factory_merge_the_ops_each_chain_takes():
    from dynacheck.fixes.from_declared import MARKER, seal

    def factory_fix(entry: str) -> Fix:
        code = (f"{MARKER}\n_register_factory('lib.m', 'get_module', [\n{entry},\n])\n")
        return Fix(kind="custom_op", at="lib.m.get_module", summary="", snippet=seal(code))

    a = "    ('softmax', 'lib::softmax', (), 'def softmax(x: torch.Tensor) -> torch.Tensor: ...', 'def f(x): ...')"
    b = "    ('renorm', 'lib::renorm', (), 'def renorm(x: torch.Tensor) -> torch.Tensor: ...', 'def g(x): ...')"
    pairs = first_sound_fixes([_finding(factory_fix(a)), _finding(factory_fix(b)), _finding(factory_fix(a))])
    assert len(pairs) == 1
    merged = pairs[0][0].snippet
    assert merged.count("'lib::softmax'") == 1 and merged.count("'lib::renorm'") == 1
    compile(merged, "snippet", "exec")


def test_declared_code_from_an_edited_scan_file_is_never_pasted(tmp_path):
    """The declared-op code rides in the scan JSON; only code this machine's dynacheck sealed is emitted."""
    from dynacheck.fixes.from_declared import MARKER, seal

    code = f"{MARKER}\nimport os\nos.system('touch {tmp_path}/pwned')\n"
    forged = Fix(kind="custom_op", at="lib.m.op", summary="", snippet=code + "# dynacheck seal: " + "00" * 32 + "\n")
    module = emit_patch([_finding(forged)])
    assert "os.system" not in module
    genuine = emit_patch([_finding(Fix(kind="custom_op", at="lib.m.op", summary="", snippet=seal(code)))])
    assert "os.system" in genuine  # the same code, sealed here, is the fix the scan placed
