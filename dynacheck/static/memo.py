"""Memo tables that know which of their entries read a deployment fact.

Each entry of an evaluator's memo keeps, last in its tuple, the deployment facts its computation read
(facts.GPU_FACT, QUANT_FACT, ARCH_FACT). A census forks an evaluator from one deployment to the next
and drops, in place, what read the model class between two forwards; both used to look at every entry
(about 130,000 per evaluator on sglang 0.5.9, of which 5-10 % read any fact). A `Memo` keeps the keys
of the entries that read something, so a fork is a dict copy less those, and a drop looks at those only.
"""

from __future__ import annotations

from typing import Callable


def entry_reads(entry) -> int:
    """The facts a memo entry read: the last item of a tuple entry; anything else (an object kept
    in the table, such as a deployment's TensorHazards in `Evaluator.sites`) reads none."""
    return entry[-1] if isinstance(entry, tuple) and entry else 0


class Memo(dict):
    """A dict whose `readers` holds every key whose entry read a fact, and `objects` every key whose
    entry is not a tuple (both supersets: a key rewritten, or deleted, may stay; what uses them
    checks the entry)."""

    __slots__ = ("readers", "objects")

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.readers: set = {key for key, entry in self.items() if entry_reads(entry)}
        self.objects: set = {key for key, entry in self.items() if not isinstance(entry, tuple)}

    def __setitem__(self, key, entry) -> None:
        dict.__setitem__(self, key, entry)
        if isinstance(entry, tuple):
            if entry and entry[-1]:
                self.readers.add(key)
        else:
            self.objects.add(key)

    def setdefault(self, key, entry=None):
        if key not in self:
            self[key] = entry
        return dict.__getitem__(self, key)

    def update(self, *args, **kwargs) -> None:  # noqa: D102 - dict's, through __setitem__
        for key, entry in dict(*args, **kwargs).items():
            self[key] = entry

    def __reduce__(self):
        return (Memo, (dict(self),))

    def kept(self, dirty: int) -> "Memo":
        """A copy of the tuple entries that read no fact in `dirty` (Evaluator.fork)."""
        child = Memo.__new__(Memo)
        dict.update(child, self)
        child.readers, child.objects = set(), set()
        for key in self.objects:
            if key in child and not isinstance(dict.__getitem__(child, key), tuple):
                dict.__delitem__(child, key)
        for key in self.readers:
            reads = entry_reads(dict.__getitem__(self, key)) if key in self else 0
            if reads & dirty:
                dict.__delitem__(child, key)
            elif reads:
                child.readers.add(key)
        return child

    def reading_only(self, facts: int) -> dict:
        """The tuple entries that read some of `facts` and nothing else (a GPU's own answers, kept for a
        later deployment on the same GPU: ScanSession.engine)."""
        out = {}
        for key in self.readers:
            entry = dict.get(self, key)
            reads = entry_reads(entry) if entry is not None else 0
            if reads and not reads & ~facts:
                out[key] = entry
        return out

    def restore(self, entries: dict) -> None:
        """Add the entries whose key this table lacks (what `reading_only` kept, on the deployment it
        holds for)."""
        for key, entry in entries.items():
            if key not in self:
                self[key] = entry

    def drop(self, facts: int) -> None:
        """Delete, in place, the entries that read any of `facts`."""
        for key in list(self.readers):
            if key not in self:
                self.readers.discard(key)
                continue
            reads = entry_reads(dict.__getitem__(self, key))
            if reads & facts:
                dict.__delitem__(self, key)
                self.readers.discard(key)
            elif not reads:
                self.readers.discard(key)


def drop_reading(table: dict, facts: int, reads: Callable = lambda entry: entry[-1]) -> None:
    """Delete a memo table's entries that read any of `facts`: a Memo through its index, a plain table
    (the value hazards' and boundaries' few) by looking at each entry (its reads are what `reads` says)."""
    if isinstance(table, Memo):
        table.drop(facts)
        return
    for key in [key for key, entry in table.items() if reads(entry) & facts]:
        del table[key]
