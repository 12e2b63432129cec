"""The deployments a census crosses with the models: the default matrix or a user's TOML file."""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from dynacheck.deploy.build import DeploymentSpec
from dynacheck.errors import UserError

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]


@dataclass(frozen=True)
class CensusDeployment:
    """One column of the census: a name, and the facts given to the scan."""

    name: str
    server_args: str = ""
    gpu: str = ""
    platform: str = "cuda"
    env: tuple[tuple[str, str], ...] = ()
    quantization: str = ""  # the --quantization value, "" for an unquantized checkpoint

    def spec(self) -> DeploymentSpec:
        return DeploymentSpec(server_args=self.server_args or None, gpu=self.gpu or None,
                              platform=self.platform or None, env=dict(self.env), refuse_unknown_flags=True)

    def family(self) -> tuple:
        """What the deployment shares with those a census walks as forks of one evaluator: all but
        its GPU and its checkpoint format (ScanSession.engine, facts.fork_difference)."""
        return (" ".join(_without_quantization(self.server_args.split())), self.platform, self.env)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "server_args": self.server_args, "gpu": self.gpu,
                "platform": self.platform, "env": dict(self.env)}


def _quantization(args: str) -> str:
    tokens = args.split()
    for i, token in enumerate(tokens):
        if token == "--quantization" and i + 1 < len(tokens):
            return tokens[i + 1]
        if token.startswith("--quantization="):
            return token.split("=", 1)[1]
    return ""


def _without_quantization(tokens: list[str]) -> list[str]:
    out, skip = [], False
    for token in tokens:
        if skip:
            skip = False
        elif token == "--quantization":
            skip = True
        elif not token.startswith("--quantization="):
            out.append(token)
    return out


def _from_data(data: dict[str, Any], where: str) -> list[CensusDeployment]:
    out: list[CensusDeployment] = []
    matrix = data.get("matrix")
    if matrix:
        common = matrix.get("common_args", "")
        env = tuple(sorted((str(k), str(v)) for k, v in matrix.get("env", {}).items()))
        for quant in matrix.get("quantization", []):
            for gpu in matrix.get("gpus", [""]):
                args = " ".join(a for a in (quant.get("server_args", ""), common) if a)
                name = "/".join(p for p in (quant["name"], gpu) if p)
                out.append(CensusDeployment(name, args, gpu, matrix.get("platform", "cuda"), env,
                                            _quantization(args)))
    for item in data.get("deployment", []):
        if "name" not in item:
            raise UserError(f"A [[deployment]] in {where} has no name.", 'Add name = "nvfp4/sm120" to each.')
        args = item.get("server_args", "")
        env = tuple(sorted((str(k), str(v)) for k, v in item.get("env", {}).items()))
        out.append(CensusDeployment(item["name"], args, item.get("gpu", ""), item.get("platform", "cuda"),
                                    env, _quantization(args)))
    if not out:
        raise UserError(f"{where} lists no deployment.", "Add a [matrix] table or [[deployment]] entries.")
    names = [d.name for d in out]
    if len(set(names)) != len(names):
        raise UserError(f"{where} names a deployment twice.", "Give each deployment its own name.")
    return out


def default_deployments() -> list[CensusDeployment]:
    text = resources.files("dynacheck.census").joinpath("default_deployments.toml").read_text("utf-8")
    return _from_data(tomllib.loads(text), "the default matrix")


def deployments_from_census(census: dict[str, Any]) -> list[CensusDeployment]:
    """The deployments a census JSON was walked on, in its order (its `deployments` records)."""
    return _from_data({"deployment": census.get("deployments", [])}, "the census file")


def load_deployments(path: Path | None) -> list[CensusDeployment]:
    """The user's deployments file, or the default matrix when none is given."""
    if path is None:
        return default_deployments()
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"Could not read the deployments file {path}: {exc}.",
                        "Give a TOML file with [[deployment]] entries (see docs/census.md).") from None
    return _from_data(data, str(path))
