"""SGLang's ServerArgs layouts: the dataclass of server_args.py (0.5.9, 0.5.10) is read; the namespaces
of arg_groups/fields/ (0.5.23) are not yet, and a scan or census that passes launch flags says so once
instead of calling every flag unknown."""

from __future__ import annotations

from pathlib import Path

import pytest

from dynacheck.census.run import _one_failure
from dynacheck.deploy.server_args import apply_arguments, read_schema
from dynacheck.errors import UserError

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


def test_namespaced_server_args_are_named_as_the_reason_once_flags_are_given(tmp_path):
    schema = read_schema(_tree(tmp_path, NAMESPACED, namespaces=True))
    assert schema.elsewhere.endswith("arg_groups/fields")
    assert apply_arguments(schema, "")[0] == {}  # no flag given: nothing to check, nothing refused
    with pytest.raises(UserError, match="arg_groups/fields .*does not read yet") as info:
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
