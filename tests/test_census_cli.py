"""`dynacheck census` from the command line: its outputs, its progress, and one clear line per bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dynacheck.cli import main


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(argv)
    out, err = capsys.readouterr()
    return info.value.code, out, err


def _census(fatal: int) -> dict:
    first = {"gb_id": "GB0007", "rule": "DC001", "title": "t", "file": "f.py", "line": 3, "function": "m.f",
             "callee": "c", "chain": [{"function": "m.g", "file": "g.py", "line": 1, "code": "f()"}]}
    cell = {"model": "A", "deployment": "q/sm1", "entry": "m:A.forward", "entry_how": "own",
            "fatal_sites": fatal, "conditional_sites": 0, "first_break": first if fatal else None,
            "fix": {"kind": "custom_op", "at": "m.f", "sites": fatal, "fatal_sites": fatal} if fatal else None,
            "breaks_by_function": ["m.f"] if fatal else []}
    return {"targets": ["sglang==0"], "deployments": [{"name": "q/sm1"}], "cells": [cell],
            "not_applicable": [], "errors": [], "stats": {"models": 1, "forwards": 1}}


def test_compare_writes_the_diff_between_two_census_files(tmp_path, capsys):
    old, new, out = tmp_path / "old.json", tmp_path / "new.json", tmp_path / "diff.md"
    old.write_text(json.dumps(_census(2)), encoding="utf-8")
    new.write_text(json.dumps(_census(0)), encoding="utf-8")
    code, stdout, _ = run(["census", "--compare", str(old), str(new)], capsys)
    assert code == 0 and "fixed (fatal before, none after): 1" in stdout
    code, stdout, _ = run(["census", "--compare", str(old), str(new), "--out", str(out)], capsys)
    assert code == 0 and stdout == "" and "fixed (fatal before, none after): 1" in out.read_text(encoding="utf-8")


def test_compare_of_a_file_that_is_not_a_census_is_one_line_and_exit_2(tmp_path, capsys):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(_census(1)), encoding="utf-8")
    bad.write_text("[1, 2", encoding="utf-8")
    code, stdout, err = run(["census", "--compare", str(good), str(bad)], capsys)
    assert code == 2 and stdout == ""
    assert "Could not compare the census files" in err and "Traceback" not in err


def test_a_deployments_file_that_does_not_parse_is_one_line_and_exit_2(tmp_path, capsys):
    broken = tmp_path / "deployments.toml"
    broken.write_text("[matrix\ngpus = [", encoding="utf-8")
    code, stdout, err = run(["census", "--offline", "--deployments", str(broken), "--target", str(tmp_path)], capsys)
    assert code == 2 and stdout == "" and "Traceback" not in err
    assert "deployments.toml" in err


@pytest.mark.wheels
def test_a_small_census_writes_json_and_says_how_far_it_is(pinned_targets, tmp_path, capsys):
    deployments = tmp_path / "deployments.toml"
    deployments.write_text('[[deployment]]\nname = "bf16/sm90"\ngpu = "sm90"\n'
                           'server_args = "--enable-piecewise-cuda-graph"\n', encoding="utf-8")
    out = tmp_path / "census.json"
    trees = [arg for t in pinned_targets for arg in ("--target", str(t.root))]  # the unpacked wheels
    code, stdout, err = run(["census", *trees, "--model", "LlamaForCausalLM", "--model", "Qwen2ForCausalLM",
                             "--deployments", str(deployments), "--format", "json", "--out", str(out),
                             "--jobs", "1", "--cache-dir", str(tmp_path / "cache")], capsys)
    assert code == 0 and stdout == ""
    data = json.loads(out.read_text(encoding="utf-8"))
    assert sorted(c["model"] for c in data["cells"]) == ["LlamaForCausalLM", "Qwen2ForCausalLM"]
    assert {c["deployment"] for c in data["cells"]} == {"bf16/sm90"}
    assert "census: 2 model classes" in err and "deployment passes walked" in err


@pytest.mark.wheels
def test_a_model_name_that_is_not_registered_is_one_line_and_exit_2(pinned_targets, tmp_path, capsys):
    trees = [arg for t in pinned_targets for arg in ("--target", str(t.root))]
    code, stdout, err = run(["census", *trees, "--model", "NoSuchForCausalLM", "--jobs", "1",
                             "--cache-dir", str(tmp_path / "cache")], capsys)
    assert code == 2 and stdout == ""
    assert "None of the --model names is registered" in err and "Traceback" not in err


def test_the_flashinfer_api_census_refuses_html_before_any_work(tmp_path, capsys):
    code, stdout, err = run(["census", "--flashinfer-api", "--format", "html", "--target", str(tmp_path)], capsys)
    assert code == 2 and stdout == ""
    assert "JSON or markdown, not HTML" in err and "Traceback" not in err
