"""Partial evaluation over deployment facts, on a small tree written the way SGLang and FlashInfer
write their platform probes, factories and JIT builds (no wheels needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dynacheck.deploy.build import DeploymentSpec
from dynacheck.errors import UserError
from dynacheck.static.scan import scan_roots

ROOT = Path(__file__).parent / "fixtures" / "deploy"
ENTRY = "depfx.model:Model.forward"
FACTS = ROOT / "depfx.toml"


def _scan(scan_cache, **deployment):
    spec = DeploymentSpec(framework=FACTS, **deployment) if deployment else None
    return scan_roots([ROOT], [ENTRY], cache_dir=scan_cache, deployment=spec)


def _sites(result, unconditional=True):
    return {(f.site.function.rpartition(".")[2], f.site.callee) for f in result.findings
            if not unconditional or not f.conditions}


def test_gpu_decides_the_import_time_binding(scan_cache):
    sm120 = _sites(_scan(scan_cache, gpu="sm120", platform="cuda"))
    sm90 = _sites(_scan(scan_cache, gpu="sm90", platform="cuda"))
    assert ("sm120_quantize", "subprocess.check_output") in sm120
    assert ("sm120_quantize", "subprocess.check_output") not in sm90


def test_server_args_and_enum_backends_are_evaluated(scan_cache):
    default = _scan(scan_cache, gpu="sm120")
    assert ("forward", "subprocess.check_output") not in _sites(default, unconditional=False)  # Backend.NONE
    assert ("forward", "builtins.print") not in _sites(default)
    fast = _scan(scan_cache, gpu="sm120", server_args="--enable-fast-path")
    assert ("forward", "builtins.print") in _sites(fast)
    assert fast.deployment["server_args"] == "--enable-fast-path"


def test_env_is_unset_unless_given(scan_cache):
    debug_line = lambda r: [f for f in r.findings if f.site.code.startswith('print("debug")')]  # noqa: E731
    assert not debug_line(_scan(scan_cache, gpu="sm120"))
    assert debug_line(_scan(scan_cache, gpu="sm120", env={"DEPFX_DEBUG": "1"}))


def test_first_call_work_and_constant_arguments(scan_cache):
    result = _scan(scan_cache, gpu="sm120")
    clock = [f for f in result.findings if f.site.callee == "time.time"]
    assert clock and all(c.kind == "first_call" for f in clock for c in f.conditions) and clock[0].conditions
    # build(need_lock=False): the lock in `open(...) if need_lock else None` is never taken
    assert not [f for f in result.findings if f.site.callee == "builtins.open"]
    # the property is evaluated (not a truthy method object): the ninja run after `if self.is_prebuilt: return`
    assert [f for f in result.findings if f.site.callee == "subprocess.run" and not f.conditions]


def test_without_a_deployment_nothing_is_pruned(scan_cache):
    result = _scan(scan_cache)
    assert result.deployment == {}
    callees = {f.site.callee for f in result.findings}
    assert {"subprocess.check_output", "builtins.print", "time.time"} <= callees
    flagged = [f for f in result.findings if f.site.function.endswith("forward") and f.conditions]
    assert all(c.kind in ("env", "flag", "platform", "runtime", "first_call", "except") for f in flagged
               for c in f.conditions)


def test_unknown_server_flag_is_one_sentence(scan_cache):
    with pytest.raises(UserError, match="no flag --enable-fast-pth"):
        _scan(scan_cache, gpu="sm120", server_args="--enable-fast-pth")


def test_first_break_follows_trace_order(scan_cache):
    """`y = quantize(x)` is the forward's first statement: on sm120 its nvcc probe is where Dynamo stops."""
    first = _scan(scan_cache, gpu="sm120").first_break
    assert (first["function"], first["callee"]) == ("depfx.kernels.sm120_quantize", "subprocess.check_output")
    later = _scan(scan_cache, gpu="sm90").first_break  # generic_quantize is clean: the ninja run comes next
    assert later["callee"] == "subprocess.run"


def test_a_deprecated_flag_without_a_value_is_accepted(scan_cache):
    """SGLang 0.5.10 keeps `--enable-piecewise-cuda-graph` as a `nargs=0` deprecation action."""
    result = _scan(scan_cache, gpu="sm120", server_args="--old-fast-path --tp-size 2")
    assert result.deployment["server_args"] == "--old-fast-path --tp-size 2"


