"""Diagnosis: catch the classic training failures in a run's frame, as pure functions.

```python
from monitor_cb.diagnosis import diagnose, load_settings

findings = diagnose(store.frame(run_id), load_settings(root), status=info.status, last_write=info.last_write)
```

Each detector is ``detect_xxx(frame, settings) -> list[Finding]`` (``stalled`` also takes the run's
status and the time); none imports Streamlit or MindSpore.
"""

from monitor_cb.diagnosis.engine import SERIES_DETECTORS, diagnose
from monitor_cb.diagnosis.findings import KINDS, SEVERITIES, Finding, severity_rank, sort_findings, worst_severity
from monitor_cb.diagnosis.lr import detect_lr_anomaly
from monitor_cb.diagnosis.nonfinite import detect_nan
from monitor_cb.diagnosis.overfit import detect_overfitting
from monitor_cb.diagnosis.periodic import detect_sawtooth
from monitor_cb.diagnosis.progress import detect_plateau, detect_stalled
from monitor_cb.diagnosis.settings import (
    DiagnosisSettings,
    load_settings,
    load_settings_checked,
    save_settings,
    settings_path,
)
from monitor_cb.diagnosis.spikes import detect_grad_explosion, detect_loss_spike
from monitor_cb.diagnosis.throughput import detect_throughput_drop

__all__ = [
    "KINDS",
    "SERIES_DETECTORS",
    "SEVERITIES",
    "DiagnosisSettings",
    "Finding",
    "detect_grad_explosion",
    "detect_loss_spike",
    "detect_lr_anomaly",
    "detect_nan",
    "detect_overfitting",
    "detect_plateau",
    "detect_sawtooth",
    "detect_stalled",
    "detect_throughput_drop",
    "diagnose",
    "load_settings",
    "load_settings_checked",
    "save_settings",
    "settings_path",
    "severity_rank",
    "sort_findings",
    "worst_severity",
]
