"""Object-store URLs: tell one from a path, split off credentials, build fsspec options, redact.

Credentials come from the SDK's usual places (``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` /
``AWS_SESSION_TOKEN``, ``~/.aws/credentials``, instance roles). A URL may also carry them
(``s3://KEY:SECRET@bucket/prefix``): they are split off at once, passed to the SDK only, and every
text this package shows or writes goes through :func:`redact_credentials` first. Standard library only: the
writer imports this without fsspec.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from monitor_cb.masking import redact

ENV_ENDPOINT = "MONITOR_ENDPOINT_URL"  # ours; AWS_ENDPOINT_URL_S3 and AWS_ENDPOINT_URL are honoured too
ENV_OPTIONS = "MONITOR_STORAGE_OPTIONS"  # JSON object of fsspec storage options
ENV_STATE = "MONITOR_STATE_DIR"  # where a remote root's local settings live (default ~/.cache/monitor_cb)
# Values that must never be shown: the SDKs' secret variables (the key id too: it names the account).
SECRET_ENV = (
    "AWS_SECRET_ACCESS_KEY",
    "AWS_ACCESS_KEY_ID",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "OBS_SECRET_ACCESS_KEY",
    "OBS_ACCESS_KEY_ID",
    "MINIO_SECRET_KEY",
    "MINIO_ROOT_PASSWORD",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "AZURE_STORAGE_KEY",
    "AZURE_STORAGE_CONNECTION_STRING",
    "AZURE_STORAGE_SAS_TOKEN",
)
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")
_LOCAL_SCHEMES = ("file", "local")
_S3 = ("s3", "s3a")
# Storage-option keys whose values are secrets (s3fs, gcsfs, adlfs spellings).
_SECRET_KEYS = re.compile(r"secret|password|token|key$|^key|credential|sas|connection_string", re.I)


# Credentials a URL carried, by (protocol, bucket): the URL is cleaned once at the edge (command line,
# page) and every later open of the same bucket finds them here, so no string downstream holds them.
_CREDENTIALS: dict[tuple[str, str], dict[str, str]] = {}


class StorageError(OSError):
    """A remote operation failed; the message names the object (credentials removed) and the cause."""


@dataclass(frozen=True)
class RemoteURL:
    """A remote location without credentials: ``protocol`` (``s3``) and ``path`` (``bucket/prefix``)."""

    protocol: str
    path: str

    def __str__(self) -> str:
        return f"{self.protocol}://{self.path}"

    def child(self, *names: str) -> RemoteURL:
        return RemoteURL(self.protocol, "/".join([self.path.rstrip("/"), *names]).strip("/"))


def is_url(value: object) -> bool:
    """True for ``s3://...``, ``obs://...``, ``memory://...`` (any ``scheme://`` but ``file://``)."""
    if isinstance(value, RemoteURL):
        return True
    if not isinstance(value, str):
        return False
    match = _SCHEME.match(value)
    return bool(match) and match.group(1).lower() not in _LOCAL_SCHEMES


def local_path(value: str) -> str:
    """``file:///x`` -> ``/x``; anything else unchanged."""
    match = _SCHEME.match(value)
    if match and match.group(1).lower() in _LOCAL_SCHEMES:
        return value[match.end() :]  # file:///x -> /x (the third slash starts the path)
    return value


