"""The gate over the pinned real wheels: a stable baseline that holds the flagship hazard."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dynacheck.cli import main

PINNED = ("sglang==0.5.9", "flashinfer-python==0.6.3")


def run(argv: list[str], capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        main(argv)
    out, err = capsys.readouterr()
    return info.value.code, out + err


@pytest.mark.wheels
@pytest.mark.slow
def test_baseline_over_the_pinned_wheels_is_stable_and_green(pinned_targets, tmp_path: Path, capsys) -> None:
    config = tmp_path / "pyproject.toml"
    config.write_text(
        "[tool.dynacheck]\n"
        f"targets = {json.dumps(list(PINNED))}\n"
        'preset = "glm5"\nbaseline = "base.json"\nfail_on = "info"\n',
        encoding="utf-8",
    )
    code, text = run(["gate", "--config", str(config), "--offline", "--update-baseline"], capsys)
    assert code == 0, text
    first = (tmp_path / "base.json").read_bytes()
    code, text = run(["gate", "--config", str(config), "--offline", "--update-baseline"], capsys)
    assert code == 0 and "already up to date" in text
    assert (tmp_path / "base.json").read_bytes() == first

    data = json.loads(first)
    assert [(t["spec"], t["version"]) for t in data["targets"]] == [("sglang==0.5.9", "0.5.9"), ("flashinfer-python==0.6.3", "0.6.3")]
    flagship = [
        r for r in data["findings"]
        if r["callee"] == "subprocess.check_output" and r["function"] == "flashinfer.jit.cpp_ext.get_cuda_version"
    ]
    assert flagship and flagship[0]["gb_id"] == "GB0007" and flagship[0]["fatal_under_fullgraph"] is True
    assert str(tmp_path) not in first.decode() and '"line"' not in first.decode()

    code, text = run(["gate", "--config", str(config), "--offline"], capsys)
    assert code == 0, text
    assert "0 added, 0 removed, 0 changed" in text
