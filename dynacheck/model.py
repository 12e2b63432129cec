"""The data model that crosses rooms: findings, chains, sites, fixes, dynamic events.

Analyzers produce these, renderers and the gate consume them; nothing else is shared.
Every class round-trips through plain dicts (``to_dict`` / ``from_dict``) so JSON output,
baselines and trace files all speak the same shape.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

SCHEMA_VERSION = "1.1"

SEVERITIES = ("info", "warning", "error")
CONFIDENCES = ("low", "medium", "high")

# How a hop's callee was believed; the report shows these words.
VIA_ENTRY = "entry"
VIA_IMPORT = "import"
VIA_LOCAL = "local definition"
VIA_MODULE = "same module"
VIA_SELF = "self method"
VIA_SUPER = "super()"
VIA_ATTR_TYPE = "attribute type"
VIA_MODULE_CALL = "nn.Module call -> forward"
VIA_CONSTRUCTOR = "constructor -> __init__"
VIA_HIERARCHY = "class hierarchy fallback"
VIA_DISPATCH = "dispatch table"
VIA_DECORATOR = "decorator wrapper"
VIA_RETURN = "return value"
VIA_FACTORY = "factory"
VIA_PROPERTY = "property read -> getter"
VIA_AUTOGRAD_APPLY = "autograd.Function.apply -> forward"


def severity_rank(severity: str) -> int:
    """Order severities so thresholds compare; unknown words rank lowest."""
    return SEVERITIES.index(severity) if severity in SEVERITIES else -1


def confidence_rank(confidence: str) -> int:
    return CONFIDENCES.index(confidence) if confidence in CONFIDENCES else -1


class _Record:
    """Dict round-trip for the dataclasses below (nested records and tuples included)."""

    _nested: dict[str, type] = {}
    _nested_lists: dict[str, type] = {}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls, data: dict[str, Any]):
        known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key not in known:
                continue
            if key in cls._nested and value is not None:
                value = cls._nested[key].from_dict(value)
            elif key in cls._nested_lists:
                value = tuple(cls._nested_lists[key].from_dict(v) for v in value or ())
            elif isinstance(value, list):
                value = tuple(value)
            kwargs[key] = value
        return cls(**kwargs)


@dataclass(frozen=True)
class Hop(_Record):
    """One function on the way from the entry to the hazard, and why we believe the call."""

    function: str  # qualified name, e.g. flashinfer.jit.cpp_ext.get_cuda_version
    file: str  # path as the user would open it (relative to the target root)
    line: int  # line of the call that leads to the next hop (or of the def for the entry)
    via: str  # one of the VIA_* words
    confidence: str = "high"
    package: str = ""  # distribution the file belongs to, e.g. flashinfer-python
    note: str = ""  # e.g. "functools.cache: traced through", "3 other candidates"
    code: str = ""  # the source line at `line`


@dataclass(frozen=True)
class Site(_Record):
    """Where the untraceable thing happens, in code the user (or a library) owns."""

    file: str
    line: int
    function: str  # qualified name of the function holding the call
    callee: str  # what is called there, e.g. subprocess.check_output
    code: str = ""  # the source line
    package: str = ""
    column: int = 0


@dataclass(frozen=True)
class Outcome(_Record):
    """What Dynamo does when it reaches the site."""

    kind: str  # graph_break | frame_skip | recompile | hard_error | trace_time | skipped_when_compiled | ok
    gb_id: str = ""  # Dynamo's own id, e.g. GB0007 ("" when Dynamo has none)
    gb_type: str = ""  # Unsupported.gb_type text
    fatal_under_fullgraph: bool = False
    explanation: str = ""  # Dynamo's explanation (from graph_break_registry.json where known)
    hints: tuple[str, ...] = ()
    detail: str = ""  # e.g. "at threading.Lock() inside subprocess.Popen.__init__"


@dataclass(frozen=True)
class Fix(_Record):
    """One way out, placed at a boundary; `sound` is False for a fix users ask for that would not work."""

    kind: str  # custom_op | assume_constant_result | hoist | allow_in_graph | prewarm | guard | remove | disable
    at: str  # qualified name of the function the fix wraps or edits
    summary: str  # one sentence: what and why here
    file: str = ""
    line: int = 0
    snippet: str = ""
    sound: bool = True


@dataclass(frozen=True)
class Condition(_Record):
    """What a chain still depends on that the deployment did not decide (a flag, env var, runtime value)."""

    text: str  # e.g. "get_global_server_args().enable_symm_mem", "except path", "first call only"
    file: str = ""
    line: int = 0
    kind: str = ""  # flag | env | runtime | platform | config | except | first_call | value


@dataclass(frozen=True)
class PlanEntry(_Record):
    """One fix of the fix plan: where it goes and how many unconditional fatal sites it clears."""

    kind: str
    at: str
    sites: int
    fatal_sites: int = 0


@dataclass(frozen=True)
class Finding(_Record):
    rule: str  # DC###
    title: str
    severity: str
    site: Site
    chain: tuple[Hop, ...]
    outcome: Outcome
    fixes: tuple[Fix, ...] = ()
    confidence: str = "high"  # the weakest hop's confidence
    fingerprint: str = ""
    entry: str = ""
    family: str = ""
    status: str = "predicted"  # predicted | confirmed | seen_only | suppressed
    note: str = ""  # e.g. suppression reason, or why a fix users ask for is unsound
    also_reached_by: int = 0  # how many other entries/chains reach this site
    conditions: tuple[Condition, ...] = ()  # empty: holds on the scanned deployment as given

    _nested = {"site": Site, "outcome": Outcome}
    _nested_lists = {"chain": Hop, "fixes": Fix, "conditions": Condition}

    @property
    def unconditional(self) -> bool:
        return not self.conditions


@dataclass(frozen=True)
class Target(_Record):
    """A source tree that was scanned."""

    spec: str  # what the user asked for (sglang==0.5.9, a path, a dist name)
    name: str  # distribution name
    version: str
    root: str  # folder holding the top-level packages
    kind: str  # pip | wheel | folder | installed


@dataclass(frozen=True)
class Problem(_Record):
    """Input that was skipped, said once in the report instead of a traceback."""

    kind: str  # syntax_error | too_deep | too_large | unreadable | unresolved_entry | cycle
    file: str
    message: str


@dataclass
class ScanStats(_Record):
    files_in_trees: int = 0
    files_parsed: int = 0
    cache_hits: int = 0
    functions_visited: int = 0
    seconds: float = 0.0
    reused: bool = False  # answered from the result cache: nothing changed since a scan with these inputs


@dataclass
class ScanResult(_Record):
    targets: tuple[Target, ...]
    entries: tuple[str, ...]
    findings: tuple[Finding, ...]
    problems: tuple[Problem, ...] = ()
    stats: ScanStats = field(default_factory=ScanStats)
    schema_version: str = SCHEMA_VERSION
    tool_version: str = ""
    torch_version: str = ""  # "" when the catalogue, not torch, gave the GB ids
    deployment: dict[str, Any] = field(default_factory=dict)  # the facts the walk evaluated ({} = none)
    fix_plan: tuple[PlanEntry, ...] = ()  # fixes ranked by the unconditional fatal sites they clear
    first_break: dict[str, Any] = field(default_factory=dict)  # the fatal site Dynamo meets first in trace order

    _nested = {"stats": ScanStats}
    _nested_lists = {"targets": Target, "findings": Finding, "problems": Problem, "fix_plan": PlanEntry}


@dataclass(frozen=True)
class Frame(_Record):
    file: str
    line: int
    function: str
    code: str = ""


@dataclass(frozen=True)
class Event(_Record):
    """One thing the recorder saw in one process."""

    kind: str  # graph_break | frame_skip | fullgraph_error | compile_error | recompile | recompile_limit
    #            | side_effect | cuda_graph
    pid: int
    rank: int = -1
    gb_id: str = ""
    gb_type: str = ""
    reason: str = ""
    explanation: str = ""
    hints: tuple[str, ...] = ()
    user_stack: tuple[Frame, ...] = ()
    site: Frame | None = None  # first frame a user can act on (non-stdlib, non-torch)
    compiled_frame: str = ""  # the frame Dynamo was compiling
    phase: str = ""  # tracing | compiled_runtime | outside (side effects)
    fatal_under_fullgraph: bool = False
    count: int = 1
    detail: str = ""
    argv: tuple[str, ...] = ()
    time: float = 0.0
    ranks: tuple[int, ...] = ()  # after merging: every rank that saw it
    pids: tuple[int, ...] = ()  # after merging: every process that saw it
    fixes: tuple[Fix, ...] = ()  # for an observed break: the fix the static side would place, from the stack

    _nested = {"site": Frame}
    _nested_lists = {"user_stack": Frame, "fixes": Fix}


@dataclass(frozen=True)
class ProcessInfo(_Record):
    pid: int
    rank: int = -1
    argv: tuple[str, ...] = ()
    events: int = 0
    ended: str = ""  # "exit 0", "killed", "" when unknown (a crash leaves no end record)


@dataclass(frozen=True)
class Match(_Record):
    """A static finding and the dynamic events that correspond to it."""

    status: str  # confirmed | predicted_only | seen_only
    fingerprint: str = ""  # the finding's ("" for seen_only)
    events: tuple[int, ...] = ()  # indexes into TraceResult.events
    note: str = ""  # for seen_only: which hop the scan could not resolve, when known


@dataclass
class TraceResult(_Record):
    """Every process of one traced command, merged and deduplicated across ranks and layers."""

    command: tuple[str, ...]
    processes: tuple[ProcessInfo, ...]
    events: tuple[Event, ...]
    exit_code: int = 0
    schema_version: str = SCHEMA_VERSION
    torch_version: str = ""

    _nested_lists = {"processes": ProcessInfo, "events": Event}


@dataclass
class Review(_Record):
    """What renderers take: a scan, a trace, or both with their matches."""

    scan: ScanResult | None = None
    trace: TraceResult | None = None
    matches: tuple[Match, ...] = ()

    _nested = {"scan": ScanResult, "trace": TraceResult}
    _nested_lists = {"matches": Match}


@dataclass
class Diff(_Record):
    """Findings of two dependency sets (or a baseline and a scan), compared by fingerprint."""

    before: tuple[str, ...]  # specs or baseline path
    after: tuple[str, ...]
    added: tuple[Finding, ...] = ()
    removed: tuple[Finding, ...] = ()
    changed: tuple[Finding, ...] = ()  # same fingerprint, different outcome/severity (the new one)
    unchanged: tuple[Finding, ...] = ()
    suppressed: tuple[Finding, ...] = ()
    # what a reader must know about one side before reading the rows: "after: SGLang turns piecewise CUDA
    # graphs off for this model on this launch ..." (the findings are then those of an enforced launch)
    notes: tuple[str, ...] = ()

    _nested_lists = {
        "added": Finding,
        "removed": Finding,
        "changed": Finding,
        "unchanged": Finding,
        "suppressed": Finding,
    }


def deployment_given(deployment: dict[str, Any]) -> bool:
    """Whether a scan evaluated a deployment (its `name` is set); a `fullgraph` note alone decides nothing."""
    return bool(deployment and deployment.get("name"))