def test_a_failed_command_branch_is_an_error_path(scan_cache):
    result = _scan(scan_cache, gpu="sm120")
    (made,) = [f for f in result.findings if f.site.callee == "os.makedirs"]
    assert [c.kind for c in made.conditions] == ["except"] and "command failed" in made.conditions[0].text


def test_an_early_return_on_a_set_env_var_prunes_the_probe_below(scan_cache):
    """A guard sees the local's assignments above it, not the rebinding below (get_cuda_path)."""
    probe = lambda r: [f for f in r.findings if f.site.function.endswith("tool_home")]  # noqa: E731
    unset = probe(_scan(scan_cache, gpu="sm120"))
    assert unset and not unset[0].conditions and unset[0].site.callee == "subprocess.run"
    assert not probe(_scan(scan_cache, gpu="sm120", env={"DEPFX_HOME": "/opt/tool"}))
    assert not probe(_scan(scan_cache, gpu="sm120", env={"DEPFX_PATH": "/opt/tool"}))


def test_the_traced_batch_decides_mode_and_length_branches(scan_cache):
    """The runner traces an EXTEND batch of at most max_tokens: the ragged path past the short-batch
    return is taken only when a longer batch can be traced, and then as a runtime condition."""
    ragged = lambda r: [f for f in r.findings if f.site.callee == "subprocess.run"  # noqa: E731
                        and f.site.function.endswith("attend")]
    decode = lambda r: [f for f in r.findings if f.site.function.endswith("decode_only")]  # noqa: E731
    short = _scan(scan_cache, gpu="sm120")
    assert not ragged(short) and not decode(short)
    long = _scan(scan_cache, gpu="sm120", server_args="--max-tokens 8192")
    (site,) = ragged(long)
    assert [c.kind for c in site.conditions] == ["runtime"] and "8192" in site.conditions[0].text
    assert decode(_scan(scan_cache))  # no deployment: the batch is unknown, nothing pruned


def test_a_dict_cache_decorator_runs_the_body_on_the_first_call_only(scan_cache):
    """Dynamo traces the wrapper and reads its dict: warm, the body is not called (unlike functools.cache)."""
    (jit,) = [f for f in _scan(scan_cache, gpu="sm120").findings if f.site.function.endswith("jit_module")]
    assert [c.kind for c in jit.conditions] == ["first_call"]
    assert [h.function.rpartition(".")[2] for h in jit.chain][-2:] == ["wrapper", "jit_module"]


def test_condition_texts_say_what_they_wait_for():
    from dynacheck.static.partial import render_test

    assert render_test(("exc", 12)) == "an exception was raised (except path)"
    assert render_test(("cmp", ("op", ("n", "a"), ("n", "b"), "Multiply"), (("GreaterThanEqual", ("n", "k")),))) \
        == "a * b >= k"


def test_a_method_reads_the_constructor_arguments_of_its_own_allocation(scan_cache):
    """`self` in TopK.forward is the TopK the block built: its keyword (or the default it left) decides
    the branch in the helper it calls, so only the grouped block reaches the JIT build; a call with
    `**kwargs` may pass anything, so no default is assumed for it."""
    spec = DeploymentSpec(framework=FACTS, gpu="sm120")

    def builds(entry):
        found = scan_roots([ROOT], [entry], cache_dir=scan_cache, deployment=spec).findings
        return [f for f in found if f.site.callee == "subprocess.check_output" and f.site.function.endswith(
            "select_experts")]

    grouped = builds("depfx.routing:GroupedMoE.forward")
    assert grouped and not grouped[0].conditions
    assert not builds("depfx.routing:PlainMoE.forward")
    assert builds("depfx.routing:StarMoE.forward")


def test_a_gpu_below_the_quantization_minimum_is_refused_with_the_reason(scan_cache):
    """The loader raises below the config's `get_min_capability()`: the scan says so instead of
    describing a compile that never happens."""
    def refused(gpu, quantization):
        result = _scan(scan_cache, gpu=gpu, platform="cuda", server_args=f"--quantization {quantization}")
        return result.deployment.get("refused", ""), [p.message for p in result.problems if p.kind == "refused"]

    why, problems = refused("sm90", "fp4")
    assert "needs compute capability 100" in why and "Fp4Config.get_min_capability" in why and problems
    assert refused("sm100", "fp4") == ("", [])
    assert refused("sm90", "fp8") == ("", [])


