"""A census's workers share deferred bodies (static/body_exchange.py): a body one worker summarized
is read by the other instead of parsed, equal to what it would have made, and nothing but a
summary part is ever loaded from the exchange folder."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

from dynacheck.static.body_exchange import BodyExchange
from dynacheck.static.summary import summarize
from test_lazy_bodies import SOURCE, _plain


def _shared(tmp_path: Path, exchange: BodyExchange):
    summary = summarize(SOURCE, "pkg.mod", "mod.py", False)
    summary._exchange = (exchange, "key-of-the-bytes")
    return summary


def test_a_body_one_worker_summarized_is_taken_by_the_other(tmp_path):
    first, second = BodyExchange(tmp_path), BodyExchange(tmp_path)
    one = _shared(tmp_path, first)
    assert one.functions.get("Engine.run") is not None  # parsed here, and given
    assert first.taken == 0 and len(os.listdir(tmp_path)) == 1
    two = _shared(tmp_path, second)
    assert two.functions.get("Engine.run") is not None
    assert second.taken == 1  # read, not parsed
    eager = summarize(SOURCE, "pkg.mod", "mod.py", False, defer=False)
    assert _plain(two) == _plain(eager) == _plain(one)


def test_the_exchange_loads_summary_parts_only(tmp_path):
    exchange = BodyExchange(tmp_path)
    assert exchange.take("key", "Engine") is None  # nothing there
    with open(exchange._path("key", "Engine"), "wb") as handle:
        pickle.dump(os.system, handle)  # a planted file: a callable, not a part
    assert exchange.take("key", "Engine") is None
    with open(exchange._path("key", "probe"), "wb") as handle:
        handle.write(b"not a pickle")
    assert exchange.take("key", "probe") is None and exchange.taken == 0
