"""`dynacheck scan`: the static scan from the command line.

With no target and no entry it scans the embedded default: SGLang 0.5.9 + FlashInfer 0.6.3 from
the GLM-5 forward, the stack whose crash this tool was built around.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from dynacheck.deploy.build import DeploymentSpec, parse_env
from dynacheck.model import Review, ScanResult
from dynacheck.progress import StatusLine
from dynacheck.static.presets import DEFAULT_PRESET, DEFAULT_TARGETS, PRESETS

FORMATS = ("terminal", "json", "sarif", "html", "markdown", "github")


@click.command()
@click.option("--target", "-t", "targets", multiple=True, metavar="SPEC",
              help="pip requirement (sglang==0.5.9), wheel file, folder holding packages, or installed name.")
@click.option("--entry", "-e", "entries", multiple=True, metavar="MODULE:QUALNAME",
              help="Function Dynamo compiles, e.g. pkg.models.llama:LlamaModel.forward.")
@click.option("--preset", type=click.Choice(sorted(PRESETS)), default=None,
              help="Named entry of the framework version being scanned (glm5: SGLang's GLM-5 forward).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="terminal", show_default=True)
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the report here instead of standard output.")
@click.option("--fail-on", type=click.Choice(["info", "warning", "error", "never"]), default=None,
              help="Exit 1 when an unsuppressed finding that holds on the deployment, at or above this severity, is found "
                   "[default: fail_on in [tool.dynacheck], else error; the embedded default scan too].")
@click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="pyproject.toml with [tool.dynacheck] (default: the nearest one above the working directory).")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Wheels, unpacked trees and parse summaries (default $DYNACHECK_CACHE or ~/.cache/dynacheck).")
@click.option("--offline", is_flag=True, help="Never download; use only cached wheels.")
@click.option("--show-conditional", is_flag=True,
              help="List findings that happen only if a flag, env var or runtime value differs from the given "
                   "deployment, with their conditions.")
@click.option("--verbose", "-v", is_flag=True, help="Show every site and every chain, not just the lead chain of each.")
@click.option("--server-args", default=None, metavar="ARGS",
              help="SGLang's launch arguments, read against the scanned ServerArgs (e.g. '--tp-size 8 "
                   "--quantization modelopt_fp4 --enable-piecewise-cuda-graph').")
@click.option("--model-config", type=click.Path(exists=True, path_type=Path), default=None,
              help="The checkpoint's HF config.json (or its folder, with hf_quant_config.json).")
@click.option("--gpu", default=None, metavar="SMxx", help="GPU architecture: sm90, sm100, sm120, ...")
@click.option("--platform", default=None, metavar="NAME", help="cuda, rocm, npu, xpu, hpu, cpu, musa.")
@click.option("--env", "env_pairs", multiple=True, metavar="NAME=VALUE",
              help="An environment variable of the deployment (others are unset when a deployment is given).")
@click.option("--fullgraph", is_flag=True,
              help="The entry is compiled with fullgraph=True: state that compile's outcome (fatal or no break) "
                   "instead of both.")
@click.option("--first-call", is_flag=True,
              help="The compile is the process's first call of the code (no eager warm-up): a registry that fills "
                   "on first use is empty, so its first-call way is taken (as the FlashInfer API census assumes).")
@click.option("--required-args-only", is_flag=True,
              help="Call each entry with its required arguments only: its other parameters hold their defaults, "
                   "which decide its branches (as the FlashInfer API census calls each function).")
def scan(targets: tuple[str, ...], entries: tuple[str, ...], preset: str | None, fmt: str, out: Path | None,
         fail_on: str | None, config_file: Path | None, cache_dir: Path | None, offline: bool,
         show_conditional: bool, verbose: bool, server_args: str | None, model_config: Path | None,
         gpu: str | None, platform: str | None, env_pairs: tuple[str, ...], fullgraph: bool, first_call: bool,
         required_args_only: bool) -> int:
    """Find what Dynamo cannot trace on the path from a model's forward, and how to fix it.

    Never imports or runs the scanned code. With no --target/--entry/--preset it scans the targets of
    [tool.dynacheck] in the nearest pyproject.toml, else the embedded default (SGLang 0.5.9 + FlashInfer 0.6.3,
    GLM-5 forward). Inline `# dynacheck: ignore[DC001] reason` comments and configured ignores are honoured.

    Exit 0 when no unsuppressed finding that holds on the deployment reaches --fail-on; 1 when one does (the
    embedded default finds the GLM-5 crash, so it exits 1); 2 on bad input. With a deployment given
    (--server-args, --gpu, ... or a preset's), findings that need another flag or env value do not count.
    """
    from dynacheck.gate.policy import apply_policy, exit_verdict, load_policy, scan_inputs
    from dynacheck.static.scan import scan as run_scan

    config = load_policy(config_file)
    inputs = scan_inputs(config, targets, entries, preset, (DEFAULT_TARGETS, DEFAULT_PRESET))
    if inputs.origin == "default":
        click.echo(f"dynacheck: no target given; scanning the default: {' + '.join(inputs.specs)}, "
                   f"--preset {inputs.preset}", err=True)
    elif inputs.origin != "command line":
        click.echo(f"dynacheck: scanning the targets of {inputs.origin}: {' + '.join(inputs.specs)}", err=True)
    fail_on = fail_on or (config.fail_on if config.source else "error")
    progress = StatusLine() if sys.stderr.isatty() else None
    try:
        spec = DeploymentSpec(preset=inputs.preset, server_args=server_args, model_config=model_config, gpu=gpu,
                              platform=platform, env=parse_env(env_pairs), cold=first_call)
        result = run_scan(list(inputs.specs), list(inputs.entries), inputs.preset, cache_dir=cache_dir,
                          offline=offline, progress=progress, deployment=spec,
                          fullgraph=fullgraph, entry_defaults=required_args_only)
    finally:
        if progress is not None:
            progress.close()
    result = apply_policy(result, config)
    code, reason = exit_verdict(result, fail_on, config.include_conditional)
    _emit(result, fmt, out, verbose, show_conditional, reason)
    return code


def exit_code(result: ScanResult, fail_on: str, include_conditional: bool = False) -> int:
    """1 when a finding that holds on the deployment, unsuppressed, is at or above the threshold, else 0."""
    from dynacheck.gate.policy import exit_verdict

    return exit_verdict(result, fail_on, include_conditional)[0]


def _emit(result: ScanResult, fmt: str, out: Path | None, verbose: bool, show_conditional: bool,
          reason: str) -> None:
    from dynacheck import report

    if fmt == "terminal":
        from rich.console import Console

        from dynacheck.report.console import render_console

        options = {"verbose": verbose, "show_conditional": show_conditional, "exit_reason": reason}
        if out is None:
            render_console(Review(scan=result), **options)
            return
        with open(out, "w", encoding="utf-8") as handle:
            render_console(Review(scan=result), Console(file=handle, width=120), **options)
        click.echo(f"dynacheck: wrote {out}; {reason}", err=True)
        return
    if fmt in ("github", "sarif"):
        from dynacheck.gate.output import relative_to_repository

        result = relative_to_repository(result)
    text = report.render(result if fmt == "json" else Review(scan=result), fmt)
    if out is None:
        click.echo(text)
    else:
        report.write(text, out)
        click.echo(f"dynacheck: wrote {out}; {reason}", err=True)
