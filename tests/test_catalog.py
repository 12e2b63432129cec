"""The catalogue loader: validation of rule files, lookups the engine relies on."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from dynacheck.catalog import CatalogError, build_catalog, glob_specificity, load_catalog
from dynacheck.errors import UserError
from dynacheck.static.dynamo_registry import RegistryEntry

GOOD = """
[[rule]]
id = "{id}"
name = "{name}"
family = "{family}"
title = "a title"
severity = "error"
calls = {calls}
why = "why"
example = "x()"
fixture_fire = "pkg.mod:Fire.forward"
fixture_quiet = "pkg.mod:Quiet.forward"

[rule.outcome]
kind = "graph_break"
gb_id = "GB0007"
gb_type = "from toml"
explanation = "toml explanation"
fatal_under_fullgraph = true

[[rule.fixes]]
kind = "custom_op"
text = "wrap it"
sound = true
"""


def write(folder: Path, family: str, body: str) -> Path:
    path = folder / f"{family}.toml"
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


def rule_text(id="DC900", name="x-rule", family="fam", calls='["a.b"]') -> str:
    return GOOD.format(id=id, name=name, family=family, calls=calls)


def test_good_file_loads_with_toml_outcome(tmp_path):
    catalog = build_catalog([write(tmp_path, "fam", rule_text())])
    rule = catalog.get("DC900")
    assert rule.family == "fam"
    assert rule.outcome.gb_id == "GB0007"
    assert rule.outcome.gb_type == "from toml"
    assert rule.fixes[0].kind == "custom_op" and rule.fixes[0].sound
    assert catalog.gb_source == "catalogue"


def test_registry_wins_over_toml_texts(tmp_path):
    registry = {"GB0007": RegistryEntry("GB0007", "from torch", "torch says", ("hint 1",))}
    catalog = build_catalog([write(tmp_path, "fam", rule_text())], registry, "2.99")
    outcome = catalog.get("DC900").outcome
    assert (outcome.gb_type, outcome.explanation, outcome.hints) == ("from torch", "torch says", ("hint 1",))
    assert catalog.gb_source == "torch 2.99"


def test_registry_placeholder_explanation_keeps_toml_text(tmp_path):
    registry = {"GB0007": RegistryEntry("GB0007", "from torch", "", ())}
    outcome = build_catalog([write(tmp_path, "fam", rule_text())], registry, "2.99").get("DC900").outcome
    assert outcome.gb_type == "from torch"
    assert outcome.explanation == "toml explanation"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda s: s.replace('title = "a title"', 'title = "a title"\ncolour = "red"'), "unknown key(s) colour"),
        (lambda s: s.replace('severity = "error"\n', ""), "missing severity"),
        (lambda s: s.replace('severity = "error"', 'severity = "fatal"'), "severity must be one of"),
        (lambda s: s.replace('kind = "graph_break"', 'kind = "explodes"'), "outcome kind 'explodes'"),
        (lambda s: s.replace('gb_id = "GB0007"', 'gb_id = "7"'), "GB####"),
        (lambda s: s.replace('kind = "custom_op"', 'kind = "pray"'), "fix 1 kind 'pray'"),
        (lambda s: s.replace("sound = true", 'sound = "yes"'), "sound = true|false"),
        (lambda s: s.replace('calls = ["a.b"]', ""), "must match something"),
        (lambda s: s.replace('id = "DC900"', 'id = "X1"'), "DC###"),
        (lambda s: s.replace("fatal_under_fullgraph = true", "fatal_under_fullgraph = 1"), "true or false"),
        (lambda s: s + "\n[[rule.fixes]]\nkind = 'remove'\n", "fix 2 has unknown"),
        (lambda s: s.replace("[rule.outcome]", "[rule.outcome]\nseverity = 'x'"), "unknown outcome key(s) severity"),
        (lambda s: s.replace('family = "fam"', 'family = "other"'), "does not match the file name"),
        (lambda s: "title = 'loose'\n" + s, "unknown top-level key(s) title"),
        (lambda s: s.replace('example = "x()"', "example = "), "not valid TOML"),
    ],
)
def test_validation_errors_name_file_and_rule(tmp_path, edit, message):
    path = write(tmp_path, "fam", edit(rule_text()))
    with pytest.raises(CatalogError) as info:
        build_catalog([path])
    text = str(info.value)
    assert message in text
    assert "fam.toml" in text
    assert isinstance(info.value, UserError)


def test_duplicate_ids_across_files_are_refused(tmp_path):
    one = write(tmp_path, "fam", rule_text())
    two = write(tmp_path, "other", rule_text(family="other", name="y-rule"))
    with pytest.raises(CatalogError, match=r"other.toml, rule DC900\): duplicate id \(also in fam.toml\)"):
        build_catalog([one, two])


def test_duplicate_exact_call_across_rules_is_refused(tmp_path):
    body = rule_text() + rule_text(id="DC901", name="y-rule")
    with pytest.raises(CatalogError, match="a.b.*also claimed by DC900"):
        build_catalog([write(tmp_path, "fam", body)])


def test_most_specific_glob_wins_regardless_of_order(tmp_path):
    body = (
        rule_text(id="DC900", name="broad", calls='["pkg.*"]')
        + rule_text(id="DC901", name="mid", calls='["pkg.Logger.*"]')
        + rule_text(id="DC902", name="exact", calls='["pkg.Logger.info"]')
        + rule_text(id="DC903", name="other", calls='["pkg.Lo?ger.warn"]')
    )
    catalog = build_catalog([write(tmp_path, "fam", body)])
    assert catalog.match_call("pkg.Logger.info").id == "DC902"
    assert catalog.match_call("pkg.Logger.debug").id == "DC901"
    assert catalog.match_call("pkg.Logger.warn").id == "DC903"
    assert catalog.match_call("pkg.other").id == "DC900"
    assert catalog.match_call("pkgx.other") is None
    assert catalog.match_call("other.pkg.Logger.info") is None  # globs anchor at the start


def test_glob_specificity_orders_literals_then_wildcards():
    assert glob_specificity("a.b.c") > glob_specificity("a.b.*") > glob_specificity("a.*")
    assert glob_specificity("a.bc?") > glob_specificity("a.b*c*")  # same literals, fewer wildcards


def test_equal_specificity_is_decided_by_rule_id(tmp_path):
    body = rule_text(id="DC905", name="late", calls='["m.a*"]') + rule_text(id="DC904", name="early", calls='["m.*b"]')
    catalog = build_catalog([write(tmp_path, "fam", body)])
    assert catalog.match_call("m.ab").id == "DC904"


def test_unknown_id_suggests_closest(tmp_path):
    catalog = build_catalog([write(tmp_path, "fam", rule_text())])
    with pytest.raises(UserError, match=r"Unknown rule id 'DC09'.*Closest: DC900"):
        catalog.get("DC09")
    assert catalog.get("dc900").id == "DC900"
    assert catalog.get("x-rule").id == "DC900"


def test_shipped_catalogue_matches_the_flagship_calls():
    catalog = load_catalog()
    assert catalog.match_call("subprocess.check_output").id == "DC001"
    assert catalog.match_call("threading.Lock").outcome.gb_id == "GB0007"
    assert catalog.match_call("threading.Lock.acquire").outcome.gb_id == "GB0156"
    assert catalog.match_call("threading.Lock.__enter__").outcome.gb_id == "GB0142"
    assert catalog.match_call("logging.Logger.warning").outcome.gb_id == "GB0291"
    assert catalog.match_call("builtins.print").outcome.gb_id == "GB0059"
    assert catalog.match_call("time.perf_counter").outcome.gb_id == "GB0007"
    assert catalog.match_call("os.environ.get") is None
    assert catalog.match_call("math.sqrt") is None


def test_shipped_rules_are_sorted_and_unique():
    ids = [r.id for r in load_catalog().rules]
    assert ids == sorted(ids) and len(ids) == len(set(ids))


def test_other_spellings_of_stdlib_names_match_the_public_rule():
    catalog = load_catalog()
    assert catalog.match_call("posixpath.exists").id == "DC021"
    assert catalog.match_call("pathlib.PosixPath.exists").id == "DC021"
    assert catalog.match_call("_thread.lock.acquire").id == "DC010"
    assert catalog.match_call("posixpath.join") is None


def test_match_call_pattern_names_the_pattern_that_fired():
    catalog = load_catalog()
    rule, pattern = catalog.match_call_pattern("logging.Logger.debug")
    assert (rule.id, pattern) == ("DC030", "logging.Logger.*")
    assert catalog.match_call_pattern("tvm_ffi.load_module")[1] == "tvm_ffi.load_module"
    assert catalog.match_call_pattern("tvm_ffi.get_global_func")[1] == "tvm_ffi.*"
    assert catalog.match_call_pattern("tvm_ffi.cpp.load_inline")[0].id == "DC070"


def test_methods_and_boundaries_are_looked_up_exactly():
    catalog = load_catalog()
    assert catalog.match_method("item").id == "DC050"
    assert catalog.match_method("tolist").id == "DC051"
    assert catalog.match_method("items") is None
    assert catalog.match_method("sum") is None
    assert catalog.boundary("disable").outcome.gb_id == "GB0098"
    assert catalog.boundary("custom_op_without_fake").outcome.kind == "hard_error"
    assert catalog.boundary("jit_kernel_call").id == "DC071"
    assert catalog.boundary("nope") is None


def test_every_boundary_kind_the_engine_can_report_has_a_rule():
    from dynacheck.catalog import BOUNDARIES

    catalog = load_catalog()
    assert all(catalog.boundary(kind) is not None for kind in BOUNDARIES)
