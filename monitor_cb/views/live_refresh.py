"""One live refresh, computed once for every viewer: the run read -> its series -> tiles, banner, figures.

The data goes down the layers once: :class:`~monitor_cb.analysis.live_series.LiveSeries` extracts
each column, mask and x axis the refresh needs from the run read (``store.read`` -> ``RunFrame``),
and the tiles, the NaN banner and every chart read those arrays.

Thirty people watching one run ask for the same figures of the same data version. A
:class:`LiveShared` (one per store and server process) keeps, in
:class:`~monitor_cb.ingest.viewer_work.SharedResults`, the series per data version and the finished
figures per (data version, chart settings, zoom, findings): the first viewer to ask computes them,
the others reuse them, and a viewer whose run has no new data does no chart work at all. The
figures are :class:`~monitor_cb.charts.prepared.PreparedFigure`, whose plotly dict is built once
too. Only the tiles (their clock-dependent "elapsed" and "since update") are made per viewer.

Diagnosis takes seconds on a long run, so it runs in :class:`~monitor_cb.ingest.viewer_work.Background`
(``LiveShared.background``), off the request path: see ``pages/_findings.run_findings``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from monitor_cb.analysis.live_series import LiveSeries
from monitor_cb.charts.findings import MAX_LABELS, MAX_SHAPES, FindingMarks, finding_marks, step_mapper, with_marks
from monitor_cb.charts.notes import add_note, grad_norm_note
from monitor_cb.charts.prepared import PreparedFigure
from monitor_cb.charts.style import marks_to_log_x
from monitor_cb.ingest.viewer_work import Background, SharedResults
from monitor_cb.views.findings_view import charted, finding_key
from monitor_cb.views.kpis import Kpis, compute_kpis, nan_banner
from monitor_cb.views.live import ChartSettings, figures_key, live_figures
from monitor_cb.views.zoom import ZoomState

# Series of the newest data versions (each a few arrays of the run's length); figures per settings and zoom.
SERIES_ENTRIES = 4
FIGURE_ENTRIES = 32


class LiveShared:
    """What the viewers of one store share: series and figures by key, and the background worker."""

    def __init__(self, series_entries: int = SERIES_ENTRIES, figure_entries: int = FIGURE_ENTRIES) -> None:
        self.series = SharedResults(series_entries)
        self.figures = SharedResults(figure_entries)
        self.background = Background()


@dataclass(frozen=True)
class LiveRequest:
    """What a refresh draws besides the data: the chart settings and zoom, and what is marked on the charts.

    Attributes:
        settings: the chart controls.
        zoom: the session's zoom and hidden legend entries.
        findings: diagnosis findings drawn on every chart (info notes only with ``notes_on_charts``).
        other_ranks: one rank drawn of a multi-rank run: metric -> the other ranks' NaN/±inf cells.
        series_key: (root, run id): lets the charts extend the cached smoothing and downsampling.
        notes_on_charts: draw info findings (plateau notes) too; off, only warnings and errors are marked.
    """

    settings: ChartSettings
    zoom: ZoomState
    findings: tuple[Any, ...] = ()
    other_ranks: Mapping[str, Any] | None = None
    series_key: Hashable = None
    notes_on_charts: bool = False

    def drawn(self) -> tuple[Any, ...]:
        """The findings marked on the charts (:func:`~monitor_cb.views.findings_view.charted`)."""
        return charted(self.findings, self.notes_on_charts)

    def key(self, data: Any) -> tuple[Any, ...]:
        """Equal keys give equal figures: the data read, settings, zoom, findings, other ranks' marks."""
        others = tuple(sorted((m, len(c)) for m, c in (self.other_ranks or {}).items()))
        return (
            figures_key(data, self.settings, self.zoom),
            tuple(finding_key(f) for f in self.drawn()),
            others,
            self.series_key,
        )


@dataclass(frozen=True)
class LiveData:
    """What one refresh shows."""

    run: Any
    kpis: Kpis
    banner: str | None
    figures: dict[str, Any]
    empty: bool
    findings: tuple[Any, ...] = ()
    roles: tuple[str, ...] = ()  # "loss: train/loss (HF Trainer's name)", when a role is not played by our key


def roles_note(casting: Any) -> tuple[str, ...]:
    """The lines saying which metric plays which role and why, when that is worth saying: some role is played
    by a name other than the format's own (another framework's run), or set by hand. Empty for our own runs."""
    ours = all(casting.metrics[role] == (role,) for role in casting.metrics if role not in ("eval_metric",))
    ours = ours and all(name.startswith("eval_") for name in casting.of("eval_metric"))
    hand = any(why.startswith("set ") for why in casting.why.values())
    return () if ours and not hand and not casting.unknown else tuple(casting.lines())


def series_of(data: Any, shared: LiveShared | None = None) -> LiveSeries:
    """The run read's series: one per data version for every viewer when ``shared`` is given."""
    if shared is None or getattr(data, "key", None) is None:
        return LiveSeries.of(data)
    return shared.series.get(("series", data.key), lambda: LiveSeries.of(data))  # type: ignore[no-any-return]


