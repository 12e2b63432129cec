"""Command-line entry: parses arguments, calls the library, maps outcomes to exit codes.

Each subcommand lives in the room that owns it and is imported only when used, so
`dynacheck --help` stays fast and a missing optional dependency affects one command only.
"""

from __future__ import annotations

import importlib
import os
import sys

import click

from dynacheck import __version__
from dynacheck.errors import UserError

# name -> "module:attribute" of a click command
COMMANDS = {
    "scan": "dynacheck.static.command:scan",
    "rules": "dynacheck.catalog_command:rules",
    "trace": "dynacheck.dynamic.command:trace",
    "report": "dynacheck.report.command:report",
    "gate": "dynacheck.gate.command:gate",
    "diff": "dynacheck.gate.command:diff",
    "capture": "dynacheck.capture.command:capture",
    "fix": "dynacheck.fixes.command:fix",
    "census": "dynacheck.census.command:census",
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name in COMMANDS if self._load(name) is not None)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        return self._load(name)

    @staticmethod
    def _load(name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                return None  # that room is not built into this install
            raise
        return getattr(module, attr)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dynacheck")
def cli() -> None:
    """Find where PyTorch Dynamo will break in your serving stack, why, and how to fix it."""


DEBUG_ENV = "DYNACHECK_DEBUG"  # set: an internal error shows its traceback


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; user errors print one sentence and exit 2, never a traceback."""
    try:
        rv = cli.main(args=argv, prog_name="dynacheck", standalone_mode=False)
    except UserError as exc:
        click.secho(f"dynacheck: error: {exc}", fg="red", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("dynacheck: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2)
    except KeyboardInterrupt:
        click.echo("dynacheck: interrupted", err=True)
        sys.exit(130)
    except (Exception, RecursionError, MemoryError) as exc:  # noqa: BLE001 - the last line of defence
        if os.environ.get(DEBUG_ENV):
            raise
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        click.secho(f"dynacheck: internal error: {type(exc).__name__}: {first}. This is a dynacheck bug: "
                    f"run again with {DEBUG_ENV}=1 and report the traceback.", fg="red", err=True)
        sys.exit(3)
    sys.exit(rv if isinstance(rv, int) else 0)