def test_scans_sharing_a_session_do_not_share_one_allocation_s_answers(scan_cache):
    """A census walks many forwards on one evaluator: the TopK the first model built (grouped) must not
    answer for the TopK of the next one (the memo keys name the allocation, not only the class)."""
    from dynacheck.sources.resolve import resolve_target
    from dynacheck.static.scan import ScanSession, scan_targets

    targets = [resolve_target(str(ROOT), cache_dir=scan_cache)]
    session = ScanSession.open(targets, scan_cache)
    spec = DeploymentSpec(framework=FACTS, gpu="sm120")

    def builds(entry):
        found = scan_targets(targets, [entry], cache_dir=scan_cache, deployment=spec, session=session).findings
        return [f for f in found if f.site.callee == "subprocess.check_output"
                and f.site.function.endswith("select_experts")]

    assert builds("depfx.routing:GroupedMoE.forward")
    assert not builds("depfx.routing:PlainMoE.forward")


def test_a_method_s_answer_is_its_receiver_s_own_in_a_shared_evaluator(scan_cache):
    """`self.comm.should_use_reduce_scatter(batch)` reads `self.allow_reduce_scatter`: the memo of that
    call named the method and its arguments but not the receiver, so after a layer whose communicator
    allows reduce-scatter, a layer whose communicator does not got its answer (found in the census:
    Bailing V2.5 after BailingMoE, `layers/communicator.py:568-570`)."""
    from dynacheck.sources.resolve import resolve_target
    from dynacheck.static.scan import ScanSession, scan_targets

    root = Path(__file__).parent / "fixtures" / "attr"
    targets = [resolve_target(str(root), cache_dir=scan_cache)]
    session = ScanSession.open(targets, scan_cache)
    spec = DeploymentSpec(framework=Path(__file__).parent / "fixtures" / "fork" / "gpufx.toml", gpu="sm90",
                          platform="cuda")

    def runs(entry):
        found = scan_targets(targets, [entry], cache_dir=scan_cache, deployment=spec, session=session).findings
        return [f for f in found if f.site.callee == "subprocess.run" and not f.conditions]

    assert runs("attrfx.communicator:ScatterLayer.forward")
    assert not runs("attrfx.communicator:PlainLayer.forward")


def test_a_flag_attribute_is_not_its_literal_type(scan_cache):
    """`self.use_fast = False` typed `bool` must not read as a truthy object: the code after
    `if self.use_fast: return` is reached (it was pruned, hiding the subprocess call)."""
    spec = DeploymentSpec(framework=FACTS, gpu="sm120", platform="cuda")
    found = scan_roots([ROOT], ["depfx.routing:Flagged.forward"], cache_dir=scan_cache, deployment=spec).findings
    assert [f for f in found if f.site.callee == "subprocess.check_output" and f.site.function.endswith("Flagged.forward")]


def test_a_result_is_memoized_unless_a_cut_off_reached_an_evaluation_above_it():
    """The memo rule of the partial evaluator: a cut-off back into the evaluation itself is its own
    fixpoint (memoized); one into an evaluation already in progress when it began is not. A closed
    frame gives the facts read inside it (for its memo entry) and adds them to the one around it."""
    from dynacheck.deploy.facts import GPU_FACT
    from dynacheck.static.partial import PartialEvaluator

    pe = PartialEvaluator(None, None)
    outer = pe._push("outer")
    outer_low = pe._open_frame()
    inner = pe._push("inner")
    inner_low = pe._open_frame()
    pe._cut("inner")  # inner re-entered itself: resolved within inner
    pe.reads |= GPU_FACT  # inner read the GPU
    del pe._active["inner"]
    assert pe._close_frame(inner_low, inner) == GPU_FACT
    again = pe._push("again")
    again_low = pe._open_frame()
    assert pe.reads == 0  # a new frame starts with nothing read
    pe._cut("outer")  # re-entered outer, which was in progress before `again` began
    del pe._active["again"]
    assert pe._close_frame(again_low, again) is None
    del pe._active["outer"]
    assert pe._close_frame(outer_low, outer) == GPU_FACT  # the cut was into outer itself; inner's read is its own
    assert pe.reads == GPU_FACT


