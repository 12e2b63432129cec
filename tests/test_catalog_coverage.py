"""Every row of the FIELD_NOTES Dynamo table is covered by a rule or a documented quiet fixture."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dynacheck.catalog import load_catalog

FIXTURES = Path(__file__).parent / "fixtures" / "rules"
FIELD_NOTES = Path(__file__).resolve().parents[1] / "docs" / "dynamo-semantics.md"  # the table, in this repo

# (first cell of the FIELD_NOTES row, GB ids the row names, rules that cover it, quiet fixtures that document it)
ROWS = [
    ("`subprocess.check_output`/`run`, `os.system`", {"GB0007"}, ["DC001", "DC002"], []),
    ("`functools.cache`/`lru_cache` around any of these, cold **or pre-warmed**", set(), ["DC001", "DC070"], []),
    ("`lock.acquire()` / `with threading.Lock():`", {"GB0156", "GB0142"}, ["DC010", "DC011", "DC012"], []),
    ("`logging` calls / `print`", {"GB0291", "GB0059"}, ["DC030", "DC031", "DC032"], []),
    ("`time.time()`, `perf_counter()`", {"GB0007"}, ["DC040"], []),
    (
        "`open().read()`, `os.path.exists`, `importlib.import_module`, ctypes, `datetime.now()`",
        {"GB0059", "GB0007", "GB0156"},
        ["DC020", "DC021", "DC022", "DC060", "DC041"],
        [],
    ),
    ("C-extension (pybind, tvm-ffi) function that is not a torch op", {"GB0007", "GB0156"}, ["DC062", "DC071"], []),
    ("`t.item()`; `if t.item() > 0:`", {"GB0124"}, ["DC050"], []),
    ("float / int `t.tolist()`", {"GB0109", "GB0033"}, ["DC051"], []),
    (
        "`os.environ.get`, generators, global dict write",
        set(),
        [],
        ["rulefx.nobreak:NoBreak.forward", "rulefx.process:OsSystemQuiet.forward"],
    ),
    ("`torch.compiler.disable` function", {"GB0098"}, ["DC090"], []),
    ("`allow_in_graph` / `nonstrict_trace`", set(), ["DC093", "DC094"], []),
    ("`assume_constant_result`", set(), ["DC092"], []),
    (
        "`torch.library.custom_op` + `register_fake` (or `leaf_function` + fake)",
        set(),
        [],
        ["rulefx.boundaries:NoFakeQuiet.forward", "rulefx.jit:BuildQuiet.forward"],
    ),
    ("`custom_op` without a fake impl", {"GB4315"}, ["DC091"], []),
    ("side effect under `if not torch.compiler.is_compiling():`", set(), ["DC095"], []),
    ("break inside `for layer in self.layers:`", {"GB7000"}, ["DC096"], []),
]


def catalogue_gb_ids() -> set[str]:
    """GB ids the catalogue carries, as outcome ids or named in an outcome's detail."""
    ids: set[str] = set()
    for rule in load_catalog().rules:
        ids.add(rule.outcome.gb_id)
        ids.update(re.findall(r"GB\d{4}", rule.outcome.detail + " " + rule.why))
    ids.discard("")
    return ids


def fixture_exists(entry: str) -> bool:
    module, qual = entry.split(":")
    path = FIXTURES.joinpath(*module.split(".")).with_suffix(".py")
    class_name = qual.split(".")[0]
    return path.is_file() and f"class {class_name}(" in path.read_text(encoding="utf-8")


@pytest.mark.parametrize("row", ROWS, ids=[r[0][:40] for r in ROWS])
def test_row_is_covered(row):
    _, gb_ids, rule_ids, quiet = row
    catalog = load_catalog()
    assert rule_ids or quiet, "a row needs a rule or a documented quiet fixture"
    for rule_id in rule_ids:
        catalog.get(rule_id)
    for entry in quiet:
        assert fixture_exists(entry), entry
    covered = {catalog.get(r).outcome.gb_id for r in rule_ids}
    for rule_id in rule_ids:
        covered.update(re.findall(r"GB\d{4}", catalog.get(rule_id).outcome.detail))
    assert gb_ids <= covered, f"GB ids {sorted(gb_ids - covered)} of this row are not carried by its rules"


def test_every_rule_has_existing_fire_and_quiet_fixtures():
    for rule in load_catalog().rules:
        assert rule.fixture_fire and rule.fixture_quiet, rule.id
        assert rule.fixture_fire != rule.fixture_quiet, rule.id
        assert fixture_exists(rule.fixture_fire), f"{rule.id}: {rule.fixture_fire}"
        assert fixture_exists(rule.fixture_quiet), f"{rule.id}: {rule.fixture_quiet}"


def test_every_family_file_of_the_architecture_exists():
    families = set(load_catalog().families())
    assert {"process", "locks", "io", "logging", "time", "data_dependent", "extension", "jit", "cuda_graph"} <= families


def test_every_fix_list_leads_with_a_sound_fix_and_explains_unsound_ones():
    for rule in load_catalog().rules:
        assert rule.fixes[0].sound, rule.id
        for fix in rule.fixes:
            if not fix.sound:
                assert fix.text.lower().startswith("unsound"), f"{rule.id} {fix.kind}: say why it is unsound"


@pytest.mark.skipif(not FIELD_NOTES.is_file(), reason="docs/dynamo-semantics.md is missing from this checkout")
def test_rows_match_the_field_notes_table():
    text = FIELD_NOTES.read_text(encoding="utf-8")
    table = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line][1:]
    first_cells = [line.split(" | ")[0][2:].strip() for line in table]
    assert first_cells == [row[0] for row in ROWS]
    table_ids = set(re.findall(r"GB\d{4}", "\n".join(table)))
    assert table_ids <= catalogue_gb_ids(), f"missing from the catalogue: {sorted(table_ids - catalogue_gb_ids())}"
