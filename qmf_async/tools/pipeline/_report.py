"""The static HTML report of the pipeline: PNG plots (matplotlib, Agg) and tables.

Works on small, already collected aggregates (plain Python values), so it needs no
Spark; the plots are written next to ``report.html`` and referenced relatively.
"""

from __future__ import annotations

import datetime as _dt
import html
import os
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["PLOTS_DIR", "PlotSeries", "Series", "write_report"]

#: folder of the PNG files, relative to the report
PLOTS_DIR = "plots"

#: label -> points (ts ns, value) in time order
Series = Mapping[str, Sequence[tuple[int, float]]]
#: the windows of one plotted series: (window start ns, average, partial?) in time order
PlotSeries = Sequence[tuple[int, float, bool]]


def _when(ns: int | None) -> str:
    if ns is None:
        return "-"
    moment = _dt.datetime.fromtimestamp(ns / 1e9, tz=_dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _span(first: int | None, last: int | None) -> str:
    if first is None or last is None:
        return ""
    return f" ({_duration(round((last - first) / 1e9))})"


def _int(value: Any) -> int | None:
    return None if value is None else round(float(value))


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return html.escape(str(value))


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds >= 90 and seconds % 60 == 0:
        minutes = seconds / 60
        return f"{minutes:g} min" if minutes < 90 else f"{minutes / 60:g} h"
    return f"{seconds:.3g} s"


def _runs(points: Sequence[tuple[int, float, bool]], gap_ns: float
          ) -> tuple[list[list[tuple[int, float]]], list[tuple[int, float]]]:
    """Full windows in runs without a gap (a missing window ends a run), and the
    partial windows apart."""
    runs: list[list[tuple[int, float]]] = []
    partial: list[tuple[int, float]] = []
    last: int | None = None
    for ts, value, is_partial in points:
        if is_partial:
            partial.append((ts, value))
            last = None  # a partial window also ends a run: it is drawn alone
            continue
        if last is None or ts - last > gap_ns:
            runs.append([])
        runs[-1].append((ts, value))
        last = ts
    return runs, partial


def _short(label: str, width: int = 40) -> str:
    """A legend entry of at most ``width`` characters: a long name keeps its head and
    its tail (where generated names differ), the middle cut to an ellipsis."""
    if len(label) <= width:
        return label
    tail = (width - 1) * 3 // 5
    return label[:width - 1 - tail] + "\u2026" + label[-tail:]


def _plot(path: str, title: str, ylabel: str,
          series: Mapping[str, Sequence[tuple[int, float]] | PlotSeries], *,
          stacked_bars: bool = False, bar_width_s: float = 60.0,
          window_s: float | None = None) -> None:
    """One PNG: a line per series (or stacked bars), time on the x axis (UTC).

    Line series are windows (start, average, partial): a missing window is a gap in
    the line, and a partial window an open circle that is not joined to the others.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter, date2num
    from matplotlib.figure import Figure

    # matplotlib dates are days since its epoch (1970-01-01 unless configured)
    origin = float(date2num(  # type: ignore[no-untyped-call]
        _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)))

    def x_of(ts: float) -> float:
        return origin + ts / 86_400e9

    fig = Figure(figsize=(11, 4.2), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    plotted = False
    any_partial = False
    half = (window_s or 0) * 1e9 / 2  # a window's point sits in its middle
    if stacked_bars:
        times = sorted({ts for points in series.values() for ts, *_ in points})
        bottom = dict.fromkeys(times, 0.0)
        width = bar_width_s / 86_400 * 0.9
        for label, points in series.items():
            if not points:
                continue
            xs = [x_of(ts) for ts, *_ in points]
            ys = [float(p[1]) for p in points]
            base = [bottom[p[0]] for p in points]
            ax.bar(xs, ys, width=width, bottom=base, label=_short(label), align="edge")
            for ts, v, *_ in points:
                bottom[ts] += float(v)
            plotted = True
    else:
        gap_ns = 1.5 * (window_s or 60) * 1e9
        for index, (label, points) in enumerate(series.items()):
            if not points:
                continue
            color = f"C{index % 10}"
            runs, partial = _runs([(p[0], float(p[1]), bool(p[2]) if len(p) > 2 else False)
                                   for p in points], gap_ns)
            labelled = False
            for run in runs:
                xs = [x_of(ts + half) for ts, _ in run]
                ax.plot(xs, [v for _, v in run], color=color, marker="o", markersize=3,
                        label=None if labelled else _short(label))
                labelled = True
            if partial:
                any_partial = True
                ax.plot([x_of(ts + half) for ts, _ in partial], [v for _, v in partial],
                        linestyle="none", marker="o", markersize=6, markerfacecolor="none",
                        color=color, label=None if labelled else _short(label))
            plotted = True
    if plotted:
        stamps = [p[0] for points in series.values() for p in points]
        end_pad = (window_s or 0) * 1e9
        pad = max((max(stamps) + end_pad - min(stamps)) * 0.03,
                  bar_width_s * 1e9 if stacked_bars else (end_pad / 2 or 30e9))
        ax.set_xlim(x_of(min(stamps) - pad), x_of(max(stamps) + end_pad + pad))
        locator = AutoDateLocator(tz=_dt.UTC)  # type: ignore[no-untyped-call]
        ax.xaxis.set_major_locator(locator)
        formatter = ConciseDateFormatter(locator, tz=_dt.UTC)  # type: ignore[no-untyped-call]
        # ticks a few seconds apart read as clock times ("23:34:30"), not bare seconds
        formatter.formats[5] = "%H:%M:%S"
        ax.xaxis.set_major_formatter(formatter)
        ax.set_xlabel("time (UTC)" + ("; open circles: partial windows (not joined)"
                                      if any_partial else ""))
        if len(series) <= 12:
            # beside the plot, so that it never hides a line
            ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0),
                      borderaxespad=0.0)
    else:
        ax.text(0.5, 0.5, "no data in the period", ha="center", va="center",
                transform=ax.transAxes, fontsize=14, color="gray")
        ax.set_xticks([])
        ax.set_yticks([])
    fig.tight_layout()
    fig.savefig(path, format="png")


_CSS = """
body { font-family: sans-serif; margin: 2em; color: #222; max-width: 1100px; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f0f0f0; }
img { max-width: 100%; border: 1px solid #ddd; }
.muted { color: #777; }
"""


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]],
           numeric: Sequence[bool]) -> str:
    if not rows:
        return '<p class="muted">none</p>'
    out = ["<table>", "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in headers) + "</tr>"]
    for row in rows:
        cells = []
        for value, is_num in zip(row, numeric, strict=True):
            cls = ' class="n"' if is_num else ""
            cells.append(f"<td{cls}>{value if is_num else html.escape(str(value))}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def write_report(out_dir: str, *, summary: Mapping[str, Any],
                 top_rows: Sequence[Mapping[str, Any]],
                 rate_series: Mapping[str, PlotSeries],
                 depth_series: Mapping[str, PlotSeries], event_series: Series,
                 lifetime_rows: Sequence[Mapping[str, Any]], window_label: str,
                 window_s: float = 60.0, event_bucket_s: float = 60.0
                 ) -> tuple[str, list[str]]:
    """Write ``out_dir/report.html`` and its PNG plots; returns (report, [png paths])."""
    plots_dir = os.path.join(out_dir, PLOTS_DIR)
    os.makedirs(plots_dir, exist_ok=True)
    windowed = {"window_s": window_s}
    plots: list[tuple[str, str, str, Mapping[str, Any], dict[str, Any]]] = [
        ("queue_enqueue_rates.png", "Top queues by enqueue rate",
         f"msgTotalEnqueues rate, messages/s ({window_label} average)", rate_series,
         windowed),
        ("queue_depths.png", "Top queues by depth growth",
         f"msgDepth, messages ({window_label} average)", depth_series, windowed),
        ("events_per_minute.png", "Events by severity",
         f"events per {event_bucket_s / 60:g} min", event_series,
         {"stacked_bars": True, "bar_width_s": event_bucket_s}),
    ]
    paths = []
    for filename, title, ylabel, series, options in plots:
        path = os.path.join(plots_dir, filename)
        _plot(path, title, ylabel, series, **options)
        paths.append(path)

    counts = summary.get("rows", {})
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        "<title>QMF telemetry report</title>", f"<style>{_CSS}</style></head><body>",
        "<h1>QMF telemetry report</h1>",
        f"<p>Dataset <code>{html.escape(str(summary.get('dataset', '')))}</code>, "
        f"period {html.escape(_when(summary.get('first_ts')))} to "
        f"{html.escape(_when(summary.get('last_ts')))}"
        f"{_span(summary.get('first_ts'), summary.get('last_ts'))}.  Samples every "
        f"{html.escape(_duration(summary.get('sample_interval_seconds')))} (median per "
        f"object); the plots average over windows of "
        f"{html.escape(_duration(window_s))}.  A window the samples do not cover "
        f"entirely (the first and last of a queue, and those beside a gap) is "
        f"<em>partial</em>: drawn as an open circle, not joined to the others "
        f"({_num(summary.get('partial_windows', 0))} in the plots).  A missing window "
        f"is a gap in the line.</p>",
        _table(["input / table", "rows"],
               [(name, _num(value)) for name, value in summary.get("inputs", {}).items()]
               + [(name, _num(value)) for name, value in counts.items()],
               [False, True]),
        f"<p>Rate steps without a rate: {_num(summary.get('resets', 0))} counter resets, "
        f"{_num(summary.get('gaps', 0))} gaps longer than "
        f"{_num(summary.get('max_gap_seconds'), 0)} s; "
        f"{_num(summary.get('restarts', 0))} restarts (an object's counters started "
        f"again in a new series: its agent restarted or it was created again).</p>",
    ]
    for metric, title in (("enqueue_rate", "Top queues by enqueue rate"),
                          ("depth_growth", "Top queues by depth growth")):
        rows = [r for r in top_rows if r.get("metric") == metric]
        parts.append(f"<h2>{html.escape(title)}</h2>")
        if metric == "enqueue_rate":
            parts.append(_table(
                ["#", "queue", "broker", "messages/s", "messages enqueued", "seconds"],
                [(r["rank"], r["name"], r["broker"], _num(r["value"], 2),
                  _num(_int(r["delta"])), _num(r["seconds"], 1)) for r in rows],
                [True, False, False, True, True, True]))
        elif rows:
            parts.append(_table(
                ["#", "queue", "broker", "depth growth (messages)", "seconds"],
                [(r["rank"], r["name"], r["broker"], _num(_int(r["delta"])),
                  _num(r["seconds"], 1)) for r in rows],
                [True, False, False, True, True]))
        else:
            parts.append('<p class="muted">no queue grew over the period</p>')
        image = plots[0][0] if metric == "enqueue_rate" else plots[1][0]
        parts.append(f'<p><img src="{PLOTS_DIR}/{image}" alt="{html.escape(title)}"></p>')
    parts.append("<h2>Events</h2>")
    parts.append(f'<p><img src="{PLOTS_DIR}/{plots[2][0]}" alt="events by severity"></p>')
    parts.append("<h2>Object lifetimes</h2>")
    parts.append(_table(
        ["package", "class", "objects", "deleted", "mean lifetime of deleted (s)",
         "longest (s)"],
        [(r["package"], r["class_name"], _num(r["objects"]), _num(r["deleted"]),
          _num(r.get("mean_duration"), 1), _num(r.get("max_duration"), 1))
         for r in lifetime_rows],
        [False, False, True, True, True, True]))
    parts.append('<p class="muted">Tables (Parquet): '
                 + ", ".join(f"<code>{html.escape(n)}/</code>" for n in counts)
                 + ". Times in UTC.</p>")
    parts.append("</body></html>")
    report = os.path.join(out_dir, "report.html")
    tmp = report + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write("\n".join(parts) + "\n")
    os.replace(tmp, report)
    return report, paths
