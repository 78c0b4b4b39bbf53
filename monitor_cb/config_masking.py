"""A run's configuration with places and credentials masked, for both sides: the config LiveMonitor writes into
the metadata, and the config texts another tool (MindFormers through TensorBoard) wrote into its event files.

A log root is shared and a dashboard may be served to people who cannot read its files: values that name
places or credentials are not shown as they are. Paths keep only their last part (``…/llama2_7b.ckpt``),
URLs their scheme and host, secret-looking keys and credential values from the environment become ``***``.
Pure, standard library only.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import Any

from monitor_cb.masking import MASK, mask_url
from monitor_cb.storage.urls import redact_credentials

SECRET_KEY = re.compile(r"secret|passw|(^|hf_|access_|auth_|api_)token$|api_?key|access_?key|credential", re.I)
PATH_KEY = re.compile(r"(dir|path|file|ckpt|checkpoint)(_or_path)?$|^load_checkpoint$", re.I)
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://", re.I)
MAX_DEPTH = 8
MAX_ITEMS = 200
MAX_TEXT = 500
MAX_CONFIG_TEXT = 100_000  # a config text longer than this is not parsed (and is cut)
# a quoted absolute or home path inside a text that is not a Python literal
_QUOTED_PATH = re.compile(r"""(['"])(?:/|~/)[^'"\n]*?([^/'"\n]+)\1""")


def mask_config(value: Any, key: str = "", depth: int = 0) -> Any:
    """``value`` with secrets, paths and URLs masked (see the module docstring), recursively."""
    if depth > MAX_DEPTH:
        return MASK
    if isinstance(value, dict):
        return {str(k): mask_config(v, str(k), depth + 1) for k, v in list(value.items())[:MAX_ITEMS]}
    if isinstance(value, list):
        return [mask_config(v, key, depth + 1) for v in value[:MAX_ITEMS]]
    if not isinstance(value, str):
        return value
    if not value:
        return value
    if SECRET_KEY.search(key):
        return MASK
    if _URL.match(value):
        return mask_url(value)
    has_dirs = "/" in value or "\\" in value
    if (PATH_KEY.search(key) and has_dirs) or value.startswith(("/", "~", "./", "../")) or "\\" in value:
        return "…/" + re.split(r"[/\\]", value.rstrip("/\\"))[-1] if value.strip("/\\") else MASK
    return redact_credentials(value)[:MAX_TEXT]


def mask_config_texts(texts: Mapping[str, str]) -> dict[str, str]:
    """Config texts (tag -> text, as MindFormers writes each section: a Python literal such as
    ``"{'load_checkpoint': '/data/x.ckpt', ...}"``) with :func:`mask_config` applied to what they hold.

    A text that is a literal is parsed (``ast.literal_eval``: data only, nothing runs), masked and written
    back the same way; any other text gets its quoted paths and credentials masked in place."""
    return {str(tag): _mask_text(str(tag), str(text)) for tag, text in list(texts.items())[:MAX_ITEMS]}


def _mask_text(tag: str, text: str) -> str:
    if SECRET_KEY.search(tag):
        return MASK
    text = text[:MAX_CONFIG_TEXT]
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        value = None
    if isinstance(value, dict | list):
        return repr(mask_config(value, tag))
    if "\n" not in text and (text.startswith(("/", "~", "./", "../")) or _URL.match(text)):
        return str(mask_config(text, tag))  # the whole text is one path or URL
    return redact_credentials(_QUOTED_PATH.sub(lambda m: f"{m[1]}…/{m[2]}{m[1]}", text))
