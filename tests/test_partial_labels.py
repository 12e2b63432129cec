"""Names of known values: Value.key() holds them, so two different values must never share one
(two TopK allocations with different arguments were merged when names were a repr cut at 80)."""

from __future__ import annotations

from dynacheck.static.partial_values import Ref, known_name
from dynacheck.static.value_types import Value


def _alloc(kwargs):
    return Ref(Value("inst", "sglang.srt.layers.moe.topk", "TopK", expr=("c", None, (), kwargs)))


def test_two_allocations_of_one_class_get_different_names_and_one_allocation_one_name():
    grouped = _alloc((("use_grouped_topk", ("k", True)),))
    plain = _alloc((("use_grouped_topk", ("k", False)),))
    assert known_name((grouped,)) != known_name((plain,))
    assert known_name((grouped,)) == known_name((grouped,))
    assert "TopK" in known_name((plain,))


def test_long_names_stay_distinct_and_bounded():
    first = known_name(tuple(f"value-{i}-" + "x" * 20 for i in range(10)))
    second = known_name(tuple(f"value-{i}-" + "x" * 20 for i in range(1, 11)))
    assert first != second and len(first) <= 90 and len(second) <= 90
    assert known_name((1,)) == "['1']"  # short ones are the plain text