def test_a_long_or_chain_is_evaluated_whatever_its_nesting():
    """`a or b or c or d or e or f` parses as `((((a or b) or c) or d) or e) or f`: each level must not
    spend a step of the evaluator's depth budget, or the first operands come back unknown (SGLang's
    `_enable_a2a_moe = get_moe_a2a_backend().is_deepep() or ... (5 ors)` then read as truthy)."""
    from dynacheck.static.partial import MAX_DEPTH, PartialEvaluator

    expr = ("k", False)
    for _ in range(MAX_DEPTH + 2):
        expr = ("or", (expr, ("k", False)))
    assert PartialEvaluator(None, None).const(expr, None, 0).values == frozenset({False})
    first_true = ("k", True)
    for _ in range(MAX_DEPTH + 2):
        first_true = ("or", (first_true, ("k", False)))
    assert PartialEvaluator(None, None).const(first_true, None, 0).values == frozenset({True})
    both = ("and", (("and", (("k", 1), ("k", 2))), ("k", 3)))  # `1 and 2 and 3` is 3
    assert PartialEvaluator(None, None).const(both, None, 0).values == frozenset({3})


def test_an_unknown_instance_attribute_is_not_the_external_base_attribute(scan_cache):
    """`self.fast = backend_name() == ...` in `__init__`, its value not known: `if not self.fast:` is
    open. It used to read as `torch.nn.Module.fast`, a truthy object, which pruned the branch
    (SGLang's LayerNorm hid FlashInfer's layernorm in the NSA indexer that way)."""
    root = Path(__file__).parent / "fixtures" / "attr"
    spec = DeploymentSpec(framework=Path(__file__).parent / "fixtures" / "fork" / "gpufx.toml", gpu="sm90",
                          platform="cuda")
    result = scan_roots([root], ["attrfx.model:Model.forward"], cache_dir=scan_cache, deployment=spec)
    assert [(f.site.callee, f.conditions) for f in result.findings] == [("subprocess.run", ())]


def test_the_first_break_carries_the_chain_dynamo_takes_in_trace_order(scan_cache):
    """The site's shortest chain goes through `second`; Dynamo meets it first through `first`."""
    root = Path(__file__).parent / "fixtures" / "attr"
    spec = DeploymentSpec(framework=Path(__file__).parent / "fixtures" / "fork" / "gpufx.toml", gpu="sm90",
                          platform="cuda")
    result = scan_roots([root], ["attrfx.traceorder:Model.forward"], cache_dir=scan_cache, deployment=spec)
    first = result.first_break
    (finding,) = [f for f in result.findings if f.site.callee == "subprocess.check_output"]
    assert [h.function.rpartition(".")[2] for h in finding.chain] == ["forward", "second", "probe"]
    assert [h["function"].rpartition(".")[2] for h in first["chain"]] == ["forward", "first", "outer", "middle", "probe"]
    assert [h["line"] for h in first["chain"]] == [20, 25, 15, 11, 7]  # each hop's call line, then the site
    assert (first["file"], first["line"]) == (finding.site.file, finding.site.line)


def _attr_scan(scan_cache, entry: str):
    spec = DeploymentSpec(framework=Path(__file__).parent / "fixtures" / "fork" / "gpufx.toml", gpu="sm90",
                          platform="cuda")
    return scan_roots([Path(__file__).parent / "fixtures" / "attr"], [entry], cache_dir=scan_cache, deployment=spec)


def test_an_attribute_assigned_under_a_test_decided_against_it_never_holds_that_value(scan_cache):
    """`if backend.is_triton(): self.core = TritonCore() elif backend.is_deep_gemm(): self.core =
    DeepGemmCore()` in a runner built with the Triton backend, and `if quant_config is None:` in a
    linear built with `quant_config=None`: SGLang's bf16 MoE reached DeepGEMM's JIT build, and
    every MoE router (never quantized) reached the FP4 kernel's probe, before these were decided."""
    triton = _attr_scan(scan_cache, "attrfx.runner:Model.forward")
    assert [(f.site.callee, [h.function.rpartition(".")[2] for h in f.chain]) for f in triton.findings] == [
        ("subprocess.check_output", ["forward", "forward", "apply"])]  # the quantized proj only, not the gate
    deep = _attr_scan(scan_cache, "attrfx.runner:DeepModel.forward")
    assert [(f.site.function.rpartition(".")[2], f.site.callee) for f in deep.findings] == [("run", "subprocess.run")]


LAYER_SITES = {"Layer": ("Layer.forward", "subprocess.check_output"), "OtherLayer": ("OtherLayer.forward", "builtins.print")}


