"""The evaluator's memo tables (static/memo.py): a fork and a drop give what a look at every entry gives."""

from __future__ import annotations

import pickle
import random

from dynacheck.deploy.facts import ALL_FACTS, ARCH_FACT, GPU_FACT, QUANT_FACT
from dynacheck.static.memo import Memo, drop_reading


def _every_entry_kept(table: dict, dirty: int) -> dict:
    """What a fork kept before Memo: each tuple entry whose reads miss `dirty`."""
    return {k: v for k, v in table.items() if isinstance(v, tuple) and not v[-1] & dirty}


def _random_writes(seed: int) -> tuple[Memo, dict]:
    """The same writes into a Memo and a plain dict: new keys, rewrites that add or lose reads,
    setdefault, update, deletes, and objects that are not tuples."""
    rng = random.Random(seed)
    memo, plain = Memo(), {}
    reads = (0, 0, 0, GPU_FACT, QUANT_FACT, ARCH_FACT, GPU_FACT | QUANT_FACT, ALL_FACTS)
    for step in range(3000):
        key = ("k", rng.randrange(400))
        what = rng.random()
        if what < 0.6:
            entry = (step, rng.choice(reads))
            memo[key] = plain[key] = entry
        elif what < 0.7:
            entry = (step, rng.choice(reads))
            assert memo.setdefault(key, entry) == plain.setdefault(key, entry)
        elif what < 0.8:
            more = {("k", rng.randrange(400)): (step, rng.choice(reads)) for _ in range(3)}
            memo.update(more)
            plain.update(more)
        elif what < 0.9 and key in plain:
            del memo[key], plain[key]
        else:
            memo[key] = plain[key] = object() if rng.random() < 0.5 else (step, 0)
    return memo, plain


def test_a_fork_keeps_what_a_look_at_every_entry_keeps():
    for seed in range(6):
        memo, plain = _random_writes(seed)
        assert dict(memo) == plain
        for dirty in (GPU_FACT, QUANT_FACT, ARCH_FACT, GPU_FACT | QUANT_FACT, ALL_FACTS):
            child = memo.kept(dirty)
            assert isinstance(child, Memo)
            assert dict(child) == _every_entry_kept(plain, dirty)
            # the child's own index is right too: a second fork of it equals a look at every entry
            assert dict(child.kept(GPU_FACT)) == _every_entry_kept(_every_entry_kept(plain, dirty), GPU_FACT)


def test_a_drop_deletes_what_a_look_at_every_entry_deletes():
    for seed in range(6):
        memo, plain = _random_writes(seed)
        reads = lambda entry: entry[-1] if isinstance(entry, tuple) else 0  # noqa: E731
        for facts in (ARCH_FACT, GPU_FACT, QUANT_FACT):
            drop_reading(memo, facts)
            drop_reading(plain, facts, reads)
            assert dict(memo) == plain
            # an entry written after a drop that reads the fact is dropped by the next one
            memo[("late", facts)] = plain[("late", facts)] = (0, facts)
            drop_reading(memo, facts)
            drop_reading(plain, facts, reads)
            assert ("late", facts) not in memo and dict(memo) == plain


def test_a_rewritten_entry_is_judged_by_what_it_holds_now():
    memo = Memo()
    memo["a"] = ((), GPU_FACT)
    memo["a"] = ((), 0)  # computed again without the GPU: a GPU fork keeps it
    memo["b"] = ((), 0)
    memo["b"] = ((), QUANT_FACT)  # computed again reading the quantization: a quant fork drops it
    assert dict(memo.kept(GPU_FACT)) == {"a": ((), 0), "b": ((), QUANT_FACT)}
    assert dict(memo.kept(QUANT_FACT)) == {"a": ((), 0)}


def test_a_memo_pickles_with_its_index():
    memo = Memo()
    memo["a"], memo["b"], memo["c"] = ((), GPU_FACT), ((), 0), object.__new__(object)
    back = pickle.loads(pickle.dumps(memo))
    assert set(back) == {"a", "b", "c"}
    assert dict(back.kept(GPU_FACT)) == {"b": ((), 0)}


def test_reading_only_gives_the_entries_whose_reads_are_within_the_facts_and_restore_fills_gaps():
    for seed in range(5):
        memo, plain = _random_writes(seed)
        for facts in (GPU_FACT, GPU_FACT | QUANT_FACT):
            expected = {k: v for k, v in plain.items() if isinstance(v, tuple) and v[-1] and not v[-1] & ~facts}
            assert memo.reading_only(facts) == expected
        child = memo.kept(GPU_FACT)
        lost = memo.reading_only(GPU_FACT)
        assert not set(lost) & set(child)
        child[next(iter(lost))] = ("recomputed", GPU_FACT)  # one the fork computed again stays its own
        child.restore(lost)
        assert child == {**_every_entry_kept(plain, GPU_FACT), **lost, next(iter(lost)): ("recomputed", GPU_FACT)}
        assert set(child.readers) >= set(lost)
