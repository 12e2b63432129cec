"""SGLang's ServerArgs layouts: the dataclass of server_args.py (0.5.9, 0.5.10) and the namespaces of
arg_groups/fields/ (0.5.23, tests/fixtures/deploy_ns) are both read; a layout with neither says so once
instead of calling every flag unknown."""

from __future__ import annotations

from pathlib import Path

import pytest

from dynacheck.census.run import _one_failure
from dynacheck.deploy.build import DeploymentSpec
from dynacheck.deploy.server_args import UnknownFlag, apply_arguments, read_schema
from dynacheck.errors import UserError
from dynacheck.static.scan import scan_roots

DATACLASS = (
    "import argparse\nfrom dataclasses import dataclass\n\n@dataclass\nclass ServerArgs:\n"
    "    quantization: str = None\n    tp_size: int = 1\n\n"
    "    @staticmethod\n    def add_cli_args(parser):\n"
    "        parser.add_argument('--quantization', type=str, default=None)\n"
    "        parser.add_argument('--tp-size', '--tp', type=int, default=1)\n"
)
NAMESPACED = (
    "class ServerArgs:\n    '''Fields live in arg_groups/fields/.'''\n\n"
    "    @staticmethod\n    def add_cli_args(parser):\n        parser.add_argument('--config', type=str)\n"
)


def _tree(tmp_path: Path, server_args: str, namespaces: bool) -> Path:
    srt = tmp_path / "sglang" / "srt"
    srt.mkdir(parents=True)
    (srt / "server_args.py").write_text(server_args, encoding="utf-8")
    if namespaces:
        (srt / "arg_groups" / "fields").mkdir(parents=True)
        (srt / "arg_groups" / "fields" / "model.py").write_text(
            "class Model:\n    quantization: 'A[str, Arg()]'\n", encoding="utf-8")
    return srt / "server_args.py"


def test_the_dataclass_layout_is_read_and_applied(tmp_path):
    schema = read_schema(_tree(tmp_path, DATACLASS, namespaces=False))
    assert schema.elsewhere == "" and {"quantization", "tp_size"} <= schema.fields
    values, _ = apply_arguments(schema, "--quantization fp8 --tp 8")
    assert values["quantization"] == "fp8" and values["tp_size"] == 8


NSFX = Path(__file__).parent / "fixtures" / "deploy_ns"


def _ns_scan(scan_cache, **deployment):
    spec = DeploymentSpec(framework=NSFX / "nsfx.toml", gpu="sm120", **deployment)
    return scan_roots([NSFX], ["nsfx.model:Model.forward"], cache_dir=scan_cache, deployment=spec)


def test_namespaced_fields_give_their_flags_defaults_and_segments():
    """sglang 0.5.23: `name: A[T, "help" | Arg(...)] = default` in a `_NS_PATH` class is field `name`
    with flag `--name` (plus aliases), dest the field, `bool` a store_true; `no_cli` gives no flag."""
    schema = read_schema(NSFX / "nsfx" / "server_args.py")
    assert schema.elsewhere == ""
    assert {"enable_fast_path", "graph_backend", "max_tokens", "scale", "disable_graphs", "internal"} <= schema.fields
    assert schema.flags["--enable-fast-path"] == ("enable_fast_path", "store_true", "")
    assert schema.flags["--max-tokens"] == schema.flags["--max-graph-tokens"] == ("max_tokens", "store", "int")
    assert schema.flags["--scale"] == ("scale", "store", "float")
    assert schema.flags["--graph-backend"] == ("graph_backend", "store", "")  # Literal of str: the text
    assert "--disable-graphs-field" not in schema.flags and "--internal" not in schema.flags
    # the deprecated spelling registered in server_args.py names an action of argparse_actions.py
    assert schema.flags["--disable-graphs"] == ("disable_graphs", "store_true", "")
    assert schema.defaults["max_tokens"] == 2048 and schema.defaults["enable_fast_path"] is False
    # resolvable: a start-up hook may set it, so its declared "full" is not what the code reads
    assert "graph_backend" in schema.resolvable and "graph_backend" not in schema.defaults
    assert {"exec", "graph"} <= schema.segments


def test_namespaced_flags_are_applied_the_way_argparse_would():
    schema = read_schema(NSFX / "nsfx" / "server_args.py")
    values, given = apply_arguments(schema, "--enable-fast-path --max-graph-tokens 512 --scale=0.5 --disable-graphs")
    assert (values["enable_fast_path"], values["max_tokens"], values["scale"], values["disable_graphs"]) == \
        (True, 512, 0.5, True)
    with pytest.raises(UnknownFlag, match="no flag --enable-piecewise-cuda-graph") as info:
        apply_arguments(schema, "--enable-piecewise-cuda-graph")
    assert info.value.flag == "--enable-piecewise-cuda-graph"


