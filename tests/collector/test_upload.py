"""LiveMonitor(upload=...) under a real ``Model.train`` on the CPU, shipping to a moto S3 server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mindspore import nn
from mindspore.train import Model

from monitor_cb import LiveMonitor
from tests.collector.ms_helpers import Net, ce, dataset
from tests.objectstore import S3Env, list_keys
from tests.storage.helpers import bucket_matches_local

pytestmark = pytest.mark.mindspore


def test_training_ships_its_run_to_the_bucket(s3_env: S3Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("RANK_ID", "RANK_SIZE", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    net = Net()
    model = Model(net, ce(), nn.SGD(net.trainable_params(), learning_rate=0.01))
    monitor = LiveMonitor(tmp_path / "run", log_interval=2, upload=s3_env.url("runs", "exp1"))
    model.train(2, dataset(10), callbacks=[monitor], dataset_sink_mode=False)
    bucket_matches_local(s3_env.endpoint, s3_env.bucket, "runs/exp1", tmp_path / "run")
    meta = json.loads(list_keys(s3_env.endpoint, s3_env.bucket, "runs/exp1")["runs/exp1/metrics.meta.json"])
    assert meta["status"] == "finished" and meta["total_steps"] == 20


def test_a_bad_upload_is_refused_before_training() -> None:
    with pytest.raises(ValueError, match="nosuchproto"):
        LiveMonitor("logs/x", upload="nosuchproto://bucket/x")
    with pytest.raises(TypeError):
        LiveMonitor("logs/x", upload=42)
