"""Escaping user-controlled text (run names, metric names, paths) for Streamlit's Markdown."""

from __future__ import annotations

import re

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~:$=^])")


def escape_markdown(text: str) -> str:
    """User text for a Streamlit Markdown string: every formatting character escaped, newlines folded.

    Run names and metadata come from files anyone can write; shown raw they could add links,
    images or layout to the page. (The pages never render user text as HTML.)
    """
    return _MD_SPECIAL.sub(r"\\\1", " ".join(str(text).split()))


def escape_code(text: str) -> str:
    """User text for an inline code span: backticks cannot end the span early."""
    return " ".join(str(text).replace("`", "'").split())
