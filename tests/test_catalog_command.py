"""`dynacheck rules`: the listing, the ruff-style explanation, JSON, and bad ids."""

from __future__ import annotations

import json

import pytest

from dynacheck.catalog import load_catalog
from dynacheck.cli import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(list(argv))
    out, err = capsys.readouterr()
    return info.value.code, out, err


def test_listing_shows_every_rule_with_its_gb_id(capsys):
    code, out, _ = run(capsys, "rules")
    assert code == 0
    for rule in load_catalog().rules:
        assert rule.id in out
    row = next(line for line in out.splitlines() if "DC001" in line)
    assert "process" in row and "error" in row and "GB0007" in row and "fatal" in row


def test_family_filter_lists_only_that_family(capsys):
    code, out, _ = run(capsys, "rules", "--family", "locks")
    assert code == 0
    assert "DC010" in out and "DC011" in out and "DC012" in out
    assert "DC001" not in out


def test_unknown_family_is_a_user_error(capsys):
    code, _, err = run(capsys, "rules", "--family", "lock")
    assert code == 2
    assert "No rule family 'lock'" in err and "locks" in err


def test_explain_reads_like_a_rule_doc(capsys):
    code, out, _ = run(capsys, "rules", "--explain", "DC001")
    assert code == 0
    sections = ["What it does and why it is bad", "What Dynamo does", "## Example", "## Fixes, in order"]
    positions = [out.index(s) for s in sections]
    assert positions == sorted(positions)
    assert "GB0007" in out and "Attempted to call function marked as skipped" in out
    assert "inside subprocess.Popen.__init__" in out
    assert "compilation raises" in out
    fixes = out[out.index("## Fixes, in order") :]
    assert fixes.index("1. custom_op") < fixes.index("assume_constant_result") < fixes.index("prewarm")
    prewarm_line = next(line for line in fixes.splitlines() if "prewarm" in line and line[0].isdigit())
    assert "UNSOUND" in prewarm_line and "traces the body again" in prewarm_line
    disable_line = next(line for line in fixes.splitlines() if line.startswith("5. disable"))
    assert "UNSOUND" in disable_line and "GB0098" in disable_line
    custom_line = next(line for line in fixes.splitlines() if line.startswith("1. custom_op"))
    assert "UNSOUND" not in custom_line


def test_explain_is_case_insensitive_and_accepts_the_rule_name(capsys):
    assert run(capsys, "rules", "--explain", "dc030")[0] == 0
    code, out, _ = run(capsys, "rules", "--explain", "print-in-compiled-code")
    assert code == 0 and out.startswith("DC032 print-in-compiled-code")


def test_explain_unknown_id_exits_2_with_closest_ids(capsys):
    code, out, err = run(capsys, "rules", "--explain", "DC01")
    assert code == 2
    assert out == ""
    assert "Unknown rule id 'DC01'" in err
    assert "DC010" in err and "DC011" in err
    assert "Traceback" not in err


def test_json_dumps_the_whole_catalogue(capsys):
    code, out, _ = run(capsys, "rules", "--format", "json")
    assert code == 0
    data = json.loads(out)
    assert [r["id"] for r in data["rules"]] == [r.id for r in load_catalog().rules]
    first = data["rules"][0]
    assert first["outcome"]["gb_id"] == "GB0007"
    assert first["fixes"][0] == {"kind": "custom_op", "text": first["fixes"][0]["text"], "sound": True}
    assert any(not f["sound"] for f in first["fixes"])


def test_json_explain_dumps_one_rule(capsys):
    code, out, _ = run(capsys, "rules", "--explain", "DC096", "--format", "json")
    assert code == 0
    rules = json.loads(out)["rules"]
    assert len(rules) == 1 and rules[0]["boundary"] == "break_in_layer_loop"
    assert rules[0]["outcome"]["gb_id"] == "GB7000"