@pytest.mark.parametrize("entry, layers", [
    ("Model", ["Layer"]),  # the parameter's default
    ("SubModel", ["OtherLayer"]),  # what the subclass's super().__init__ passes, not the default
    ("Plain", ["Layer"]),  # returns that hold only placeholders
    ("Closure", ["Layer", "OtherLayer"]),  # a nested factory function, each class of its table
    ("Enumerated", ["Layer"]),  # `for i, layer in enumerate(self.layers[start:end])`
    ("ClosureParam", ["Layer"]),  # a nested function calling the constructor's parameter; islice
    ("ClosureSub", ["OtherLayer"]),
])
def test_decoder_layers_built_by_a_factory_are_walked(scan_cache, entry, layers):
    """`make_layers(n, lambda idx, prefix: decoder_layer_type(...))`: the layer class is the constructor
    parameter's default, or what the subclass's `super().__init__` passes; a factory whose returns hold
    only placeholders still holds what its lambda (or nested function) builds. 52 of SGLang 0.5.9's
    112 walked model classes (Qwen2/3, Gemma2, GPT-OSS, ...) read clean in every census cell before."""
    result = _attr_scan(scan_cache, f"attrfx.layers:{entry}.forward")
    sites = {(f.site.function.removeprefix("attrfx.layers."), f.site.callee) for f in result.findings}
    assert {site for site in LAYER_SITES.values() if site in sites} == {LAYER_SITES[name] for name in layers}


def test_a_global_s_value_does_not_depend_on_how_deep_it_was_first_asked(scan_cache):
    """A value is memoized per global, whoever asks: asked first at the end of a long chain of
    evaluations, the depth limit cut it to 'unknown' and every later reader got that (in the census,
    Apertus's all-reduce was found or not depending on which model was walked before it)."""
    from dynacheck.sources.resolve import resolve_target
    from dynacheck.static.scan import ScanSession
    from dynacheck.static.value_types import MAX_DEPTH

    spec = DeploymentSpec(framework=Path(__file__).parent / "fixtures" / "fork" / "gpufx.toml", gpu="sm90",
                          platform="cuda")
    targets = [resolve_target(str(Path(__file__).parent / "fixtures" / "attr"), cache_dir=scan_cache)]
    answers = []
    for first_depth in (0, MAX_DEPTH - 1):
        evaluator = ScanSession.open(targets, scan_cache).engine(spec)[1]
        evaluator.global_value("attrfx.depth", "_GROUP", first_depth)
        answers.append({(v.kind, v.name) for v in evaluator.global_value("attrfx.depth", "_GROUP", 0)})
    assert answers[0] == answers[1] == {("ext", "builtins.None"), ("inst", "Group")}


def test_a_property_read_runs_its_getter_and_paths_keep_their_type(scan_cache):
    """FlashInfer's JitSpec probes the file system in properties (`if self.is_aot:` ->
    `self.aot_path.exists()`, `FileLock(self.lock_path)` -> `get_tmpdir()` -> `tmpdir.exists()`) and
    in helpers taking a `Path`; a path built with `/` from a module-level `pathlib.Path` is a path.
    These were the flagship's missed real sites (flashinfer/jit/core.py:260, :286, :490,
    cpp_ext.py:312): a read was no call, and `self.aot_path` was the getter, not a Path."""
    result = _attr_scan(scan_cache, "attrfx.jit:Model.forward")
    sites = {(f.site.line, f.site.function.rpartition(".")[2], f.site.callee, bool(f.conditions))
             for f in result.findings}
    assert sites == {
        (13, "get_tmpdir", "pathlib.Path.exists", False),  # lock_path's getter calls get_tmpdir
        (14, "get_tmpdir", "pathlib.Path.mkdir", True),  # made once: `if not tmpdir.exists():`
        (19, "run_ninja", "pathlib.Path.mkdir", False),  # `workdir: Path`
        (20, "run_ninja", "subprocess.run", False),
        (33, "is_aot", "pathlib.Path.exists", False),  # `if self.is_aot:` -> the getter
        (46, "build_and_load", "builtins.open", False),
    }
    (is_aot,) = [f for f in result.findings if f.site.function.endswith("is_aot")]
    assert [h.function.rpartition(".")[2] for h in is_aot.chain] == ["forward", "build_and_load", "is_aot"]
    # Dynamo reads `self.is_aot` (line 43, no call on it) before anything else in build_and_load
    assert (result.first_break["function"].rpartition(".")[2], result.first_break["line"]) == ("is_aot", 33)


