"""Shared fixtures: the RabbitMQ URL of the integration tests."""

from __future__ import annotations

import os
import socket
from urllib.parse import urlsplit

import pytest

DEFAULT_URL = "amqp://guest:guest@localhost:5672/"


@pytest.fixture(scope="session")
def amqp_url() -> str:
    """URL of the test broker (``QMF_TEST_URL``); fails when nothing answers there."""
    url = os.environ.get("QMF_TEST_URL", DEFAULT_URL)
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    port = parts.port or (5671 if parts.scheme == "amqps" else 5672)
    try:
        with socket.create_connection((host, port), timeout=2.0):
            pass
    except OSError as exc:
        pytest.fail(
            f"no AMQP broker answers on {host}:{port} ({exc}); "
            "start one with `bash scripts/rabbitmq.sh` (or set QMF_TEST_URL)",
            pytrace=False,
        )
    return url
