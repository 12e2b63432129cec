"""Shared fixtures: fixture folders, a per-session summary cache, and the pinned real wheels."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
PINNED = ("sglang==0.5.9", "flashinfer-python==0.6.3")


@pytest.fixture(scope="session", autouse=True)
def private_state(tmp_path_factory) -> Path:
    """The signing key of the cache lives in a session folder, never in the user's home."""
    folder = tmp_path_factory.mktemp("dynacheck-state")
    folder.chmod(0o700)
    previous = os.environ.get("DYNACHECK_STATE")
    os.environ["DYNACHECK_STATE"] = str(folder)
    yield folder
    if previous is None:
        os.environ.pop("DYNACHECK_STATE", None)
    else:
        os.environ["DYNACHECK_STATE"] = previous


@pytest.fixture(scope="session")
def scan_cache(tmp_path_factory) -> Path:
    """One summary cache for the session: parsing each fixture file once keeps the suite quick."""
    return tmp_path_factory.mktemp("dynacheck-cache")


@pytest.fixture(scope="session")
def pinned_targets():
    """The pinned sglang/flashinfer wheels, from the wheel cache (downloaded once when online)."""
    from dynacheck.errors import UserError
    from dynacheck.sources.resolve import resolve_target

    try:
        return [resolve_target(spec) for spec in PINNED]
    except UserError as exc:  # offline and not cached
        pytest.skip(f"pinned wheels unavailable: {exc}")