def parse_url(url: str | RemoteURL) -> tuple[RemoteURL, dict[str, str]]:
    """The location and the credentials the URL carried (``{"key": ..., "secret": ...}``, else empty).

    ``obs://`` is Huawei OBS through its S3 API (give its endpoint URL). Query strings are refused:
    options go in ``$MONITOR_STORAGE_OPTIONS`` where they cannot leak into a path shown on a page.
    """
    if isinstance(url, RemoteURL):
        return url, {}
    match = _SCHEME.match(url)
    if not match:
        raise ValueError(f"not an object-store URL: {redact_credentials(url)!r} (expected scheme://bucket/prefix)")
    protocol = match.group(1).lower()
    rest = url[match.end() :]
    credentials: dict[str, str] = {}
    netloc, _, tail = rest.partition("/")
    if "@" in netloc:
        userinfo, _, netloc = netloc.rpartition("@")
        user, _, password = userinfo.partition(":")
        if user:
            credentials["key"] = unquote(user)
        if password:
            credentials["secret"] = unquote(password)
    if "?" in tail or "?" in netloc or "#" in rest:
        raise ValueError(
            f"{redact_credentials(url)}: query strings are not supported in a log URL; "
            f"put storage options in ${ENV_OPTIONS}"
        )
    if not netloc:
        raise ValueError(f"{redact_credentials(url)}: no bucket (expected {protocol}://bucket/prefix)")
    path = "/".join(p for p in [netloc, *tail.split("/")] if p)
    if any(part in (".", "..") for part in path.split("/")):
        raise ValueError(f"{redact_credentials(url)}: '.' and '..' are not allowed in an object-store path")
    remote = RemoteURL("s3" if protocol in ("obs", "s3a") else protocol, path)
    bucket = (remote.protocol, path.split("/", 1)[0])
    if credentials:
        _CREDENTIALS[bucket] = dict(credentials)
    return remote, dict(_CREDENTIALS.get(bucket, {}))


def clean_url(url: str) -> str:
    """The URL without credentials (they are kept in this process for later opens of the bucket)."""
    return str(parse_url(url)[0])


def storage_options(
    remote: RemoteURL,
    credentials: Mapping[str, str] | None = None,
    endpoint_url: str | None = None,
    extra: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """fsspec options: ``$MONITOR_STORAGE_OPTIONS``, then ``extra``, the endpoint and URL credentials on top.

    The endpoint (S3 protocols) is ``endpoint_url``, else ``$MONITOR_ENDPOINT_URL``, else
    ``$AWS_ENDPOINT_URL_S3``, else ``$AWS_ENDPOINT_URL``, else the SDK's default (AWS).
    """
    env = os.environ if env is None else env
    options: dict[str, Any] = {}
    raw = env.get(ENV_OPTIONS)
    if raw:
        try:
            loaded = json.loads(raw)
        except ValueError as exc:
            raise ValueError(f"${ENV_OPTIONS} is not valid JSON ({exc.__class__.__name__})") from None
        if not isinstance(loaded, dict):
            raise ValueError(f"${ENV_OPTIONS} must be a JSON object of fsspec storage options")
        options.update(loaded)
    options.update(extra or {})
    if remote.protocol in _S3:
        endpoint = (
            endpoint_url
            or env.get(ENV_ENDPOINT)
            or env.get("AWS_ENDPOINT_URL_S3")
            or env.get("AWS_ENDPOINT_URL")
            or options.get("endpoint_url")
        )
        if endpoint:
            options["endpoint_url"] = endpoint
    options.update(credentials or {})
    return options


def secret_values(options: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None) -> list[str]:
    """Every credential value in the environment and in ``options`` (nested ones included)."""
    env = os.environ if env is None else env
    found = [env[name] for name in SECRET_ENV if env.get(name)]

    def walk(mapping: Mapping[str, Any]) -> None:
        for key, value in mapping.items():
            if isinstance(value, Mapping):
                walk(value)
            elif isinstance(value, str) and _SECRET_KEYS.search(str(key)):
                found.append(value)

    walk(options or {})
    for credentials in _CREDENTIALS.values():
        found.extend(credentials.values())
    return found


def redact_credentials(text: object, secrets: Iterable[str] = ()) -> str:
    """``text`` without URL userinfo and without any credential value (environment ones included)."""
    return redact(text, [*secret_values(), *secrets])


def state_dir(root: object, env: Mapping[str, str] | None = None) -> Path:
    """Where a log root's own settings (``.monitor/``) live: the root itself, or for a URL a local folder.

    A dashboard or watcher may read a bucket it cannot write, so a remote root's settings are kept
    on this machine, under ``$MONITOR_STATE_DIR`` (default ``~/.cache/monitor_cb``), one folder per URL.
    """
    text = str(root)
    if not is_url(text):
        return Path(local_path(text))
    remote, _ = parse_url(text)
    env = os.environ if env is None else env
    base = Path(env.get(ENV_STATE) or Path.home() / ".cache" / "monitor_cb").expanduser()
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", str(remote))[:80]
    digest = hashlib.sha256(str(remote).encode()).hexdigest()[:10]
    return base / "remote" / f"{slug}-{digest}"
