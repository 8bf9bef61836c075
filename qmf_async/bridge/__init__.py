"""Bridges: agents that serve another system's real state as QMF classes.

:mod:`qmf_async.bridge.rabbitmq` serves a RabbitMQ broker (read from its management
HTTP API) as qpidd's ``org.apache.qpid.broker`` classes.  Needs the ``bridge`` extra
(aiohttp): ``pip install 'qmf-async[bridge]'``.
"""

from __future__ import annotations

__all__: list[str] = []