def test_only_reads_of_self_attributes_are_property_reads():
    """`self.m(...)` is a method call and `self.x = ...` a store; `if self.p:` and `f(self.q)` read."""
    from dynacheck.static.summary import summarize

    source = ("class A:\n"
              "    def f(self):\n"
              "        self.x = self.y\n"
              "        self.m(self.q)\n"
              "        if self.p:\n"
              "            return self.q\n")
    fn = summarize(source, "m", "m.py", False, defer=False).functions["A.f"]
    assert [(attr, line) for attr, line, _, _ in fn.self_reads] == [("y", 3), ("q", 4), ("p", 5)]
    assert fn.self_reads[1][2] == () and fn.self_reads[2][2] == ()  # read before the `if`


@pytest.mark.parametrize("gpu, marlin", [("sm86", True), ("sm90", False), ("sm120", False)])
def test_a_capability_probe_unpacked_from_a_tuple_decides_an_instance_flag(scan_cache, gpu, marlin):
    """fp8's `self.use_marlin = force or can_auto_enable_marlin()`: the probe unpacks
    `major, minor = get_device_capability()` (the framework's wrapper of the GPU probe, declared as
    an accessor in the framework facts, as presets/sglang.toml does for SGLang's), and it is first
    asked deep under a layer's guard. Every fp8 cell of the census reported the Marlin kernel's JIT
    build, which SGLang auto-enables on sm80-88 only."""
    spec = DeploymentSpec(framework=Path(__file__).parent / "fixtures" / "fork" / "gpufx.toml", gpu=gpu,
                          platform="cuda")
    result = scan_roots([Path(__file__).parent / "fixtures" / "attr"], ["attrfx.marlin:Model.forward"],
                        cache_dir=scan_cache, deployment=spec)
    assert [(f.site.callee, f.conditions) for f in result.findings] == ([("subprocess.run", ())] if marlin else [])


@pytest.mark.parametrize("env, expected", [
    ({}, {"builtins.print"}),
    ({"DEPFX_ARCHS": "9.0", "DEPFX_QUIET": "1"}, {"subprocess.run"}),
    ({"DEPFX_MODE": "probe"}, {"builtins.print", "os.system"}),
    ({"DEPFX_MODE": "fast"}, {"builtins.print"}),
])
def test_a_membership_test_on_os_environ_reads_the_deployment_env(scan_cache, env, expected):
    """`"X" in os.environ` and `os.environ["X"]` are the deployment's environment: every variable not
    given is unset, so each branch is taken or not, with no condition left."""
    spec = DeploymentSpec(framework=FACTS, gpu="sm120", env=env)
    result = scan_roots([ROOT], ["depfx.env_probe:Arch.forward"], cache_dir=scan_cache, deployment=spec)
    assert {f.site.callee for f in result.findings if not f.conditions} == expected
    assert not [f for f in result.findings if f.conditions]


def test_without_a_deployment_an_environ_test_is_an_env_condition(scan_cache):
    result = scan_roots([ROOT], ["depfx.env_probe:Arch.forward"], cache_dir=scan_cache)
    waits = {f.site.callee: [c.text for c in f.conditions] for f in result.findings}
    assert waits == {"subprocess.run": ["'DEPFX_ARCHS' in os.environ"],
                     "builtins.print": ["'DEPFX_QUIET' not in os.environ"],
                     "os.system": ["'DEPFX_MODE' in os.environ and os.environ[...] == 'probe'"]}


def _arch_scan(scan_cache, architecture, session=None, entry="depfx.arch_gate:Model.forward"):
    from dynacheck.static.scan import scan_targets
    from dynacheck.sources.resolve import resolve_target

    spec = DeploymentSpec(framework=FACTS, gpu="sm90", architecture=architecture)
    targets = [resolve_target(str(ROOT), cache_dir=scan_cache)]
    result = scan_targets(targets, [entry], cache_dir=scan_cache, deployment=spec,
                          session=session, reuse=False)
    return {f.site.callee for f in result.findings}


