"""`[tool.dynacheck]` in a pyproject.toml, merged with command-line options.

The gate in CI reads its targets, entries, threshold, ignores and baseline path from the
project's pyproject so the workflow line stays `dynacheck gate`. Paths in the file are taken
relative to the file's folder, so the gate gives the same answer from any working directory.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - python 3.10
    import tomli as tomllib

from dynacheck.errors import UserError
from dynacheck.readers import read_input_text
from dynacheck.model import SEVERITIES

DEFAULT_BASELINE = "dynacheck-baseline.json"
GATE_FORMATS = ("terminal", "json", "markdown", "github", "sarif")
_LIST_KEYS = ("targets", "entries", "ignore")
_TEXT_KEYS = ("preset", "baseline", "format")
_BOOL_KEYS = ("include_conditional",)
KNOWN_KEYS = (*_LIST_KEYS, *_TEXT_KEYS, *_BOOL_KEYS, "fail_on")


@dataclass(frozen=True)
class GateConfig:
    """What to scan and how strict the gate is; `root` is where relative paths start."""

    targets: tuple[str, ...] = ()
    entries: tuple[str, ...] = ()
    preset: str | None = None
    fail_on: str = "error"
    ignore: tuple[str, ...] = ()
    baseline: str = DEFAULT_BASELINE
    format: str = "terminal"
    root: Path = field(default_factory=Path.cwd)
    source: str = ""  # the file the settings came from ("" for defaults only)
    targets_root: Path | None = None  # where target paths start when not `root` (given on the command line)
    include_conditional: bool = False  # count findings that hold only under other flags/env toward --fail-on

    def baseline_path(self) -> Path:
        return _under(self.root, self.baseline)

    def target_specs_for_scan(self) -> list[str]:
        """Specs as the scanner should see them: a spec naming a folder or file under `root` made absolute."""
        specs = []
        for spec in self.targets:
            candidate = _under(self.targets_root or self.root, spec)
            specs.append(str(candidate) if _looks_like_path(spec) and candidate.exists() else spec)
        return specs


def load_config(config_file: str | Path | None = None, start: Path | None = None) -> GateConfig:
    """Settings from `config_file`, else from the nearest pyproject.toml with a [tool.dynacheck] table."""
    if config_file is not None:
        path = Path(config_file)
        if not path.is_file():
            raise UserError(f"Config file {path} does not exist.", "Pass a pyproject.toml with a [tool.dynacheck] table.")
        table = _read_table(path)
        if table is None:
            raise UserError(f"Config file {path} has no [tool.dynacheck] table.", "Add one, or leave out --config.")
        return parse_table(table, path)
    found = find_config(start or Path.cwd())
    if found is None:
        return GateConfig(root=(start or Path.cwd()).resolve())
    path, table = found
    return parse_table(table, path)


def find_config(start: Path) -> tuple[Path, dict[str, Any]] | None:
    """Walk up from `start` to the first pyproject.toml that has a [tool.dynacheck] table."""
    for folder in (start.resolve(), *start.resolve().parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            table = _read_table(candidate)
            if table is not None:
                return candidate, table
    return None


def parse_table(table: dict[str, Any], path: Path) -> GateConfig:
    """Check every key and value of a [tool.dynacheck] table; a bad one is named in the error."""
    where = f"{path} [tool.dynacheck]"
    unknown = sorted(set(table) - set(KNOWN_KEYS))
    if unknown:
        raise UserError(
            f"Unknown key '{unknown[0]}' in {where}.", f"Known keys: {', '.join(KNOWN_KEYS)}."
        )
    values: dict[str, Any] = {}
    for key in _LIST_KEYS:
        if key in table:
            values[key] = _string_list(table[key], key, where)
    for key in _TEXT_KEYS:
        if key in table:
            values[key] = _string(table[key], key, where)
    for key in _BOOL_KEYS:
        if key in table:
            if not isinstance(table[key], bool):
                raise UserError(f"Bad value for {key} in {where}: expected true or false.")
            values[key] = table[key]
    if "fail_on" in table:
        values["fail_on"] = _string(table["fail_on"], "fail_on", where)
    config = GateConfig(root=path.resolve().parent, source=str(path), **values)
    return validate(config, where)


def with_overrides(config: GateConfig, **options: Any) -> GateConfig:
    """Command-line values win; empty tuples and None mean 'not given'. CLI paths stay relative to cwd."""
    changes: dict[str, Any] = {}
    for key, value in options.items():
        if value is None or value == ():
            continue
        if key == "baseline":
            value = str(Path(value).resolve())
        elif key == "targets":
            changes["targets_root"] = Path.cwd().resolve()
        changes[key] = tuple(value) if isinstance(value, (list, tuple)) else value
    return validate(replace(config, **changes), "the command line")


def validate(config: GateConfig, where: str) -> GateConfig:
    if config.fail_on not in SEVERITIES:
        raise UserError(
            f"Bad value '{config.fail_on}' for fail_on in {where}.", f"Use one of: {', '.join(SEVERITIES)}."
        )
    if config.format not in GATE_FORMATS:
        raise UserError(
            f"Bad value '{config.format}' for format in {where}.", f"Use one of: {', '.join(GATE_FORMATS)}."
        )
    for rule in config.ignore:
        check_rule_id(rule, f"ignore in {where}")
    return config


def check_rule_id(rule: str, where: str) -> None:
    """A rule id the catalogue does not know is an error naming the closest ones (a typo ignores nothing)."""
    if rule == "*":
        return
    if not (rule.startswith("DC") and rule[2:].isdigit()):
        raise UserError(f"Bad rule id '{rule}' in {where}.", "Rule ids look like DC001; `dynacheck rules` lists them.")
    from dynacheck.catalog import load_catalog

    try:
        load_catalog().get(rule)
    except UserError as exc:
        raise UserError(f"Unknown rule id '{rule}' in {where}.", exc.hint) from None


def _read_table(path: Path) -> dict[str, Any] | None:
    text = read_input_text(path, "config", limit=16 * 1024 * 1024)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"Config file {path} is not valid TOML: {exc}.") from None
    except RecursionError:
        raise UserError(f"Config file {path} nests TOML too deeply.") from None
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise UserError(f"[tool] in {path} must be a table, not {type(tool).__name__}.",
                        "Write `[tool.dynacheck]` as a table header.")
    table = tool.get("dynacheck")
    if table is not None and not isinstance(table, dict):
        raise UserError(f"[tool.dynacheck] in {path} must be a table.")
    return table


def _string_list(value: Any, key: str, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise UserError(f"Bad value for {key} in {where}: expected a list of non-empty strings.")
    return tuple(v.strip() for v in value)


def _string(value: Any, key: str, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"Bad value for {key} in {where}: expected a non-empty string.")
    return value.strip()


def _under(root: Path, value: str) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else root / path


def _looks_like_path(spec: str) -> bool:
    """A pip requirement never holds a path separator or starts with a dot; a folder or wheel may."""
    return "/" in spec or spec.startswith(".") or spec.endswith(".whl") or not any(c in spec for c in "=<>!~[ ")
