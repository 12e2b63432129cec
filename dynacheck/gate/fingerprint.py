"""Fingerprints that name a finding by what it is, not where it sits.

A fingerprint must survive line moves, blank lines, new comments, a formatter pass and edits
elsewhere in a file, so it is built only from the rule id, the qualified names along the chain,
the site's function and callee, and the normalized hazard line. Line numbers and file paths never
enter it. Normalization is a small hand lexer, not `tokenize`, so the same line gives the same
fingerprint on every Python version (3.12 tokenizes f-strings differently from 3.11).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import defaultdict
from collections.abc import Iterable

from dynacheck.model import Finding

FINGERPRINT_LENGTH = 16
_SEPARATOR = "\x1f"
_LAYOUT = " \t\r\n\f\\"  # a backslash outside a string is a line continuation


def fingerprint(finding: Finding) -> str:
    """Short hex id of a finding: rule, chain names, site function and callee, normalized line."""
    parts = [
        finding.rule,
        ">".join(hop.function for hop in finding.chain),
        finding.site.function,
        finding.site.callee,
        normalize_code(finding.site.code),
    ]
    return _digest(_SEPARATOR.join(parts))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:FINGERPRINT_LENGTH]


def _source_order(finding: Finding) -> tuple:
    return (finding.site.file, finding.site.line, finding.site.column, tuple((h.file, h.line) for h in finding.chain))


def assign_fingerprints(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """Fill every finding's fingerprint, keeping them unique within one scan.

    Two findings can share everything a fingerprint is made of: the same call written twice in one
    function (a retry branch repeating `os.remove(tmp)`), or one callee called from two lines of the
    same caller. The first, in source order, keeps the plain fingerprint; the k-th gets one salted
    with k. Source order survives moving code, so these stay stable too. Order of `findings` is kept.
    """
    findings = tuple(findings)
    groups: dict[str, list[int]] = defaultdict(list)
    plain = [fingerprint(f) for f in findings]
    for index, value in enumerate(plain):
        groups[value].append(index)
    values = list(plain)
    for value, members in groups.items():
        if len(members) < 2:
            continue
        members.sort(key=lambda i: _source_order(findings[i]))
        for ordinal, index in enumerate(members[1:], start=1):
            values[index] = _digest(f"{value}{_SEPARATOR}{ordinal}")
    return tuple(dataclasses.replace(f, fingerprint=v) for f, v in zip(findings, values))


def normalize_code(code: str) -> str:
    """The hazard line without its comment and without layout whitespace.

    Whitespace outside string literals is dropped, except one space where two words would
    otherwise fuse (`not x`, `return y`); literals are kept verbatim, `#` inside them included.
    So `f( [a] )  # note` and `f([a])` normalize alike.
    """
    pieces: list[str] = []
    gap = False
    index = 0
    while index < len(code):
        char = code[index]
        if char in _LAYOUT:
            gap = True
            index += 1
            continue
        if char == "#":
            break
        if char in "'\"":
            end = _string_end(code, index)
            piece = code[index:end]
            index = end
        else:
            piece = char
            index += 1
        if gap and pieces and _is_word(pieces[-1][-1]) and _is_word(piece[0]):
            pieces.append(" ")
        gap = False
        pieces.append(piece)
    return "".join(pieces)


def _string_end(code: str, start: int) -> int:
    """Index just past the string literal opening at `start` (end of line if it never closes)."""
    quote = code[start : start + 3] if code[start : start + 3] in ('"""', "'''") else code[start]
    index = start + len(quote)
    while index < len(code):
        if code[index] == "\\":
            index += 2
            continue
        if code.startswith(quote, index):
            return index + len(quote)
        index += 1
    return len(code)


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"
