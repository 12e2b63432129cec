"""Named entries: the forward that a serving framework really compiles, per framework version.

`--preset glm5` names the function SGLang's piecewise CUDA-graph runner hands to
`torch.compile(fullgraph=True)` for GLM-5 (`GlmMoeDsaForCausalLM` is a `DeepseekV2ForCausalLM`;
the compiled root is its inner model's forward).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from dynacheck.errors import UserError
from dynacheck.model import Target


@dataclass(frozen=True)
class PresetEntry:
    distribution: str
    versions: str  # a PEP 440 specifier set; "" for any
    entry: str
    why: str


PRESETS: dict[str, tuple[PresetEntry, ...]] = {
    "glm5": (
        PresetEntry("sglang", ">=0.5.9", "sglang.srt.models.deepseek_v2:DeepseekV2Model.forward",
                    "GlmMoeDsaForCausalLM (sglang.srt.models.glm4_moe) subclasses DeepseekV2ForCausalLM; the "
                    "piecewise runner compiles its DeepseekV2Model.forward with fullgraph=True"),
    ),
    "deepseek-v3": (
        PresetEntry("sglang", "", "sglang.srt.models.deepseek_v2:DeepseekV2Model.forward",
                    "DeepseekV3ForCausalLM shares DeepseekV2Model"),
    ),
}

DEFAULT_TARGETS = ("sglang==0.5.9", "flashinfer-python==0.6.3")
DEFAULT_PRESET = "glm5"


def preset_entries(name: str, targets: Sequence[Target]) -> list[str]:
    """The entries a preset names for the framework versions among `targets`."""
    if name not in PRESETS:
        raise UserError(f"Unknown preset {name!r}.", f"Known presets: {', '.join(sorted(PRESETS))}.")
    entries: list[str] = []
    versions = {canonicalize_name(t.name): t.version for t in targets}
    for option in PRESETS[name]:
        version = versions.get(canonicalize_name(option.distribution))
        if version is None:
            continue
        if option.versions and version and not _satisfies(version, option.versions):
            continue
        entries.append(option.entry)
    if not entries:
        wanted = ", ".join(f"{o.distribution}{o.versions}" for o in PRESETS[name])
        raise UserError(f"Preset {name!r} needs a target providing {wanted}.",
                        f"Add e.g. --target {PRESETS[name][0].distribution}==0.5.9.")
    return entries


def _satisfies(version: str, spec: str) -> bool:
    try:
        return Version(version) in SpecifierSet(spec)
    except InvalidVersion:
        return True
