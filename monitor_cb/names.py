"""Metric names as written, and how a page shows one (pure, stdlib; docs/FORMAT.md, "Metric names").

A metric keeps the name its writer gave it (``train/loss``, ``Losses/Policy Loss``, ``Loss`` and
``loss`` are three metrics), whatever the characters. Stored and exported names are never changed;
only the text a page shows is made safe to read: control characters (a newline, an escape) become
visible escapes, and a very long name is cut in the middle with a short hash, so two long names that
differ only at the cut still look different.
"""

from __future__ import annotations

import hashlib
import re

SHOWN_LIMIT = 120  # characters of a name a page shows before it cuts the middle out
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
GROUP_SEPARATORS = ("/", ".")


def _escape(match: re.Match[str]) -> str:
    char = match.group(0)
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char, f"\\u{ord(char):04x}")


def shown_name(name: str, limit: int = SHOWN_LIMIT) -> str:
    """``name`` as a page shows it: control and direction characters escaped, at most about ``limit`` characters.

    ``"a\\nb"`` shows as ``a\\nb`` (a backslash and an n); a 10 kB name as its first and last
    characters around ``…[#1a2b3c4d]…``, the hash of the whole name.
    """
    text = _CONTROL.sub(_escape, str(name))
    if len(text) <= limit:
        return text
    digest = hashlib.blake2s(str(name).encode("utf-8", "surrogatepass"), digest_size=4).hexdigest()
    keep = max(limit - 14, 2)
    head, tail = keep - keep // 3, keep // 3
    return f"{text[:head]}…[#{digest}]…{text[len(text) - tail :]}"


def name_group(name: str) -> str:
    """The group a name belongs to: its part before the first ``/`` or ``.`` (``""`` for a name without one).

    ``train/loss`` -> ``train``; ``local_norm.layer0`` -> ``local_norm``; ``loss`` -> ``""``.
    """
    cut = min((i for i in (name.find(s) for s in GROUP_SEPARATORS) if i > 0), default=-1)
    return name[:cut] if cut > 0 else ""
