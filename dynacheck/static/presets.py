"""Named entries: the forward that a serving framework really compiles, per framework version.

The presets themselves are data (`dynacheck/deploy/presets/*.toml`): each names its entries
(`[[entry]]`: distribution, PEP 440 versions, entry, why) and its deployment. `--preset glm5` is
the seed's: SGLang's GLM-5 forward (`GlmMoeDsaForCausalLM` is a `DeepseekV2ForCausalLM`; the
compiled root is its inner model's forward) on a GLM-5-NVFP4 SM120 deployment.
"""

from __future__ import annotations

from typing import Sequence

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from dynacheck.deploy.build import load_preset, preset_names
from dynacheck.errors import UserError
from dynacheck.model import Target

DEFAULT_TARGETS = ("sglang==0.5.9", "flashinfer-python==0.6.3")
DEFAULT_PRESET = "glm5"
PRESETS = tuple(preset_names())


def preset_entries(name: str, targets: Sequence[Target]) -> list[str]:
    """The entries a preset names for the framework versions among `targets`."""
    options = load_preset(name).get("entry", [])
    entries: list[str] = []
    versions = {canonicalize_name(t.name): t.version for t in targets}
    for option in options:
        version = versions.get(canonicalize_name(option["distribution"]))
        if version is None:
            continue
        if option.get("versions") and version and not _satisfies(version, option["versions"]):
            continue
        entries.append(option["entry"])
    if not entries:
        wanted = ", ".join(f"{o['distribution']}{o.get('versions', '')}" for o in options)
        raise UserError(f"Preset {name!r} needs a target providing {wanted}.",
                        f"Add e.g. --target {options[0]['distribution'] if options else 'sglang'}==0.5.9.")
    return entries


def _satisfies(version: str, spec: str) -> bool:
    try:
        return Version(version) in SpecifierSet(spec)
    except InvalidVersion:
        return True
