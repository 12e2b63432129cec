"""The hazard catalogue: rules read from ``rules/*.toml``, matched against callees by the engine.

Rules are data (one TOML file per family) so that adding a hazard needs no code. A rule
matches external callables by fnmatch globs on fully qualified names (``calls``), method
names on receivers of unknown type (``methods``), or a Dynamo boundary the engine found
(``boundary``). Each rule carries Dynamo's outcome; where torch is installed, the GB type,
explanation and hints come from torch's own registry so they follow the installed version.
"""

from __future__ import annotations

import difflib
import functools
import importlib.resources
import sys
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Iterable, Mapping

from dynacheck.errors import UserError
from dynacheck.model import SEVERITIES, Outcome
from dynacheck.static import dynamo_registry

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

OUTCOME_KINDS = ("graph_break", "frame_skip", "recompile", "hard_error", "trace_time", "skipped_when_compiled")
FIX_KINDS = ("custom_op", "assume_constant_result", "hoist", "allow_in_graph", "prewarm", "guard", "remove", "disable")
# Boundaries the engine reports by kind (Catalog.boundary); each has exactly one rule.
BOUNDARIES = (
    "disable", "custom_op_without_fake", "assume_constant_result", "allow_in_graph",
    "nonstrict_trace", "skipped_when_compiled", "break_in_layer_loop", "jit_kernel_call",
    # value hazards (static/tensors.py): a tensor used as a Python value, or a construct Dynamo refuses
    "tensor_branch", "branch_on_tensor_scalar", "tensor_to_scalar", "tensor_in_math", "tensor_in_builtin",
    "tensor_repr", "tensor_formatted", "tensor_formatted_method", "data_dependent_shape", "one_hot_without_classes",
    "class_in_compiled_function", "int_tensor_tolist", "tensor_address_arithmetic",
)
_REQUIRED = ("id", "name", "family", "title", "severity", "outcome", "why", "fixes", "example")
_OPTIONAL = ("calls", "methods", "boundary", "fixture_fire", "fixture_quiet")
_OUTCOME_REQUIRED = ("kind", "fatal_under_fullgraph")
_OUTCOME_OPTIONAL = ("gb_id", "gb_type", "detail", "explanation", "hints", "by_torch")
_FIX_KEYS = ("kind", "text", "sound")
# Other spellings of the same callables (the module that really defines them); rules use the
# public spelling on the right.
_ALIASES = (
    ("posixpath.", "os.path."),
    ("ntpath.", "os.path."),
    ("genericpath.", "os.path."),
    ("pathlib.PosixPath.", "pathlib.Path."),
    ("pathlib.WindowsPath.", "pathlib.Path."),
    ("_io.", "io."),
    ("threading._RLock.", "threading.RLock."),
    ("_thread.lock.", "_thread.LockType."),
)


def canonical_name(qualname: str) -> str:
    """The public spelling of a callable's name, e.g. ``posixpath.exists`` -> ``os.path.exists``."""
    for prefix, public in _ALIASES:
        if qualname.startswith(prefix):
            return public + qualname[len(prefix) :]
    return qualname


@dataclass(frozen=True)
class FixTemplate:
    """A fix in the rule's preferred order; ``sound`` False marks one users ask for that does not work."""

    kind: str
    text: str
    sound: bool = True


@dataclass(frozen=True)
class Rule:
    id: str  # DC###
    name: str  # kebab-case slug, e.g. subprocess-in-compiled-code
    family: str
    title: str
    severity: str  # error | warning | info
    outcome: Outcome
    why: str
    fixes: tuple[FixTemplate, ...]
    example: str
    calls: tuple[str, ...] = ()
    methods: tuple[str, ...] = ()
    boundary: str = ""
    fixture_fire: str = ""
    fixture_quiet: str = ""
    source: str = ""  # the TOML file the rule came from
    gb_by_torch: tuple[tuple[str, str], ...] = ()  # (torch "major.minor", GB id) where that torch differs
    explained_by: str = "catalogue"  # where outcome.explanation came from: "catalogue" or "torch <version>"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "family": self.family,
            "title": self.title,
            "severity": self.severity,
            "calls": list(self.calls),
            "methods": list(self.methods),
            "boundary": self.boundary,
            "outcome": self.outcome.to_dict(),
            "explained_by": self.explained_by,
            "why": self.why,
            "fixes": [{"kind": f.kind, "text": f.text, "sound": f.sound} for f in self.fixes],
            "example": self.example,
            "fixture_fire": self.fixture_fire,
            "fixture_quiet": self.fixture_quiet,
            "gb_by_torch": dict(self.gb_by_torch),
        }


