"""Diagnosis: catch the classic training failures in a run's frame, as pure functions.

```python
from monitor_cb.diagnosis import diagnose, load_settings

data = store.read(run_id)
findings = diagnose(data.frame, load_settings(root), status=info.status, last_write=info.last_write, logged=data.masks)
```

Each detector is ``detect_xxx(frame, settings) -> list[Finding]`` (``stalled`` also takes the run's
status and the time; ``straggler`` and ``rank_divergence`` compare the ranks of a merged frame);
none imports Streamlit or MindSpore. Names load lazily, so the CLI's ``diagnose`` command module
(imported to build the parser) does not pull in pandas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

_LAZY = {
    "RANK_DETECTORS": "engine",
    "SERIES_DETECTORS": "engine",
    "diagnose": "engine",
    "KINDS": "findings",
    "SEVERITIES": "findings",
    "Finding": "findings",
    "severity_rank": "findings",
    "sort_findings": "findings",
    "worst_severity": "findings",
    "detect_divergence": "divergence",
    "detect_lr_anomaly": "lr_schedule",
    "detect_nan": "nonfinite",
    "detect_overfitting": "overfit",
    "detect_sawtooth": "periodic",
    "detect_plateau": "progress",
    "detect_stalled": "progress",
    "detect_rank_divergence": "ranks",
    "detect_straggler": "ranks",
    "read_rank_places": "ranks",
    "DiagnosisSettings": "settings",
    "HELP": "settings",
    "load_settings": "settings",
    "load_settings_checked": "settings",
    "save_settings": "settings",
    "settings_path": "settings",
    "detect_grad_explosion": "spikes",
    "detect_loss_spike": "spikes",
    "detect_throughput_drop": "throughput",
}
__all__ = [
    "HELP",
    "KINDS",
    "RANK_DETECTORS",
    "SERIES_DETECTORS",
    "SEVERITIES",
    "DiagnosisSettings",
    "Finding",
    "detect_divergence",
    "detect_grad_explosion",
    "detect_loss_spike",
    "detect_lr_anomaly",
    "detect_nan",
    "detect_overfitting",
    "detect_plateau",
    "detect_rank_divergence",
    "detect_sawtooth",
    "detect_stalled",
    "detect_straggler",
    "detect_throughput_drop",
    "diagnose",
    "load_settings",
    "load_settings_checked",
    "read_rank_places",
    "save_settings",
    "settings_path",
    "severity_rank",
    "sort_findings",
    "worst_severity",
]

if TYPE_CHECKING:  # pragma: no cover
    from monitor_cb.diagnosis.divergence import detect_divergence
    from monitor_cb.diagnosis.engine import RANK_DETECTORS, SERIES_DETECTORS, diagnose
    from monitor_cb.diagnosis.findings import (
        KINDS,
        SEVERITIES,
        Finding,
        severity_rank,
        sort_findings,
        worst_severity,
    )
    from monitor_cb.diagnosis.lr_schedule import detect_lr_anomaly
    from monitor_cb.diagnosis.nonfinite import detect_nan
    from monitor_cb.diagnosis.overfit import detect_overfitting
    from monitor_cb.diagnosis.periodic import detect_sawtooth
    from monitor_cb.diagnosis.progress import detect_plateau, detect_stalled
    from monitor_cb.diagnosis.settings import (
        HELP,
        DiagnosisSettings,
        load_settings,
        load_settings_checked,
        save_settings,
        settings_path,
    )
    from monitor_cb.diagnosis.spikes import detect_grad_explosion, detect_loss_spike
    from monitor_cb.diagnosis.stragglers import detect_rank_divergence, detect_straggler, read_rank_places
    from monitor_cb.diagnosis.throughput import detect_throughput_drop


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'monitor_cb.diagnosis' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"monitor_cb.diagnosis.{module}"), name)
    globals()[name] = value
    return value
