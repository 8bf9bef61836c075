"""``python -m qmf_async.exporter``: print the metric table of docs/prometheus.md."""

from . import full_metric_table

print(full_metric_table(), end="")
