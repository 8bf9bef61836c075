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

__all__ = ["PLOTS_DIR", "Series", "write_report"]

#: folder of the PNG files, relative to the report
PLOTS_DIR = "plots"

#: label -> points (ts ns, value) in time order
Series = Mapping[str, Sequence[tuple[int, float]]]


def _when(ns: int | None) -> str:
    if ns is None:
        return "-"
    moment = _dt.datetime.fromtimestamp(ns / 1e9, tz=_dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return html.escape(str(value))


def _plot(path: str, title: str, ylabel: str, series: Series, *, steps: bool = False,
          stacked_bars: bool = False, bar_width_s: float = 60.0) -> None:
    """One PNG: a line per series (or stacked bars), time on the x axis (UTC)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter, date2num
    from matplotlib.figure import Figure

    # matplotlib dates are days since its epoch (1970-01-01 unless configured)
    origin = float(date2num(  # type: ignore[no-untyped-call]
        _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)))

    def x_of(ts: float) -> float:
        return origin + ts / 86_400e9

    fig = Figure(figsize=(10, 4.2), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    plotted = False
    if stacked_bars:
        times = sorted({ts for points in series.values() for ts, _ in points})
        bottom = dict.fromkeys(times, 0.0)
        width = bar_width_s / 86_400 * 0.9
        for label, points in series.items():
            if not points:
                continue
            xs = [x_of(ts) for ts, _ in points]
            ys = [float(v) for _, v in points]
            base = [bottom[ts] for ts, _ in points]
            ax.bar(xs, ys, width=width, bottom=base, label=label, align="edge")
            for ts, v in points:
                bottom[ts] += float(v)
            plotted = True
    else:
        for label, points in series.items():
            if not points:
                continue
            xs = [x_of(ts) for ts, _ in points]
            ys = [float(v) for _, v in points]
            if steps:
                ax.step(xs, ys, where="post", label=label)
            else:
                ax.plot(xs, ys, marker="." if len(xs) < 60 else None, label=label)
            plotted = True
    if plotted:
        stamps = [ts for points in series.values() for ts, _ in points]
        pad = max((max(stamps) - min(stamps)) * 0.03, bar_width_s * 1e9 if stacked_bars
                  else 30e9)
        ax.set_xlim(x_of(min(stamps) - pad), x_of(max(stamps) + pad))
        locator = AutoDateLocator(tz=_dt.UTC)  # type: ignore[no-untyped-call]
        ax.xaxis.set_major_locator(locator)
        formatter = ConciseDateFormatter(locator, tz=_dt.UTC)  # type: ignore[no-untyped-call]
        ax.xaxis.set_major_formatter(formatter)
        ax.set_xlabel("time (UTC)")
        if len(series) <= 12:
            ax.legend(fontsize="small", loc="best")
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
                 top_rows: Sequence[Mapping[str, Any]], rate_series: Series,
                 depth_series: Series, event_series: Series,
                 lifetime_rows: Sequence[Mapping[str, Any]], window_label: str,
                 event_bucket_s: float = 60.0) -> tuple[str, list[str]]:
    """Write ``out_dir/report.html`` and its PNG plots; returns (report, [png paths])."""
    plots_dir = os.path.join(out_dir, PLOTS_DIR)
    os.makedirs(plots_dir, exist_ok=True)
    plots: list[tuple[str, str, str, Series, dict[str, Any]]] = [
        ("queue_enqueue_rates.png", "Top queues by enqueue rate",
         f"msgTotalEnqueues rate, messages/s ({window_label} average)", rate_series, {}),
        ("queue_depths.png", "Top queues by depth growth",
         f"msgDepth, messages ({window_label} average)", depth_series, {}),
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
        f"{html.escape(_when(summary.get('last_ts')))}.</p>",
        _table(["input / table", "rows"],
               [(name, _num(value)) for name, value in summary.get("inputs", {}).items()]
               + [(name, _num(value)) for name, value in counts.items()],
               [False, True]),
        f"<p>Rate steps without a rate: {_num(summary.get('resets', 0))} counter resets, "
        f"{_num(summary.get('gaps', 0))} gaps longer than "
        f"{_num(summary.get('max_gap_seconds'), 0)} s.</p>",
    ]
    for metric, title, unit in (("enqueue_rate", "Top queues by enqueue rate", "messages/s"),
                                ("depth_growth", "Top queues by depth growth", "messages")):
        rows = [r for r in top_rows if r.get("metric") == metric]
        parts.append(f"<h2>{html.escape(title)}</h2>")
        parts.append(_table(
            ["#", "queue", "broker", f"value ({unit})", "delta", "seconds"],
            [(r["rank"], r["name"], r["broker"], _num(r["value"]), _num(r["delta"]),
              _num(r["seconds"], 1)) for r in rows],
            [True, False, False, True, True, True]))
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
