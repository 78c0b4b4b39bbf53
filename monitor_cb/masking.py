"""Secrets that never print: a str wrapper with a masked repr, and redaction of any text (both sides use it).

Webhook URLs carry their credential (Slack's path, DingTalk's ``access_token``,
WeCom's ``key``), so the whole URL is a secret; only its scheme and host are shown.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit

MASK = "***"


class Secret:
    """A secret value (webhook URL, signing key, SMTP password) whose repr and str are masked.

    ``secret.reveal()`` is the only way to the value; call it where the value is used, never in a
    log call or an f-string.
    """

    __slots__ = ("_value", "source")

    def __init__(self, value: str, source: str = "") -> None:
        self._value = str(value)
        self.source = source  # where it came from ("$SLACK_WEBHOOK_URL"), safe to show

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"Secret({self.source or MASK})"

    __str__ = __repr__

    def __bool__(self) -> bool:
        return bool(self._value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __reduce__(self) -> None:  # never pickled into a file or another process by accident
        raise TypeError("a Secret cannot be pickled")

    def __copy__(self) -> Secret:  # copying within the process is harmless (a callback may be deep-copied)
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> Secret:
        return self


def mask_url(url: str | Secret | None) -> str:
    """``https://hooks.slack.com/services/T0/B0/xyz`` -> ``https://hooks.slack.com/***``."""
    if url is None:
        return ""
    raw = url.reveal() if isinstance(url, Secret) else str(url)
    try:
        parts = urlsplit(raw)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return MASK
    if not parts.scheme or not host:
        return MASK
    return f"{parts.scheme}://{host}{port}/{MASK}"


# The userinfo after any "<scheme char>://": found from the "://" (a fixed look-behind), never by trying a scheme
# from every letter of a long run of them (100 kB of "yyy…" in a shared root's config text took 22 s that way).
_USERINFO = re.compile(r"(?<=[a-zA-Z0-9+.-]://)[^/@\s]*@")


def redact(text: object, secrets: Iterable[Secret | str | None] = ()) -> str:
    """``text`` with every secret value (and its URL-quoted forms) and any URL's userinfo replaced by ``***``.

    The one redaction of the package: the notifier passes its channels' secrets, the object-store side
    its credentials (:func:`monitor_cb.storage.urls.redact_credentials`).
    """
    out = _USERINFO.sub(MASK + "@", str(text))
    for secret in secrets:
        if not secret:
            continue
        value = secret.reveal() if isinstance(secret, Secret) else str(secret)
        if len(value) < 4:  # too short to redact without mangling the text; never log such values
            continue
        for form in _forms(value):
            out = out.replace(form, MASK)
    return out


def _forms(value: str) -> list[str]:
    from urllib.parse import quote, quote_plus

    forms = {value, quote(value, safe=""), quote_plus(value), quote(value)}
    # A URL's secret part also shows up alone (the path or the query of a webhook URL).
    try:
        parts = urlsplit(value)
        if parts.scheme and parts.netloc:
            for piece in (parts.path, parts.query, parts.path + ("?" + parts.query if parts.query else "")):
                if len(piece) > 6:
                    forms.add(piece)
            forms.update(m for m in re.findall(r"[A-Za-z0-9_\-]{12,}", parts.path + "?" + parts.query))
    except ValueError:
        pass
    return sorted(forms, key=len, reverse=True)
