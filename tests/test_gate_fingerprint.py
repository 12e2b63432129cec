"""Fingerprints survive line moves and comments, and change when what the finding is changes."""

from __future__ import annotations

import dataclasses

from dynacheck.gate.fingerprint import fingerprint, normalize_code
from dynacheck.model import Finding, Hop, Outcome, Site


def make_finding(**site_changes) -> Finding:
    site = Site(
        file="gatefx/helpers.py",
        line=40,
        function="gatefx.helpers.cuda_version",
        callee="subprocess.check_output",
        code='    out = subprocess.check_output(["nvcc", "--version"])',
    )
    site = dataclasses.replace(site, **site_changes)
    chain = (
        Hop("gatefx.model.Model.forward", "gatefx/model.py", 10, "entry"),
        Hop("gatefx.helpers.quantize", "gatefx/helpers.py", 20, "import"),
        Hop("gatefx.helpers.cuda_version", "gatefx/helpers.py", 30, "local definition"),
    )
    return Finding(
        rule="DC001",
        title="process spawn",
        severity="error",
        site=site,
        chain=chain,
        outcome=Outcome(kind="graph_break", gb_id="GB0007", fatal_under_fullgraph=True),
    )


def with_chain_lines(finding: Finding, shift: int, folder: str = "") -> Finding:
    chain = tuple(
        dataclasses.replace(hop, line=hop.line + shift, file=folder + hop.file) for hop in finding.chain
    )
    return dataclasses.replace(finding, chain=chain)


def test_fingerprint_is_short_hex() -> None:
    value = fingerprint(make_finding())
    assert len(value) == 16
    int(value, 16)


def test_line_moves_and_paths_do_not_change_it() -> None:
    base = make_finding()
    moved = with_chain_lines(make_finding(line=97, column=8, file="src/gatefx/helpers.py"), 13, "src/")
    assert fingerprint(moved) == fingerprint(base)


def test_whitespace_and_comments_on_the_hazard_line_do_not_change_it() -> None:
    base = make_finding()
    reformatted = make_finding(
        code='\tout   =  subprocess.check_output( ["nvcc",   "--version"] )  # dynacheck: ignore[DC001] why'
    )
    assert fingerprint(reformatted) == fingerprint(base)


def test_a_different_callee_changes_it() -> None:
    assert fingerprint(make_finding(callee="subprocess.run")) != fingerprint(make_finding())


def test_a_different_rule_or_chain_changes_it() -> None:
    base = make_finding()
    other_rule = dataclasses.replace(base, rule="DC002")
    other_chain = dataclasses.replace(
        base, chain=base.chain[:1] + (dataclasses.replace(base.chain[1], function="gatefx.helpers.other"),) + base.chain[2:]
    )
    assert len({fingerprint(base), fingerprint(other_rule), fingerprint(other_chain)}) == 3


def test_a_different_hazard_line_changes_it() -> None:
    other = make_finding(code='    out = subprocess.check_output(["gcc", "--version"])')
    assert fingerprint(other) != fingerprint(make_finding())


def test_normalize_keeps_hash_and_spaces_inside_strings() -> None:
    assert normalize_code('x = run(["a #b"])  # comment') == 'x=run(["a #b"])'
    assert normalize_code("out = check_output(  # trailing") == "out=check_output("
    assert normalize_code('a = "it\\"s # x"  # y') == 'a="it\\"s # x"'
    assert normalize_code("return  not   x") == "return not x"


def test_string_contents_still_matter() -> None:
    assert normalize_code('run(["a b"])') != normalize_code('run(["ab"])')


def test_repeated_identical_call_in_one_function_gets_distinct_stable_fingerprints() -> None:
    from dynacheck.gate.fingerprint import assign_fingerprints

    first, second = make_finding(line=97), make_finding(line=130)
    assigned = assign_fingerprints([second, first])
    assert assigned[1].fingerprint == fingerprint(first)  # the earlier line keeps the plain value
    assert assigned[0].fingerprint != assigned[1].fingerprint
    assert [f.site.line for f in assigned] == [130, 97]  # order of the input kept
    moved = assign_fingerprints([make_finding(line=140), make_finding(line=210)])
    assert {f.fingerprint for f in moved} == {f.fingerprint for f in assigned}
    assert assign_fingerprints(assigned) == assigned  # recomputed from content: idempotent


def test_unique_findings_keep_the_plain_fingerprint() -> None:
    from dynacheck.gate.fingerprint import assign_fingerprints

    one, other = make_finding(), make_finding(callee="subprocess.run")
    assert [f.fingerprint for f in assign_fingerprints([one, other])] == [fingerprint(one), fingerprint(other)]
