"""A run and a frame for the live-page logic tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd


@dataclass
class FakeRun:
    id: str
    name: str = ""
    status: str = "running"
    last_write: float = 1000.0
    last_step: int | None = None
    n_records: int = 0
    meta: dict[str, Any] = field(default_factory=dict)


def frame(n: int = 100, t0: float = 1000.0, dt: float = 0.5, **cols: Any) -> pd.DataFrame:
    steps = np.arange(1, n + 1) * 10
    data = {"step": steps, "t": t0 + np.arange(n) * dt, "loss": np.linspace(3, 1, n), "lr": np.full(n, 1e-3)}
    data.update(cols)
    return pd.DataFrame(data)


def asgi_request(app: Any, scope: dict[str, Any]) -> list[dict[str, Any]]:
    """Drive one request ``scope`` through the ASGI ``app`` (a middleware); the messages it sent, in order."""
    import asyncio

    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return sent
