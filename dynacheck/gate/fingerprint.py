"""Fingerprints that name a finding by what it is, not where it sits.

A fingerprint must survive line moves, blank lines, new comments, a formatter pass and edits
elsewhere in a file, so it is built only from the rule id, the qualified names along the chain,
the site's function and callee, and the normalized hazard line. Line numbers and file paths never
enter it. Normalization is a small hand lexer, not `tokenize`, so the same line gives the same
fingerprint on every Python version (3.12 tokenizes f-strings differently from 3.11).
"""

from __future__ import annotations

import hashlib

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
    digest = hashlib.sha256(_SEPARATOR.join(parts).encode("utf-8")).hexdigest()
    return digest[:FINGERPRINT_LENGTH]


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