def glob_specificity(pattern: str) -> tuple[int, int, int]:
    """Rank a glob: more literal characters first, then fewer wildcards, then longer.

    ``logging.Logger.info`` beats ``logging.Logger.*`` beats ``logging.*``.
    """
    wildcards = sum(pattern.count(c) for c in "*?[")
    literal = len(pattern) - wildcards
    return literal, -wildcards, len(pattern)


@dataclass
class Catalog:
    """All rules, with the lookups the engine needs. Build with ``load_catalog`` or ``build_catalog``."""

    rules: tuple[Rule, ...]
    gb_source: str = "catalogue"  # "torch <version>" when GB texts came from the installed torch
    torch_version: str = ""
    _by_id: dict[str, Rule] = field(default_factory=dict, repr=False)
    _exact: dict[str, Rule] = field(default_factory=dict, repr=False)
    _globs: list[tuple[tuple[int, int, int], str, Rule]] = field(default_factory=list, repr=False)
    _methods: dict[str, Rule] = field(default_factory=dict, repr=False)
    _boundaries: dict[str, Rule] = field(default_factory=dict, repr=False)
    _call_cache: dict[str, tuple[Rule, str] | None] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for rule in self.rules:  # rules arrive sorted by id: the first claimant of a key wins ties
            self._by_id[rule.id] = rule
            for pattern in rule.calls:
                if any(c in pattern for c in "*?["):
                    self._globs.append((glob_specificity(pattern), pattern, rule))
                else:
                    self._exact.setdefault(pattern, rule)
            for name in rule.methods:
                self._methods.setdefault(name, rule)
            if rule.boundary:
                self._boundaries.setdefault(rule.boundary, rule)
        # most specific first; the sort is stable, so equal ranks keep rule-id order
        self._globs.sort(key=lambda item: item[0], reverse=True)

    def get(self, rule_id: str) -> Rule:
        """The rule with this id; a UserError naming the closest ids when there is none."""
        key = rule_id.strip().upper()
        rule = self._by_id.get(key)
        if rule is not None:
            return rule
        by_name = {r.name: r for r in self.rules}
        if rule_id.strip() in by_name:
            return by_name[rule_id.strip()]
        close = [i for i in self._by_id if key and i.startswith(key)][:5]
        close += difflib.get_close_matches(key, list(self._by_id), n=3, cutoff=0.5)
        close += [by_name[n].id for n in difflib.get_close_matches(rule_id, list(by_name), n=2, cutoff=0.6)]
        close = list(dict.fromkeys(close))[:5]
        hint = f"Closest: {', '.join(close)}." if close else "Run `dynacheck rules` to list them."
        raise UserError(f"Unknown rule id {rule_id!r}.", hint)

    def match_call(self, qualname: str) -> Rule | None:
        """The rule for a call to ``qualname`` (exact names beat globs; more specific globs win)."""
        hit = self.match_call_pattern(qualname)
        return hit[0] if hit else None

    def match_call_pattern(self, qualname: str) -> tuple[Rule, str] | None:
        """The rule and the pattern that matched, so a finding can say why the rule fired."""
        if qualname not in self._call_cache:
            hit = self._match(qualname)
            public = canonical_name(qualname)
            if hit is None and public != qualname:
                hit = self._match(public)
            self._call_cache[qualname] = hit
        return self._call_cache[qualname]

    def _match(self, qualname: str) -> tuple[Rule, str] | None:
        rule = self._exact.get(qualname)
        if rule is not None:
            return rule, qualname
        for _, pattern, candidate in self._globs:
            if fnmatchcase(qualname, pattern):
                return candidate, pattern
        return None

    def match_method(self, name: str) -> Rule | None:
        """The rule for ``<receiver of unknown type>.name(...)``: only tensor hazards are listed."""
        return self._methods.get(name)

    def boundary(self, kind: str) -> Rule | None:
        """The rule the engine fires when it meets a Dynamo boundary of this kind."""
        return self._boundaries.get(kind)

    def families(self) -> list[str]:
        return list(dict.fromkeys(r.family for r in self.rules))