def test_a_census_cell_s_architecture_decides_an_architecture_gate(scan_cache):
    """`config.architectures[0] in [...]` is the cell's model class (SGLang builds the class its config's
    architecture names): a class outside the list never builds the layer; one inside it does, whatever
    the config's other fields (unknown without a checkpoint, so the path stays walked). Without an
    architecture nothing is decided, as before."""
    assert _arch_scan(scan_cache, "PlainForCausalLM") == set()
    assert _arch_scan(scan_cache, "SparseForCausalLM") == {"subprocess.run"}
    assert _arch_scan(scan_cache, None) == {"subprocess.run"}
    # read through `getattr` behind an `isinstance(config, dict)` test (sglang 0.5.10's is_deepseek_nsa)
    entry = "depfx.arch_gate:AnyModel.forward"
    assert _arch_scan(scan_cache, "PlainForCausalLM", entry=entry) == set()
    assert _arch_scan(scan_cache, "SparseForCausalLM", entry=entry) == {"subprocess.run"}


def test_switching_the_architecture_in_one_session_drops_what_read_it(scan_cache):
    """A census walks forward after forward with one evaluator per deployment, switching the class in
    place (ScanSession.engine): each answer is the one a fresh session gives."""
    from dynacheck.sources.resolve import resolve_target
    from dynacheck.static.scan import ScanSession

    session = ScanSession.open([resolve_target(str(ROOT), cache_dir=scan_cache)], scan_cache)
    order = ["SparseForCausalLM", "PlainForCausalLM", "SparseV2ForCausalLM", "PlainForCausalLM", "SparseForCausalLM"]
    assert [_arch_scan(scan_cache, name, session) for name in order] == \
        [_arch_scan(scan_cache, name) for name in order] == [{"subprocess.run"}, set()] * 2 + [{"subprocess.run"}]


def test_a_walk_replaying_an_expansion_reads_what_computing_it_read(scan_cache):
    """A census gives a forward's record to every class of it when the walk read no architecture
    (census/run.py `_walk_entries`). Wrapper's forward, walked after Model's in one evaluator, replays
    the shared layer's expansion from the memo; that expansion read the architecture, so the replaying
    walk reads it too. Before, a memo hit added nothing, and the record of PlainForCausalLM would have
    been given to SparseForCausalLM, which builds the layer that breaks."""
    from dynacheck.deploy.facts import ARCH_FACT
    from dynacheck.sources.resolve import resolve_target
    from dynacheck.static.scan import ScanSession, scan_targets

    targets = [resolve_target(str(ROOT), cache_dir=scan_cache)]
    session = ScanSession.open(targets, scan_cache)
    spec = DeploymentSpec(framework=FACTS, gpu="sm90", architecture="PlainForCausalLM")
    read = {}
    for entry in ("depfx.arch_gate:Model.forward", "depfx.arch_gate:Wrapper.forward"):
        evaluator = session.engine(spec)[1]
        saved = evaluator.reads_begin()
        scan_targets(targets, [entry], cache_dir=scan_cache, deployment=spec, session=session, reuse=False)
        read[entry] = evaluator.reads_end(saved)
    assert read["depfx.arch_gate:Model.forward"] & ARCH_FACT
    assert read["depfx.arch_gate:Wrapper.forward"] & ARCH_FACT
    entry = "depfx.arch_gate:Wrapper.forward"
    assert _arch_scan(scan_cache, "PlainForCausalLM", entry=entry) == set()
    assert _arch_scan(scan_cache, "SparseForCausalLM", entry=entry) == {"subprocess.run"}


def test_classes_answering_the_recorded_tests_alike_keep_what_was_worked_out(scan_cache):
    """The architecture is read as a name only by comparisons, which are recorded: two classes outside
    the list answer them alike, so switching between them keeps the evaluator's memo (a census reuses
    the walk); a class inside it answers otherwise, and what read the test is dropped."""
    from dynacheck.sources.resolve import resolve_target
    from dynacheck.static.partial_values import answers_alike
    from dynacheck.static.scan import ScanSession

    session = ScanSession.open([resolve_target(str(ROOT), cache_dir=scan_cache)], scan_cache)
    spec = lambda name: DeploymentSpec(framework=FACTS, gpu="sm90", architecture=name)  # noqa: E731
    assert _arch_scan(scan_cache, "PlainForCausalLM", session) == set()
    partial = session.engine(spec("PlainForCausalLM"))[1].partial
    tests = set(partial.architecture_tests)
    assert ("In", ("SparseForCausalLM", "SparseV2ForCausalLM")) in tests
    assert answers_alike(tests, "PlainForCausalLM", "OtherForCausalLM")
    assert not answers_alike(tests, "PlainForCausalLM", "SparseForCausalLM")
    session.engine(spec("OtherForCausalLM"))
    assert partial.architecture_tests == tests  # nothing dropped
    session.engine(spec("SparseForCausalLM"))
    assert partial.architecture_tests == set()  # dropped with what read it
    assert _arch_scan(scan_cache, "SparseForCausalLM", session) == {"subprocess.run"}


