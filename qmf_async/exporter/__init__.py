"""qmf_async.exporter: Prometheus metrics of qpidd and every QMF agent (docs/prometheus.md).

``LiveStore`` (pure) holds the latest values of the exported objects and writes the text
exposition; ``Exporter`` keeps it current from a Session; ``serve_metrics`` serves it
(from a thread; the text is rendered on the event loop).
The package imports without prometheus-client (extra ``prometheus``); making an
``Exporter`` needs it.  ``load_web_config`` reads ``--web.config.file`` (exporter-toolkit
format: TLS, client certificates, basic auth).  ``rules.yml`` (alert rules) and
``dashboard.json`` (Grafana) ship with it: :func:`resource_path`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # at run time each name is imported on first use (__getattr__)
    from ._exporter import INSTALL_HINT, OWN_METRICS, Exporter
    from ._http import CONTENT_TYPE, MetricsServer, serve_metrics
    from ._metrics import (
        COUNTER,
        GAUGE,
        GENERIC_PREFIX,
        INFO,
        QPIDD_CLASSES,
        QPIDD_PREFIX,
        ClassMap,
        MetricSpec,
        generic_class_map,
        metric_table,
        snake,
    )
    from ._store import (
        CONSOLE_QUEUES,
        Filters,
        LiveStore,
        ObjectLike,
        escape_label,
        format_value,
        is_console_queue,
    )
    from ._webconfig import BasicAuth, TlsConfig, WebConfig, WebConfigError, load_web_config

__all__ = [
    "Exporter",
    "LiveStore",
    "Filters",
    "ObjectLike",
    "serve_metrics",
    "MetricsServer",
    "load_web_config",
    "WebConfig",
    "TlsConfig",
    "WebConfigError",
    "BasicAuth",
    "CONTENT_TYPE",
    "INSTALL_HINT",
    "OWN_METRICS",
    "CONSOLE_QUEUES",
    "is_console_queue",
    "ClassMap",
    "MetricSpec",
    "QPIDD_CLASSES",
    "QPIDD_PREFIX",
    "GENERIC_PREFIX",
    "COUNTER",
    "GAUGE",
    "INFO",
    "generic_class_map",
    "metric_table",
    "snake",
    "escape_label",
    "format_value",
    "resource_path",
    "full_metric_table",
]


def resource_path(name: str) -> Path:
    """The path of a file shipped with the package: ``rules.yml`` or ``dashboard.json``."""
    return Path(__file__).resolve().parent / name


def full_metric_table() -> str:
    """The metric table of docs/prometheus.md: qpidd's families and the exporter's own."""
    from ._exporter import OWN_METRICS
    from ._metrics import QPIDD_CLASSES, metric_table

    return metric_table(QPIDD_CLASSES, {
        **{"qpidd_connections_opened_total": ("counter", "broker",
                                              "Connections the exporter saw opened"),
           "qpidd_connections_closed_total": ("counter", "broker",
                                              "Connections the exporter saw closed"),
           "qpidd_queues_declared_total": ("counter", "broker",
                                           "Queues the exporter saw declared"),
           "qpidd_queues_deleted_total": ("counter", "broker",
                                          "Queues the exporter saw deleted")},
        **OWN_METRICS})


#: each public name -> the module it is imported from on first use (``module:name``
#: when it is renamed here)
_LAZY: dict[str, str] = {
    "INSTALL_HINT": "._exporter",
    "OWN_METRICS": "._exporter",
    "Exporter": "._exporter",
    "CONTENT_TYPE": "._http",
    "MetricsServer": "._http",
    "serve_metrics": "._http",
    "COUNTER": "._metrics",
    "GAUGE": "._metrics",
    "GENERIC_PREFIX": "._metrics",
    "INFO": "._metrics",
    "QPIDD_CLASSES": "._metrics",
    "QPIDD_PREFIX": "._metrics",
    "ClassMap": "._metrics",
    "MetricSpec": "._metrics",
    "generic_class_map": "._metrics",
    "metric_table": "._metrics",
    "snake": "._metrics",
    "CONSOLE_QUEUES": "._store",
    "Filters": "._store",
    "LiveStore": "._store",
    "ObjectLike": "._store",
    "escape_label": "._store",
    "format_value": "._store",
    "is_console_queue": "._store",
    "BasicAuth": "._webconfig",
    "TlsConfig": "._webconfig",
    "WebConfig": "._webconfig",
    "WebConfigError": "._webconfig",
    "load_web_config": "._webconfig",
}


if not TYPE_CHECKING:  # type checkers read the imports above; this is the run time
    from ..lazy import lazy_names

    __getattr__, __dir__ = lazy_names(globals(), _LAZY)
    del lazy_names