def test_a_config_bag_read_through_its_namespace_is_the_server_args(scan_cache):
    """`get_exec().graph.enable_fast_path` reads the flat field: off by default, on with the flag."""
    quiet = _ns_scan(scan_cache)
    callees = {f.site.callee: f for f in quiet.findings}
    assert "builtins.print" not in callees
    # resolvable and not given: both branches stay, the nvcc run conditional on the flag
    assert callees["subprocess.run"].conditions
    assert any("graph_backend" in c.text for c in callees["subprocess.run"].conditions)
    loud = {f.site.callee: f for f in _ns_scan(scan_cache, server_args="--enable-fast-path --graph-backend breakable")
            .findings}
    assert not loud["builtins.print"].conditions and not loud["subprocess.run"].conditions
    assert "subprocess.run" not in {f.site.callee for f in
                                    _ns_scan(scan_cache, server_args="--graph-backend full").findings}


def test_a_census_deployment_with_a_flag_the_framework_lacks_does_not_start(scan_cache):
    """A census cell's launch flag that this SGLang's parser lacks: argparse exits, nothing compiles;
    a scan's --server-args keeps calling it the user's mistake."""
    with pytest.raises(UserError, match="no flag --enable-piecewise-cuda-graph. This SGLang's "
                       "nsfx/model_runner.py defines no init_piecewise_cuda_graphs, .*written for piecewise"):
        _ns_scan(scan_cache, server_args="--enable-piecewise-cuda-graph")  # its runner is gone: said why
    refused = _ns_scan(scan_cache, server_args="--enable-piecewise-cuda-graph", refuse_unknown_flags=True)
    assert "no launch flag --enable-piecewise-cuda-graph" in refused.deployment["refused"]
    assert "unrecognized arguments" in refused.deployment["refused"]
    assert any(p.kind == "refused" for p in refused.problems)


def test_a_fields_folder_without_a_readable_namespace_is_named_once_flags_are_given(tmp_path):
    schema = read_schema(_tree(tmp_path, NAMESPACED, namespaces=True))  # classes without _NS_PATH
    assert schema.elsewhere.endswith("arg_groups/fields")
    assert apply_arguments(schema, "")[0] == {}  # no flag given: nothing to check, nothing refused
    with pytest.raises(UserError, match="arg_groups/fields, where dynacheck finds no field") as info:
        apply_arguments(schema, "--quantization fp8")
    assert "no flag" not in str(info.value)


def test_a_server_args_class_without_fields_and_no_namespaces_keeps_the_unknown_flag_error(tmp_path):
    schema = read_schema(_tree(tmp_path, NAMESPACED, namespaces=False))
    assert schema.elsewhere == ""
    with pytest.raises(UserError, match="has no flag --quantization"):
        apply_arguments(schema, "--quantization fp8")


def test_a_census_whose_every_scan_failed_for_one_reason_says_it_once():
    assert _one_failure({("m:A.forward", "bf16"): "why", ("m:B.forward", "fp8"): "why"}) == "why"
    assert _one_failure({("m:A.forward", "bf16"): "why", ("m:B.forward", "fp8"): "other"}) == ""
    assert _one_failure({("m:A.forward", "bf16"): "why", ("m:B.forward", "fp8"): {"fatal_sites": 0}}) == ""
    assert _one_failure({}) == ""


def test_the_facts_of_a_runner_the_framework_no_longer_has_are_not_applied(tmp_path, scan_cache):
    """sglang 0.5.23 has no init_piecewise_cuda_graphs: the globals that runner sets while compiling
    are not assumed (a branch on them stays open), and the scan says why; with the runner they are."""
    import shutil

    shutil.copytree(NSFX, tmp_path / "ns")
    model = tmp_path / "ns" / "nsfx" / "model.py"
    model.write_text(model.read_text().replace(
        "        return x\n",
        "        if IN_PIECEWISE:\n            subprocess.check_output([\"nvcc\"])\n        return x\n",
    ).replace("class Model", "IN_PIECEWISE = False\n\n\ndef enter_piecewise():\n    global IN_PIECEWISE\n"
              "    IN_PIECEWISE = True\n\n\nclass Model"), encoding="utf-8")

    def scan():
        spec = DeploymentSpec(framework=tmp_path / "ns" / "nsfx.toml", gpu="sm120")
        return scan_roots([tmp_path / "ns"], ["nsfx.model:Model.forward"], cache_dir=scan_cache, deployment=spec)

    without = scan()
    assert "defines no init_piecewise_cuda_graphs" in without.deployment["runner_missing"]
    assert any(p.kind == "runner_missing" for p in without.problems)
    probe = [f for f in without.findings if f.site.callee == "subprocess.check_output"]
    assert probe and probe[0].conditions  # the global is not taken as the runner's `True`
    (tmp_path / "ns" / "nsfx" / "model_runner.py").write_text(
        "class ModelRunner:\n    def init_piecewise_cuda_graphs(self):\n        pass\n", encoding="utf-8")
    with_runner = scan()
    assert "runner_missing" not in with_runner.deployment
    probe = [f for f in with_runner.findings if f.site.callee == "subprocess.check_output"]
    assert probe and not probe[0].conditions


