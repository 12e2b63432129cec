"""Errors meant for users: one clear sentence plus what to do; the CLI turns them into exit 2."""

from __future__ import annotations


class UserError(Exception):
    """Bad input or environment; the message is shown as is, never with a traceback."""

    exit_code = 2

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} {self.hint}".strip()


def one_line(exc: BaseException) -> str:
    """`Type: first line of the message`: a parse or read failure said in a report or a record."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()
