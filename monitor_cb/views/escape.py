"""Escaping user-controlled text (run names, metric names, paths) for Streamlit's Markdown."""

from __future__ import annotations

import re

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~:$=^])")
# Streamlit's Markdown (remark-gfm) turns ``http://…``, ``www.…`` and ``name@host.tld`` in *text* into
# links after the escapes are resolved, so escaping cannot stop it. A word joiner (U+2060, zero
# width, invisible) inside each pattern does: ``http:⁠//``, ``www⁠.``, ``name⁠@host``.
WORD_JOINER = "\u2060"
_AUTOLINKS = (
    (re.compile(r"(?i)(https?|ftp|mailto|xmpp)(:)"), rf"\1\2{WORD_JOINER}"),
    (re.compile(r"(?i)\b(www)(\.)"), rf"\1{WORD_JOINER}\2"),
    (re.compile(r"@"), f"{WORD_JOINER}@"),
)


def escape_markdown(text: str) -> str:
    """User text for a Streamlit Markdown string: every formatting character escaped, newlines folded.

    Run names and metadata come from files anyone can write; shown raw they could add links,
    images or layout to the page. (The pages never render user text as HTML.) URLs and e-mail
    addresses stay text too (:func:`break_autolinks`).
    """
    return _MD_SPECIAL.sub(r"\\\1", break_autolinks(" ".join(str(text).split())))


def break_autolinks(text: str) -> str:
    """``text`` with an invisible word joiner inside every URL or e-mail pattern GFM would make a link."""
    for pattern, replacement in _AUTOLINKS:
        text = pattern.sub(replacement, text)
    return text


def escape_code(text: str) -> str:
    """User text for an inline code span: backticks cannot end the span early."""
    return " ".join(str(text).replace("`", "'").split())
