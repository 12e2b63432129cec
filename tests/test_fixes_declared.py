"""Fixes built from a library's own op declarations: read statically, placed on the chain, emitted,
applied, and proven on CPU against a FlashInfer-shaped fixture library (no-op registrars, a
subprocess 'JIT build' behind functools.cache, a module factory with and without arguments)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dynacheck.fixes.declared import read_module, read_signatures
from dynacheck.fixes.emit import category, emission_lines, emit_patch, first_sound_fixes
from dynacheck.fixes.from_declared import MARKER
from dynacheck.static.scan import scan_roots

ROOT = Path(__file__).resolve().parent / "fixtures" / "fixes" / "declfx"


def test_module_level_and_factory_declarations_are_read_with_fakes_and_mutations():
    decls = {d.op: d for d in read_module((ROOT / "minilib" / "norm.py").read_text(), "minilib.norm")}
    scale = decls["minilib::scale"]
    assert (scale.function, scale.fake, scale.mutates, scale.factory) == ("_scale", "_scale_fake", ("out",), "")
    quant = read_module((ROOT / "minilib" / "quant.py").read_text(), "minilib.quant")[0]
    assert quant.factory == "get_quant_module" and quant.exported_as == "quant_impl"
    assert quant.mutates == ()  # `mutates_args=("")` is the empty string: nothing mutated
    assert quant.fake_source.startswith("def _fake_quant_impl(") and "return module.quant" not in quant.fake_source


def test_schema_is_read_from_annotations():
    code = textwrap.dedent('''
        from minilib.utils import register_custom_op
        @register_custom_op("m::gen", mutates_args=())
        def gen(x: torch.Tensor, g: Optional[torch.Generator]) -> torch.Tensor: ...
        @register_custom_op("m::union", mutates_args=())
        def union(x: torch.Tensor, scale: Union[float, torch.Tensor]) -> torch.Tensor: ...
        @register_custom_op("m::ok", mutates_args=())
        def ok(x: torch.Tensor, k: int, eps: float = 1e-6) -> Tuple[torch.Tensor, torch.Tensor]: ...
        @register_custom_op(f"m::{name}", mutates_args=())
        def dynamic(x: torch.Tensor) -> torch.Tensor: ...
    ''')
    decls = {d.op: d for d in read_module(code, "m")}
    assert decls["m::ok"].schema_ok and not decls["m::union"].schema_ok
    assert decls["m::gen"].schema_ok  # a Generator argument: the patch module writes `Generator?` itself
    assert set(decls) == {"m::gen", "m::union", "m::ok"}  # an op name built at run time is not a declaration we can use
    sigs = read_signatures(str(ROOT / "minilib" / "sampling.py"))
    assert sigs["top_k_renorm"] == (False, True) and sigs["get_sampling_module"] == (False, False)


@pytest.fixture(scope="module")
def scanned(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    return scan_roots([ROOT], ["usermodel.model:Model.forward"], cache_dir=cache).findings


def test_each_fatal_site_first_fix_is_built_from_the_declarations(scanned):
    fatal = [f for f in scanned if f.outcome.fatal_under_fullgraph]
    assert len(fatal) == 4
    firsts = {f.fixes[0].at: f.fixes[0] for f in fatal}
    assert set(firsts) == {"minilib.norm._scale", "minilib.sampling.get_sampling_module", "minilib.quant.quant",
                           "minilib.act.get_act_module"}
    assert all(fix.sound and fix.snippet.startswith(MARKER) for fix in firsts.values())
    assert "_register_declared('minilib.norm', '_scale', 'minilib::scale', mutates=('out', ), fake='_scale_fake')" \
        in firsts["minilib.norm._scale"].snippet
    assert "_wrap_public('minilib.quant', 'quant'" in firsts["minilib.quant.quant"].snippet  # annotated public
    assert "keyed=True" in firsts["minilib.act.get_act_module"].snippet  # factory with arguments, unannotated caller


def _run(code: str, tmp_path: Path) -> str:
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(code))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_emitted_patch_makes_the_model_compile_fullgraph_equal_to_eager_and_passes_opcheck(scanned, tmp_path):
    (tmp_path / "dynacheck_fixes.py").write_text(emit_patch(scanned))
    out = _run('''
        import torch
        from usermodel.model import Model

        x, w = torch.randn(4, 8), torch.randn(8)
        probs = torch.softmax(torch.randn(4, 16), -1)
        model = Model()
        try:
            torch.compile(model, fullgraph=True, backend="eager")(x, w, probs)
            print("BEFORE compiled")
        except Exception as exc:
            print("BEFORE failed", type(exc).__name__)
        torch._dynamo.reset()

        import dynacheck_fixes
        print("APPLIED", len(dynacheck_fixes.APPLIED), [a for a in dynacheck_fixes.APPLIED if a.startswith("failed")])
        for backend in ("eager", "inductor"):
            torch._dynamo.reset()
            compiled = torch.compile(model, fullgraph=True, backend=backend)(x, w, probs)
            eager = model(x, w, probs)
            print("EQUAL", backend, all(torch.equal(a, b) for a, b in zip(eager, compiled)))
        import minilib.norm, minilib.sampling, minilib.quant
        checks = [
            (torch.ops.minilib.scale.default, (torch.empty(4, 8), x, w)),
            (torch.ops.minilib.renorm.default, (probs, 2)),
            (torch.ops.dynacheck.quant.default, (x, 0.5)),
            (torch.ops.dynacheck.minilib_act_impl.default, ("get_act_module|'tanh'", torch.empty(4, 8), x)),
        ]
        for op, args in checks:
            result = torch.library.opcheck(op, args)
            print("OPCHECK", op, all(v == "SUCCESS" for v in result.values()))
    ''', tmp_path)
    assert "BEFORE failed" in out
    assert "APPLIED" in out and "[]" in out.split("APPLIED", 1)[1].splitlines()[0]
    assert "EQUAL eager True" in out and "EQUAL inductor True" in out
    assert out.count("OPCHECK") == 4 and "False" not in "".join(l for l in out.splitlines() if l.startswith("OPCHECK"))


def test_fix_emit_prints_exactly_what_the_module_applies(scanned, tmp_path):
    """The CLI's applied / skeleton / manual lists equal the module's own APPLIED record."""
    from dynacheck.model import Finding, Fix, Outcome, Site

    def finding(fix):
        return Finding(rule="DC999", title="t", severity="error", site=Site(file="f.py", line=1, function="m.f",
                       callee="x"), chain=(), outcome=Outcome(kind="graph_break", fatal_under_fullgraph=True),
                       fixes=(fix,))

    extra = [finding(Fix("custom_op", "somelib.kernels.run", "")), finding(Fix("remove", "usermodel.hazards.f", ""))]
    findings = [*scanned, *extra]
    (tmp_path / "dynacheck_fixes.py").write_text(emit_patch(findings))
    out = _run('''
        import dynacheck_fixes
        for line in dynacheck_fixes.APPLIED:
            print("A|" + line)
    ''', tmp_path)
    applied = [l[2:] for l in out.splitlines() if l.startswith("A|")]
    printed = emission_lines(findings, "dynacheck_fixes.py")
    rows = first_sound_fixes(findings)
    assert printed[-1].startswith("wrote dynacheck_fixes.py: 4 applied, 1 skeleton(s), 1 manual")
    for fix, _ in rows:
        kind = category(fix)
        mine = [a for a in applied if fix.at in a or fix.at.rsplit(".", 1)[0] in a and "declared ops" in a]
        if kind == "skeleton":
            assert mine == [f"skeleton, disabled until filled in: {fix.at}"]
        elif kind == "manual":
            assert mine == [f"manual, not applied: {fix.kind} at {fix.at}"]
        else:
            assert mine and not any(a.startswith(("failed", "skipped", "manual", "skeleton")) for a in mine)


def test_a_version_that_registers_the_op_itself_gets_a_fix_that_calls_it(tmp_path):
    root = ROOT.parent / "newfx"
    findings = scan_roots([root], ["newuser.model:Model.forward"], cache_dir=tmp_path / "cache").findings
    fatal = [f for f in findings if f.outcome.fatal_under_fullgraph]
    assert len(fatal) == 1
    first = fatal[0].fixes[0]
    assert first.at == "newlib.quant.quantize" and "torch.ops.newlib.quantize" in first.summary
    (tmp_path / "dynacheck_fixes.py").write_text(emit_patch(findings))
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent('''
        import torch
        import dynacheck_fixes
        from newuser.model import Model
        x = torch.randn(4, 8)
        compiled = torch.compile(Model(), fullgraph=True, backend="eager")(x)
        print("EQUAL", torch.equal(compiled, Model()(x)), dynacheck_fixes.APPLIED)
    '''))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "EQUAL True" in done.stdout and "registered op torch.ops.newlib.quantize" in done.stdout


def test_generator_arguments_and_ops_declared_without_output_get_applied_fixes(tmp_path):
    """An op taking `Optional[torch.Generator]` (FlashInfer's sampling ops) gets the schema `Generator?`;
    an op declared `-> None` that mutates its argument and has no declared fake (FlashInfer's
    append_paged_mla_kv_cache) gets a fake that returns None. Real Dynamo: fullgraph compiles, equals
    eager, and opcheck passes for both."""
    decls = {d.op: d for d in read_module((ROOT / "minilib" / "page.py").read_text(), "minilib.page")}
    assert decls["minilib::append"].fake_source.startswith("def _fake_append(cache: torch.Tensor")
    found = scan_roots([ROOT], ["usermodel.sampler:Sampler.forward"], cache_dir=tmp_path / "cache").findings
    fatal = [f for f in found if f.outcome.fatal_under_fullgraph]
    assert {f.fixes[0].at for f in fatal} == {"minilib.page._append", "minilib.sampling.get_sampling_module"}
    assert all(f.fixes[0].snippet.startswith(MARKER) for f in fatal)
    (tmp_path / "dynacheck_fixes.py").write_text(emit_patch(found))
    out = _run('''
        import torch
        from usermodel.sampler import Sampler

        def inputs():
            return torch.zeros(6, 4), torch.tensor([1, 4]), torch.ones(2, 4), torch.randn(3, 10)
        model = Sampler()
        try:
            torch.compile(model, fullgraph=True, backend="eager")(*inputs())
            print("BEFORE compiled")
        except Exception as exc:
            print("BEFORE failed", type(exc).__name__)
        import dynacheck_fixes
        print("FAILED", [a for a in dynacheck_fixes.APPLIED if not a.startswith(("custom_op", "declared"))])
        for backend in ("eager", "inductor"):
            torch._dynamo.reset()
            cache_e, rows, x, logits = inputs()
            torch.manual_seed(0)
            eager = model(cache_e, rows, x, logits)
            torch.manual_seed(0)
            cache_c = torch.zeros(6, 4)
            compiled = torch.compile(model, fullgraph=True, backend=backend)(cache_c, rows, x, logits)
            print("EQUAL", backend, torch.equal(eager, compiled) and torch.equal(cache_e, cache_c))
        import minilib.sampling
        probs = torch.softmax(torch.randn(3, 10), -1)
        for op, args in ((torch.ops.minilib.sample.default, (probs, None)),
                         (torch.ops.minilib.append.default, (torch.zeros(6, 4), torch.tensor([1, 4]), torch.ones(2, 4)))):
            result = torch.library.opcheck(op, args, test_utils=("test_schema", "test_faketensor"))
            print("OPCHECK", op, all(v == "SUCCESS" for v in result.values()))
        print("SCHEMA", torch.ops.minilib.sample.default._schema)
    ''', tmp_path)
    assert "BEFORE failed" in out
    assert "FAILED []" in out, out
    assert "EQUAL eager True" in out and "EQUAL inductor True" in out, out
    assert out.count("OPCHECK") == 2 and "False" not in "".join(l for l in out.splitlines() if l.startswith("OPCHECK"))
    assert "Generator? generator" in out


def test_def_lines_from_ast_are_libcsts_positions():
    """`read_module` takes each def's line from `ast` (libcst's PositionProvider costs twice the parse)."""
    import libcst as cst

    from dynacheck.fixes.declared import _def_lines

    text = (
        "import torch\n\n"
        "@register_custom_op('lib::a', mutates_args=())\n"
        "@other\n"
        "def a(x):\n"
        "    def inner(y):\n"
        "        return y\n"
        "    @register_fake_op('lib::a')\n"
        "    async def _fake(x):\n"
        "        return x\n"
        "    return inner\n\n"
        "class C:\n"
        "    def m(self):\n"
        "        pass\n\n"
        "def b(): return 1\n"
    )
    module = cst.parse_module(text)
    positions = cst.MetadataWrapper(module, unsafe_skip_copy=True).resolve(cst.metadata.PositionProvider)
    expected = {id(n): p.start.line for n, p in positions.items() if isinstance(n, cst.FunctionDef)}
    got = _def_lines(module, text)
    assert got and all(expected[k] == line for k, line in got.items())
    assert sorted(got.values()) == [5, 6, 9, 17]  # module-level defs and the defs one level in


def test_declared_fix_reads_only_from_the_caller_of_the_first_declaring_hop(tmp_path):
    """A census memoizes declared_fix by `declared_reads`: chains equal from the caller of the first hop
    whose file declares ops (and in the entry's package) must get equal fixes, and a chain that differs
    there must not share the key."""
    from dataclasses import replace as swap

    from dynacheck.catalog import load_catalog
    from dynacheck.fixes.from_declared import declared_fix, declared_reads
    from dynacheck.sources.resolve import resolve_target
    from dynacheck.static.scan import ScanSession

    findings = scan_roots([ROOT], ["usermodel.model:Model.forward"], cache_dir=tmp_path).findings
    session = ScanSession.open([resolve_target(str(ROOT), cache_dir=tmp_path)], tmp_path)
    locate = session.finding_builder(load_catalog())._locate
    chains = [f.chain for f in findings if f.outcome.fatal_under_fullgraph and len(f.chain) >= 3]
    assert chains
    for chain in chains:
        # the compiled entry one call above the model: the first declaring hop is then at 2 or deeper
        deeper = (swap(chain[0], function="usermodel.model.Outer.forward", code="y = self.model(x)"), *chain)
        reads = declared_reads(deeper, locate)
        assert reads is not None and reads[1] == 2
        # another way into the same caller: the hop above it is another model's own layer
        other = (swap(deeper[0], function="usermodel.model.Other.forward", code="z = self.inner(x)"), *chain)
        assert declared_reads(other, locate) == reads
        assert declared_fix(other, locate) == declared_fix(deeper, locate)
        assert declared_fix(deeper, locate)[0] is not None
        # the caller's own call line is read (`factory(...).attr`): a change there is another key
        moved = (deeper[0], swap(deeper[1], code="x = other()"), *deeper[2:])  # deeper[2]: the first declaring hop
        assert declared_reads(moved, locate) != reads
