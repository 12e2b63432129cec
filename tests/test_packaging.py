"""The wheel must carry every subpackage and the rule catalogue (a non-editable install works too)."""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def test_every_subpackage_is_listed_for_the_wheel():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "dynacheck").rglob("__init__.py")}
    on_disk |= {"dynacheck.dynamic._inject"} if (ROOT / "dynacheck/dynamic/_inject").is_dir() else set()
    assert on_disk - listed == set(), "add these to [tool.setuptools] packages"
    assert config["package-dir"]["dynacheck.rules_data"] == "rules"
    assert sorted(p.name for p in (ROOT / "rules").glob("*.toml"))
