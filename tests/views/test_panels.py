"""monitor_cb.views.panels: which chart panels a run's columns fill."""

from __future__ import annotations

from monitor_cb.views.panels import panels_for


def test_panels_follow_columns() -> None:
    keys = [p.key for p in panels_for(["step", "t", "loss", "lr", "loss_scale"])]
    assert keys == ["loss_lr", "custom"]  # loss_scale is not a component loss
    keys = [p.key for p in panels_for(["loss", "eval_loss", "loss_cls", "data_time", "mem_host_rss"])]
    assert keys == ["loss_lr", "eval", "components", "timing", "memory", "custom"]