class CatalogError(UserError):
    """A rule file is malformed; the message names the file and the rule."""


def _fail(source: str, rule_id: str, message: str) -> CatalogError:
    where = f"{source}, rule {rule_id}" if rule_id else source
    return CatalogError(f"Bad rule file ({where}): {message}.", "Fix the TOML and run `dynacheck rules` again.")


def _strings(value: Any, source: str, rule_id: str, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _fail(source, rule_id, f"`{key}` must be a list of non-empty strings")
    return tuple(value)


def _parse_outcome(raw: Any, source: str, rule_id: str) -> Outcome:
    if not isinstance(raw, dict):
        raise _fail(source, rule_id, "`outcome` must be a table")
    unknown = sorted(set(raw) - set(_OUTCOME_REQUIRED) - set(_OUTCOME_OPTIONAL))
    if unknown:
        raise _fail(source, rule_id, f"unknown outcome key(s) {', '.join(unknown)}")
    missing = [k for k in _OUTCOME_REQUIRED if k not in raw]
    if missing:
        raise _fail(source, rule_id, f"outcome is missing {', '.join(missing)}")
    if raw["kind"] not in OUTCOME_KINDS:
        raise _fail(source, rule_id, f"outcome kind {raw['kind']!r} is not one of {', '.join(OUTCOME_KINDS)}")
    if not isinstance(raw["fatal_under_fullgraph"], bool):
        raise _fail(source, rule_id, "`fatal_under_fullgraph` must be true or false")
    gb_id = str(raw.get("gb_id", ""))
    if gb_id and not (gb_id.startswith("GB") and gb_id[2:].isdigit() and len(gb_id) == 6):
        raise _fail(source, rule_id, f"gb_id {gb_id!r} is not of the form GB####")
    return Outcome(
        kind=raw["kind"],
        gb_id=gb_id,
        gb_type=str(raw.get("gb_type", "")),
        fatal_under_fullgraph=raw["fatal_under_fullgraph"],
        explanation=str(raw.get("explanation", "")),
        hints=_strings(raw.get("hints", []), source, rule_id, "hints") if raw.get("hints") else (),
        detail=str(raw.get("detail", "")),
    )


def _parse_fixes(raw: Any, source: str, rule_id: str) -> tuple[FixTemplate, ...]:
    if not isinstance(raw, list) or not raw:
        raise _fail(source, rule_id, "`fixes` must be a non-empty list of {kind, text, sound}")
    fixes = []
    for i, item in enumerate(raw, 1):
        if not isinstance(item, dict):
            raise _fail(source, rule_id, f"fix {i} must be a table")
        unknown = sorted(set(item) - set(_FIX_KEYS))
        missing = [k for k in _FIX_KEYS if k not in item]
        if unknown or missing:
            raise _fail(source, rule_id, f"fix {i} has unknown {unknown} / missing {missing} keys")
        if item["kind"] not in FIX_KINDS:
            raise _fail(source, rule_id, f"fix {i} kind {item['kind']!r} is not one of {', '.join(FIX_KINDS)}")
        if not isinstance(item["sound"], bool) or not str(item["text"]).strip():
            raise _fail(source, rule_id, f"fix {i} needs a text and `sound = true|false`")
        fixes.append(FixTemplate(item["kind"], str(item["text"]).strip(), item["sound"]))
    return tuple(fixes)


def parse_rule(raw: Mapping[str, Any], source: str) -> Rule:
    """Validate one ``[[rule]]`` table and build the Rule (GB texts not yet enriched)."""
    rule_id = str(raw.get("id", "")) or "<no id>"
    unknown = sorted(set(raw) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise _fail(source, rule_id, f"unknown key(s) {', '.join(unknown)}")
    missing = [k for k in _REQUIRED if k not in raw]
    if missing:
        raise _fail(source, rule_id, f"missing {', '.join(missing)}")
    if not (rule_id.startswith("DC") and rule_id[2:].isdigit() and len(rule_id) == 5):
        raise _fail(source, rule_id, "id must look like DC###")
    if raw["severity"] not in SEVERITIES:
        raise _fail(source, rule_id, f"severity must be one of {', '.join(SEVERITIES)}")
    boundary = str(raw.get("boundary", ""))
    if boundary and boundary not in BOUNDARIES:
        raise _fail(source, rule_id, f"boundary {boundary!r} is not one of {', '.join(BOUNDARIES)}")
    calls = _strings(raw.get("calls", []), source, rule_id, "calls") if "calls" in raw else ()
    methods = _strings(raw.get("methods", []), source, rule_id, "methods") if "methods" in raw else ()
    if not (calls or methods or boundary):
        raise _fail(source, rule_id, "a rule must match something: give `calls`, `methods` or `boundary`")
    for key in ("title", "why", "example", "name", "family"):
        if not isinstance(raw[key], str) or not raw[key].strip():
            raise _fail(source, rule_id, f"`{key}` must be a non-empty string")
    return Rule(
        id=rule_id,
        name=raw["name"].strip(),
        family=raw["family"].strip(),
        title=raw["title"].strip(),
        severity=raw["severity"],
        outcome=_parse_outcome(raw["outcome"], source, rule_id),
        why=raw["why"].strip(),
        fixes=_parse_fixes(raw["fixes"], source, rule_id),
        example=raw["example"].strip("\n"),
        calls=calls,
        methods=methods,
        boundary=boundary,
        fixture_fire=str(raw.get("fixture_fire", "")),
        fixture_quiet=str(raw.get("fixture_quiet", "")),
        source=source,
        gb_by_torch=_parse_by_torch(raw["outcome"].get("by_torch", {}), source, rule_id),
    )


def _parse_by_torch(raw: Any, source: str, rule_id: str) -> tuple[tuple[str, str], ...]:
    """`[rule.outcome.by_torch]` `"2.11" = "GB0007"`: the GB id on a torch where Dynamo reports another."""
    if not isinstance(raw, dict):
        raise _fail(source, rule_id, "`outcome.by_torch` must be a table of \"major.minor\" = \"GB####\"")
    out = []
    for version, gb_id in sorted(raw.items()):
        if not (isinstance(gb_id, str) and gb_id.startswith("GB") and gb_id[2:].isdigit() and len(gb_id) == 6):
            raise _fail(source, rule_id, f"outcome.by_torch {version!r}: {gb_id!r} is not of the form GB####")
        out.append((str(version), gb_id))
    return tuple(out)


def read_rule_file(path: Path) -> list[Rule]:
    """All rules of one family file; the family must be the file's stem."""
    source = path.name
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise _fail(source, "", f"not valid TOML ({exc})") from None
    except OSError as exc:
        raise _fail(source, "", f"cannot be read ({exc.strerror})") from None
    extra = sorted(set(data) - {"rule"})
    if extra:
        raise _fail(source, "", f"unknown top-level key(s) {', '.join(extra)}; rules go in [[rule]] tables")
    raw_rules = data.get("rule", [])
    if not isinstance(raw_rules, list):
        raise _fail(source, "", "rules must be written as [[rule]] tables")
    rules = [parse_rule(raw, source) for raw in raw_rules]
    for rule in rules:
        if rule.family != path.stem:
            raise _fail(source, rule.id, f"family {rule.family!r} does not match the file name {path.stem!r}")
    return rules


def enrich(rule: Rule, registry: Mapping[str, dynamo_registry.RegistryEntry], torch_version: str = "") -> Rule:
    """Take the GB type, explanation and hints from torch's registry where it knows the id; on a torch
    listed in the rule's `by_torch`, that torch's GB id first."""
    minor = ".".join(torch_version.split("+")[0].split(".")[:2])
    override = dict(rule.gb_by_torch).get(minor) if minor else None
    if override and override != rule.outcome.gb_id:
        rule = replace(rule, outcome=replace(rule.outcome, gb_id=override, gb_type="", explanation="", hints=()))
    entry = registry.get(rule.outcome.gb_id) if rule.outcome.gb_id else None
    if entry is None:
        return rule
    explained_by = f"torch {torch_version}".strip() if entry.explanation else rule.explained_by
    readable = dynamo_registry.readable
    outcome = replace(
        rule.outcome,
        gb_type=entry.gb_type or rule.outcome.gb_type,
        explanation=readable(entry.explanation) if entry.explanation else rule.outcome.explanation,
        hints=tuple(readable(h) for h in entry.hints) or rule.outcome.hints,
    )
    return replace(rule, outcome=outcome, explained_by=explained_by)


def _check_unique_claims(rules: list[Rule]) -> None:
    """Each name, exact call, method and boundary belongs to one rule, so matching never guesses."""
    claims: dict[tuple[str, str], str] = {}
    for rule in rules:
        keys = [("name", rule.name), ("boundary", rule.boundary)] if rule.boundary else [("name", rule.name)]
        keys += [("call", c) for c in rule.calls] + [("method", m) for m in rule.methods]
        for what, key in keys:
            owner = claims.setdefault((what, key), rule.id)
            if owner != rule.id:
                raise _fail(rule.source, rule.id, f"{what} {key!r} is also claimed by {owner}")


def build_catalog(
    paths: Iterable[Path],
    registry: Mapping[str, dynamo_registry.RegistryEntry] | None = None,
    torch_version: str = "",
) -> Catalog:
    """A catalogue from rule files; ``registry`` (GB id → entry) enriches outcomes when given."""
    rules: list[Rule] = []
    seen: dict[str, str] = {}
    for path in sorted(paths, key=lambda p: p.name):
        for rule in read_rule_file(path):
            if rule.id in seen:
                raise _fail(path.name, rule.id, f"duplicate id (also in {seen[rule.id]})")
            seen[rule.id] = path.name
            rules.append(enrich(rule, registry, torch_version) if registry else rule)
    rules.sort(key=lambda r: r.id)
    _check_unique_claims(rules)
    gb_source = f"torch {torch_version}" if registry else "catalogue"
    return Catalog(tuple(rules), gb_source=gb_source, torch_version=torch_version if registry else "")


def rules_folder() -> Path:
    """Where the rule files are: the source checkout's ``rules/``, else the installed package data.

    The checkout's folder is tried first so that a worktree run with ``PYTHONPATH`` reads its
    own rules even when another checkout is installed in editable mode.
    """
    beside = Path(__file__).resolve().parent.parent / "rules"
    if beside.is_dir() and any(beside.glob("*.toml")):
        return beside
    try:
        installed = importlib.resources.files("dynacheck.rules_data")
    except ModuleNotFoundError:
        installed = None
    if installed is not None:
        folder = Path(str(installed))
        if folder.is_dir() and any(folder.glob("*.toml")):
            return folder
    raise UserError(
        "The rule catalogue is missing from this install.",
        "Reinstall dynacheck (the rules ship as package data `dynacheck.rules_data`).",
    )


@functools.lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    """The catalogue shipped with dynacheck, enriched from the installed torch when present."""
    registry = dynamo_registry.load_registry()
    version = dynamo_registry.torch_version() if registry else ""
    return build_catalog(sorted(rules_folder().glob("*.toml")), registry or None, version)