def test_a_call_in_the_arguments_of_a_multi_line_call_comes_first(scan_cache):
    """Ordered by first line, `make_spec(` (line 19) was entered before the probe in its arguments
    (line 22): the first break read `datetime.now()` where Dynamo stops at `nvcc --version`."""
    first = _attr_scan(scan_cache, "attrfx.argorder:gen_module").first_break
    assert (first["callee"], first["line"]) == ("subprocess.check_output", 10)


def test_dynamo_makes_the_argument_call_first(monkeypatch):
    import importlib

    import torch

    monkeypatch.syspath_prepend(str(Path(__file__).parent / "fixtures" / "attr"))
    module = importlib.import_module("attrfx.argorder")
    torch._dynamo.reset()
    with pytest.raises(torch._dynamo.exc.Unsupported) as caught:
        torch.compile(module.gen_module, backend="eager", fullgraph=True)(torch.ones(2))
    ours = [frame.lineno for frame in caught.value.real_stack if frame.filename.endswith("argorder.py")]
    assert ours == [22, 10]  # the probe in the arguments, not make_spec's line 14


def test_a_value_hazard_on_a_line_without_a_call_can_be_the_first_break(scan_cache, monkeypatch):
    """The address arithmetic (DC134) is on line 34, inside a test that starts on line 31 (where the use was
    placed, a line the first-break walk never visited: it went on to the nvcc probe). Dynamo stops at 34."""
    first = _attr_scan(scan_cache, "attrfx.argorder:forward_stats").first_break
    assert (first["rule"], first["line"]) == ("DC134", 34)
    import importlib

    import torch

    monkeypatch.syspath_prepend(str(Path(__file__).parent / "fixtures" / "attr"))
    module = importlib.import_module("attrfx.argorder")
    torch._dynamo.reset()
    with pytest.raises(torch._dynamo.exc.Unsupported) as caught:
        torch.compile(module.forward_stats, backend="eager", fullgraph=True)(torch.ones(2))
    assert [f.lineno for f in caught.value.real_stack if f.filename.endswith("argorder.py")][-1] == 34


def test_a_classmethod_s_cls_is_its_class(scan_cache, monkeypatch):
    """`cls._class_lock` in a classmethod called on the class resolved to nothing, so the lock it takes
    (DC011) went unseen (FlashInfer's AutoTuner.get). Dynamo refuses the lock as a context manager."""
    found = _attr_scan(scan_cache, "attrfx.classlock:tuned").findings
    assert [(f.rule, f.site.line, f.site.callee) for f in found] == [("DC011", 14, "threading.Lock.__enter__")]
    import importlib

    import torch

    monkeypatch.syspath_prepend(str(Path(__file__).parent / "fixtures" / "attr"))
    module = importlib.import_module("attrfx.classlock")
    module.Tuner._instance = None
    torch._dynamo.reset()
    with pytest.raises(torch._dynamo.exc.Unsupported) as caught:
        torch.compile(module.tuned, backend="eager", fullgraph=True)(torch.ones(2))
    assert [f.lineno for f in caught.value.real_stack if f.filename.endswith("classlock.py")][-1] == 14


def test_a_layer_built_without_the_quant_config_is_unquantized(scan_cache):
    """`Attention(8)` leaves `quant_config: Optional[QuantConfig] = None` at its default, and hands it on:
    the linear inside is built unquantized, whatever the checkpoint. Before, the parameter was the
    deployment's config class (the pin of an unbound annotated parameter), and GPT-OSS's attention
    (sglang `models/gpt_oss.py:455-469`) reached the FP4 kernel's probe on nvfp4/sm120."""
    def chains(entry: str) -> set[tuple[int, ...]]:
        result = scan_roots([ROOT], [f"depfx.unquantized:{entry}.forward"], cache_dir=scan_cache,
                            deployment=DeploymentSpec(framework=FACTS, gpu="sm100", platform="cuda",
                                                      server_args="--quantization fp4"))
        return {tuple(h.line for h in f.chain) for f in result.findings if f.site.callee == "subprocess.check_output"}

    assert chains("AttentionOnly") == set()
    assert chains("Layer") == {(51, 40, 31, 18)}  # through `self.mlp(y)` (line 51), given the config; not `self.attn(x)` (50)
