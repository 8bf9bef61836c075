"""The exporter: a :class:`LiveStore` kept current from a Session, served over HTTP.

The exporter follows ``session.object_updates()`` (one subscription per exported class,
so over QMF v2 the broker passes only those classes), asks each broker for its objects
when the connection comes up (again after a reconnect: what the broker no longer has
leaves), and drops the objects of an agent that left (or of a broker that is down)
after ``stale_after`` seconds.  A scrape renders the store; nothing is asked on the bus.

prometheus-client writes the exporter's own families; it is imported when an
:class:`Exporter` is made, so the package imports without the ``prometheus`` extra.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from .. import (
    Broker,
    BrokerState,
    BrokerStateChange,
    ClassKind,
    ConnectionLostError,
    QmfError,
    QmfObject,
    Session,
    Subscription,
    UnknownClassError,
    UsageError,
)
from ._metrics import QPIDD_CLASSES
from ._store import LiveStore

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

__all__ = ["Exporter", "INSTALL_HINT", "OWN_METRICS"]

log = logging.getLogger("qmf_async.exporter")

INSTALL_HINT: Final = "pip install 'qmf-async[prometheus]'"
#: seconds a scrape may hold the updates at most
MAX_HOLD: Final = 5.0
#: objects taken in one go before the loop gets a turn
_BATCH: Final = 500

#: the exporter's own families: name -> (type, labels, help)
OWN_METRICS: Final = {
    "qpidd_up": ("gauge", "broker",
                 "1 when the exporter's connection to the broker is up, else 0"),
    "qmf_exporter_agent_last_update_age_seconds": (
        "gauge", "broker, agent", "Seconds since the last object update of the agent"),
    "qmf_exporter_updates_received_total": (
        "counter", "", "Object updates received (subscriptions and snapshots)"),
    "qmf_exporter_updates_dropped_total": (
        "counter", "", "Object updates lost because the exporter was slower than the bus"),
    "qmf_exporter_objects": ("gauge", "", "Objects the exporter holds"),
    "qmf_exporter_objects_filtered_total": (
        "counter", "", "Object updates left out by the queue and connection patterns"),
    "qmf_exporter_series": ("gauge", "", "Samples written by the last scrape"),
    "qmf_exporter_series_cut_total": (
        "counter", "", "Samples left out of scrapes by the series limit"),
    "qmf_exporter_scrape_duration_seconds": (
        "gauge", "", "Seconds the previous scrape took to render"),
    "qmf_exporter_scrape_cpu_seconds": (
        "gauge", "", "CPU seconds the previous scrape took to render"),
}


class Exporter:
    """Keep ``store`` current from ``session`` and render it; ``async with`` runs it.

    Enter it before adding brokers, so that nothing published after the first
    connection is missed.  ``tick`` is how often (seconds) connections are checked and
    stale agents expired; ``maxsize`` bounds each subscription's buffer.

    Raises:
        UsageError: prometheus-client is not installed (the message says how), or a
            non-positive ``stale_after``, ``tick`` or ``snapshot_timeout``.
    """

    def __init__(self, session: Session, store: LiveStore | None = None, *,
                 stale_after: float = 300.0, tick: float = 1.0,
                 snapshot_timeout: float = 60.0, maxsize: int = 100_000) -> None:
        if min(stale_after, tick, snapshot_timeout) <= 0:
            raise UsageError("stale_after, tick and snapshot_timeout must be positive")
        self.session = session
        self.store = store if store is not None else LiveStore()
        self.stale_after = stale_after
        self.tick = tick
        self.snapshot_timeout = snapshot_timeout
        self.maxsize = maxsize
        self.scrape_seconds = 0.0
        self.scrape_cpu_seconds = 0.0
        self.snapshots = 0
        self._registry = _own_registry(self)
        self._subs: list[Subscription[QmfObject]] = []
        self._agent_sub: Subscription[tuple[str, Any]] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._snapshots: dict[int, asyncio.Task[None]] = {}
        #: id(broker) -> its state last seen (from the session's state stream)
        self._seen: dict[int, BrokerState] = {}
        self._state_sub: Subscription[BrokerStateChange] | None = None
        self._labels: dict[str, str] = {}
        #: scrapes being answered; the updates wait while there are any
        self._scrapes = 0
        self._resume: asyncio.Event | None = None

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Exporter:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Subscribe and start following (idempotent)."""
        if self._tasks:
            return
        store = self.store
        for cmap in QPIDD_CLASSES:
            self._subs.append(self.session.object_updates(
                _package=cmap.package, _class=cmap.name, maxsize=self.maxsize))
        if store.generic:
            for package in store.packages or (None,):
                self._subs.append(self.session.object_updates(_package=package,
                                                              maxsize=self.maxsize))
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._follow(sub)) for sub in self._subs]
        self._agent_sub = self.session.agent_changes()
        self._tasks.append(loop.create_task(self._follow_agents(self._agent_sub)))
        self._state_sub = self.session.broker_states()
        self._tasks.append(loop.create_task(self._follow_states(self._state_sub)))
        self._tasks.append(loop.create_task(self._housekeeping()))

    async def stop(self) -> None:
        """Stop following; the subscriptions close."""
        tasks = [*self._tasks, *self._snapshots.values()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for sub in self._subs:
            sub.close()
        if self._agent_sub is not None:
            self._agent_sub.close()
        if self._state_sub is not None:
            self._state_sub.close()
        self._tasks, self._subs, self._snapshots, self._agent_sub = [], [], {}, None
        self._state_sub = None

    # ------------------------------------------------------------------ following

    def broker_label(self, broker: Any) -> str:
        """The ``broker`` label of a broker: its ``host:port``."""
        where = str(getattr(broker, "where", "")) if broker is not None else ""
        label = self._labels.get(where)
        if label is None:
            parts = urlsplit(where)
            label = self._labels[where] = parts.netloc.rpartition("@")[2] or where
        return label

    async def _follow(self, sub: Subscription[QmfObject]) -> None:
        try:
            await self._take(sub)
        except ConnectionLostError as exc:  # a session that does not reconnect
            log.warning("exporter: no more updates: %s", exc)

    async def _take(self, sub: Subscription[QmfObject]) -> None:
        store, run = self.store, 0
        async for obj in sub:
            try:
                store.update(self.broker_label(obj.get_broker()), obj, time.monotonic())
            except QmfError as exc:  # a malformed value: that object's update only
                log.info("object update left out: %s", exc)
            run += 1
            if self._scrapes and self._resume is not None:
                await self._resume.wait()  # a scrape first: the updates wait buffered
            elif run >= _BATCH and len(sub):  # a backlog: let scrapes and the bus in
                run = 0
                await asyncio.sleep(0)

    async def _follow_agents(self, sub: Subscription[tuple[str, Any]]) -> None:
        with contextlib.suppress(ConnectionLostError):  # said by _follow
            async for change, agent in sub:
                if change == "removed":
                    self.store.agent_left(self.broker_label(agent.broker),
                                          agent.name or agent.label, time.monotonic())

    async def _housekeeping(self) -> None:
        while True:
            self.store.expire(time.monotonic(), self.stale_after)
            await asyncio.sleep(self.tick)

    async def _follow_states(self, sub: Subscription[BrokerStateChange]) -> None:
        """The session's connection-state stream: no polling of ``broker.connected``."""
        async for change in sub:
            self._broker_state(change.broker, change.state)

    def check_brokers(self) -> None:
        """Act on the state of every broker now (what the state stream does as each
        change comes; kept for callers that want it at once): snapshot a broker whose
        connection came up, mark the agents of one that went down as gone."""
        for broker in self.session.brokers:
            self._broker_state(broker, broker.state)

    def _broker_state(self, broker: Broker, state: BrokerState) -> None:
        """``broker`` is now in ``state``: a snapshot after each (re)connection (once
        its handshake is done); its agents gone when it goes down."""
        before = self._seen.get(id(broker))
        if before is state:
            return
        self._seen[id(broker)] = state
        if state is BrokerState.CONNECTED:
            old = self._snapshots.pop(id(broker), None)
            if old is not None:
                old.cancel()
            task = asyncio.get_running_loop().create_task(self._snapshot(broker))
            self._snapshots[id(broker)] = task
        elif not state.up and before is not None and before.up:
            self.store.broker_down(self.broker_label(broker), time.monotonic())

    async def _snapshot(self, broker: Broker) -> None:
        """Ask ``broker`` for the objects of every exported class; then drop what it no
        longer has."""
        store, label = self.store, self.broker_label(broker)
        started = time.monotonic()
        store.since_ns[label] = time.time_ns()
        for sub in self._subs:
            with contextlib.suppress(QmfError):
                await sub.ready(self.snapshot_timeout)
        wanted: list[tuple[str, str]] = [(c.package, c.name) for c in QPIDD_CLASSES]
        if store.generic:
            wanted += await self._generic_classes()
        complete = True
        for package, name in wanted:
            try:
                objects = await self.session.get_objects(
                    _class=name, _package=package, _broker=broker,
                    _timeout=self.snapshot_timeout)
            except UnknownClassError:
                continue  # a bus without that class (a RabbitMQ bridge has no link)
            except QmfError as exc:
                complete = False
                log.info("snapshot of %s:%s on %s failed: %s", package, name, label, exc)
                continue
            for i, obj in enumerate(objects, 1):
                with contextlib.suppress(QmfError):
                    store.update(label, obj, time.monotonic(), snapshot=True)
                if i % _BATCH == 0:  # 10,000 queues: let scrapes and the bus in
                    await asyncio.sleep(0)
                    if self._scrapes and self._resume is not None:
                        await self._resume.wait()
        if complete:
            store.sweep(label, started)
        self.snapshots += 1

    async def _generic_classes(self) -> list[tuple[str, str]]:
        out = []
        try:
            packages = await self.session.get_packages()
            for package in packages:
                if not self.store.wants_generic(package):
                    continue
                for key in await self.session.get_classes(package):
                    schema = await self.session.get_schema(key)
                    if schema.kind == ClassKind.OBJECT:
                        out.append((key.package, key.name))
        except QmfError as exc:
            log.info("listing the agents' classes failed: %s", exc)
        return list(dict.fromkeys(out))

    # ------------------------------------------------------------------ exposition

    def pause(self, scraping: bool) -> None:
        """A scrape starts (True) or ends (False): following the updates waits while
        one is being answered (they stay in the subscriptions' buffers)."""
        if self._resume is None:
            self._resume = asyncio.Event()
        self._scrapes += 1 if scraping else -1
        if self._scrapes > 0:
            self._resume.clear()
            # a client slow to read its answer holds the updates for MAX_HOLD at most
            asyncio.get_running_loop().call_later(MAX_HOLD, self._resume.set)
        else:
            self._scrapes = 0
            self._resume.set()

    def dropped(self) -> int:
        """Updates lost: subscription buffers overrun and the brokers' topic drops."""
        return (sum(s.dropped for s in self._subs)
                + sum(b.topic_dropped for b in self.session.brokers))

    def render(self) -> bytes:
        """The whole exposition: the objects' families, then the exporter's own."""
        from prometheus_client import generate_latest

        started, cpu = time.perf_counter(), time.thread_time()
        body = self.store.render().encode() + generate_latest(self._registry)
        self.scrape_seconds = time.perf_counter() - started
        self.scrape_cpu_seconds = time.thread_time() - cpu
        return body

    def own_families(self) -> Iterator[Any]:
        """The exporter's own families (prometheus-client metric families)."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        store, now = self.store, time.monotonic()
        up = GaugeMetricFamily("qpidd_up", OWN_METRICS["qpidd_up"][2], labels=["broker"])
        for broker in self.session.brokers:
            up.add_metric([self.broker_label(broker)], 1 if broker.connected else 0)
        yield up
        age = GaugeMetricFamily("qmf_exporter_agent_last_update_age_seconds",
                                OWN_METRICS["qmf_exporter_agent_last_update_age_seconds"][2],
                                labels=["broker", "agent"])
        for (where, agent), seen in sorted(store.agents.items()):
            age.add_metric([where, agent], round(now - seen, 3))
        yield age
        values = {"qmf_exporter_updates_received_total": store.updates,
                  "qmf_exporter_updates_dropped_total": self.dropped(),
                  "qmf_exporter_objects": store.objects(),
                  "qmf_exporter_objects_filtered_total": store.filtered,
                  "qmf_exporter_series": store.series,
                  "qmf_exporter_series_cut_total": store.series_cut_total,
                  "qmf_exporter_scrape_duration_seconds": self.scrape_seconds,
                  "qmf_exporter_scrape_cpu_seconds": self.scrape_cpu_seconds}
        for name, value in values.items():
            kind, _, help_text = OWN_METRICS[name]
            if kind == "counter":
                yield CounterMetricFamily(name.removesuffix("_total"), help_text, value=value)
            else:
                yield GaugeMetricFamily(name, help_text, value=value)


def _own_registry(exporter: Exporter) -> CollectorRegistry:
    """A prometheus-client registry with the exporter's own families.

    Raises:
        UsageError: prometheus-client is not installed.
    """
    try:
        from prometheus_client.registry import CollectorRegistry
    except ImportError as exc:
        raise UsageError(f"the exporter needs prometheus-client: {INSTALL_HINT}") from exc

    class _Own:
        def collect(self) -> Iterator[Any]:
            return exporter.own_families()

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Own())
    return registry