def test_a_list_default_keeps_the_server_args_object_hashable(scan_cache):
    """`add_argument(..., default=[])` gives a list (0.5.9's `--encoder-urls`): the evaluator's
    server-args object must stay hashable, or every memo key holding it fails (the flagship scan
    grew from 122 to 179 findings when such a default was first read)."""
    from dynacheck.sources.resolve import resolve_target
    from dynacheck.static.scan import ScanSession

    schema = read_schema(NSFX / "nsfx" / "server_args.py")
    assert schema.defaults["encoder_urls"] == []  # argparse's default, over the field's None
    session = ScanSession.open([resolve_target(str(NSFX), cache_dir=scan_cache)], scan_cache)
    evaluator = session.engine(DeploymentSpec(framework=NSFX / "nsfx.toml", gpu="sm120"))[1]
    assert hash(evaluator.partial._object("server_args")) is not None


@pytest.mark.wheels
@pytest.mark.slow
def test_sglang_0_5_23_reads_a_launch_flag_through_its_config_bag(scan_cache):
    """On the real 0.5.23 tree: `MoEGate.forward` returns early when
    `get_exec().deterministic.enable_deterministic_inference` (models/deepseek_v2.py:573-576), before its
    `linear_bf16_fp32` reaches DeepGEMM's JIT lock file (`deep_gemm_wrapper/compile_utils.py:141`); the
    flag decides it only if the bag's namespace path is read as the flat field."""
    from dynacheck.errors import UserError
    from dynacheck.sources.resolve import resolve_target
    from dynacheck.static.scan import scan_targets

    try:
        target = resolve_target("sglang==0.5.23")
    except UserError as exc:  # offline and not cached
        pytest.skip(f"sglang 0.5.23 wheel unavailable: {exc}")

    def lock_sites(extra: str) -> list:
        spec = DeploymentSpec(server_args=f"--tp-size 8 {extra}".strip(), gpu="sm100")
        result = scan_targets([target], ["sglang.srt.models.deepseek_v2:DeepseekV2Model.forward"],
                              cache_dir=scan_cache, deployment=spec)
        return [f for f in result.findings
                if f.site.file.endswith("deep_gemm_wrapper/compile_utils.py") and f.site.line == 141]

    default = lock_sites("")
    assert default and any(h.function.endswith("MoEGate.forward") and h.line == 593 for h in default[0].chain)
    assert not lock_sites("--enable-deterministic-inference")


def test_the_annotated_dataclass_layout_gives_its_flags(tmp_path):
    """sglang 0.5.14-0.5.20: `class ServerArgs` itself holds `A[T, Arg(...)]` fields, made flags by
    `add_cli_args_from_dataclass(parser, ServerArgs)`; no add_argument names them."""
    annotated = (
        "from typing import Optional\nfrom sglang.srt.arg_groups.arg_utils import A, Arg\n\n"
        "class ServerArgs:\n"
        "    quantization: A[Optional[str], Arg(help='q', aliases=['--quant'])] = None\n"
        "    enable_x: A[bool, 'turn x on'] = False\n"
        "    tp_size: A[int, Arg(help='tp', aliases=['--tensor-parallel-size'])] = 1\n"
        "    internal: int = 3\n\n"
        "    @staticmethod\n    def add_cli_args(parser):\n        add_cli_args_from_dataclass(parser, ServerArgs)\n"
    )
    schema = read_schema(_tree(tmp_path, annotated, namespaces=False))
    assert schema.flags["--quantization"] == schema.flags["--quant"] == ("quantization", "store", "")
    assert schema.flags["--enable-x"] == ("enable_x", "store_true", "")
    assert "--internal" not in schema.flags and schema.defaults["internal"] == 3
    values, _ = apply_arguments(schema, "--quant fp8 --tensor-parallel-size 4 --enable-x")
    assert (values["quantization"], values["tp_size"], values["enable_x"]) == ("fp8", 4, True)


def test_a_flag_whose_dest_from_cli_args_renames_sets_that_field(tmp_path):
    """`--tp-size 8`'s argparse dest is `tensor_parallel_size`; `ServerArgs.from_cli_args` copies it to `tp_size`
    (sglang 0.5.9 `server_args.py:5070-5075`), so the launch's `tp_size` is 8, not the field's default."""
    renamed = DATACLASS.replace("parser.add_argument('--tp-size', '--tp', type=int, default=1)",
                                "parser.add_argument('--tensor-parallel-size', '--tp-size', type=int, default=1)") + (
        "\n    @classmethod\n    def from_cli_args(cls, args):\n"
        "        args.tp_size = args.tensor_parallel_size\n        return cls()\n")
    schema = read_schema(_tree(tmp_path, renamed, namespaces=False))
    assert schema.renames == {"tensor_parallel_size": "tp_size"}
    values, _ = apply_arguments(schema, "--tp-size 8")
    assert values["tp_size"] == 8
    assert apply_arguments(schema, "")[0]["tp_size"] == 1