# A finding's label (its kind, with the message on hover) goes on the chart of the metric it is about;
# the others on the first chart shown. Every chart draws every finding's line or band.
LABEL_PANELS = {
    "grad_explosion": "speed_grad",
    "throughput_drop": "speed_grad",
    "stalled": "speed_grad",
    "straggler": "speed_grad",
    "overfitting": "eval",
}

# (findings, labels?) -> their marks: lines and bands only, or labels only
Marker = Callable[[tuple[Any, ...], bool], FindingMarks]


def label_homes(findings: Sequence[Any], keys: Sequence[str]) -> dict[str, tuple[Any, ...]]:
    """The findings each chart labels (``keys``: the charts shown, top first; see :data:`LABEL_PANELS`)."""
    homes: dict[str, list[Any]] = {key: [] for key in keys}
    for finding in findings:
        home = LABEL_PANELS.get(finding.kind)
        homes[home if home in homes else keys[0]].append(finding)
    return {key: tuple(mine) for key, mine in homes.items()}


def chart_marks(findings: tuple[Any, ...], keys: Sequence[str], marker: Marker) -> dict[str, FindingMarks]:
    """Per chart: every finding's line or band, and the labels of the findings it is home to."""
    if not keys:
        return {}
    lines = marker(findings, False).shapes
    homes = label_homes(findings, keys)
    return {key: FindingMarks(lines, marker(homes[key], True).labels if homes[key] else ()) for key in keys}


def plain_marker(series: LiveSeries, x: str) -> Marker:
    """Marks computed when asked (one refresh of one viewer)."""
    to_x = step_mapper(series, x)

    def marker(findings: tuple[Any, ...], labels: bool) -> FindingMarks:
        return finding_marks(
            findings, to_x, max_shapes=0 if labels else MAX_SHAPES, max_labels=MAX_LABELS if labels else 0
        )

    return marker


def shared_marker(series: LiveSeries, data: Any, x: str, shared: LiveShared) -> Marker:
    """Marks shared by the refreshes of every viewer: on the step axis they do not depend on the data
    version, so a refresh with new records but the same findings reuses them."""
    plain = plain_marker(series, x) if x != "step" else None
    version = None if x == "step" else data.key

    def marker(findings: tuple[Any, ...], labels: bool) -> FindingMarks:
        key = ("marks", tuple(finding_key(f) for f in findings), labels, x, version)
        compute = plain if plain is not None else plain_marker(series, x)
        return shared.figures.get(key, lambda: compute(findings, labels))  # type: ignore[no-any-return]

    return marker


def build_figures(
    series: LiveSeries, run: Any, request: LiveRequest, marker: Marker | None = None
) -> dict[str, PreparedFigure]:
    """The refresh's figures from its series: panels, the gradient-norm note, findings; each prepared.

    The findings' marks are appended to each chart's dict (made by ``marker``: shared by the viewers,
    or here when not given), not added through plotly's validated objects.
    """
    settings = request.settings
    figures = live_figures(
        series,
        settings,
        request.zoom,
        None,
        f"{run.id}|{settings.x}",
        request.series_key,
        request.other_ranks or None,
        prepared=True,  # drawn as they are: their dicts are built directly, without plotly objects
    )
    note = grad_norm_note(series.columns, getattr(run, "meta", None)) if "speed_grad" in figures else None
    if note:  # the chart says why it shows throughput only, and how to get the norm
        add_note(figures["speed_grad"], note)
    log_x = settings.log_x and settings.x != "time"
    drawn = request.drawn()
    if not drawn and not log_x:
        return {key: PreparedFigure.of(fig) for key, fig in figures.items()}
    marks = chart_marks(drawn, list(figures), marker or plain_marker(series, settings.x)) if drawn else {}
    out = {}
    for key, fig in figures.items():
        spec = with_marks(fig.to_dict(), marks[key]) if key in marks else fig.to_dict()
        out[key] = PreparedFigure.of(marks_to_log_x(spec) if log_x else spec)
    return out


def process(run: Any, data: Any, request: LiveRequest, now: float, shared: LiveShared | None = None) -> LiveData:
    """Everything one refresh shows, computed without Streamlit (the benchmarks time this).

    With ``shared``, the series and the figures come from the viewers' shared results: a refresh of
    a run with no new records (or one another viewer already drew) builds no figure.
    """
    series = series_of(data, shared)
    if len(series) == 0:
        return LiveData(run, compute_kpis(series, run, now), None, {}, True)
    casting = request.settings.casting(series.columns)
    kpis = compute_kpis(series, run, now, casting=casting)
    loss = casting.first("loss")
    banner = nan_banner(series.first_nonfinite(loss), loss, now) if loss is not None and series.has(loss) else None
    if shared is None:
        figures = build_figures(series, run, request)
    else:
        marker = shared_marker(series, data, request.settings.x, shared)
        figures = shared.figures.get(
            ("figures", request.key(data)), lambda: build_figures(series, run, request, marker)
        )
    return LiveData(run, kpis, banner, figures, False, tuple(request.findings), roles_note(casting))
