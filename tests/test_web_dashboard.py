"""The web dashboard example (examples/web_dashboard/app.py) against the real RabbitMQ,
with the management-broker role and the demo agent in-process, served on 127.0.0.1
with an ephemeral port and driven by aiohttp's client and headless Chromium.

The module runs on a vhost of its own when rabbitmqctl can make one (``broker`` is one
routing key per vhost: a role of another test module would answer our ``B`` and ``A``
too), and otherwise on the shared vhost.  The application reaches RabbitMQ through a
small TCP proxy of the test, so a broker outage can be made (and ended) for this
application alone, without touching the shared RabbitMQ.

One server, role and agent serve every test (module-scoped, on one event loop).  The
browser tests are skipped only when no Chromium is installed (Debian's ``chromium``);
the Python packages (aiohttp, playwright) are required.  Screenshots are saved under
``test-artifacts/``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web
from playwright.async_api import Browser, BrowserContext, Page, async_playwright, expect

from qmf_async import ObjectId
from qmf_async.agent import Agent
from qmf_async.agent.broker import ManagementBroker

from ._util import import_example, private_vhost, wait_until
from .faultproxy import FaultProxy as Proxy

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
INTERVAL = 0.25  # the demo agent's traffic and publish interval
AGENT_TIMEOUT = 10.0  # silence after which the role and the session drop an agent
QUEUES = {"orders", "invoices", "audit", "work-1"}
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
WAIT_MS = 10_000  # deadline of a browser-side wait


_import_example = import_example


demo = _import_example("demo_agent", ROOT / "examples" / "demo_agent.py")
dashboard = _import_example("web_dashboard", ROOT / "examples" / "web_dashboard" / "app.py")


# --------------------------------------------------------------------------- the bus


@pytest.fixture(scope="module")
def bus_url(amqp_url: str) -> Iterator[str]:
    """``amqp_url`` on a temporary vhost of this module (deleted afterwards), or
    ``amqp_url`` itself when rabbitmqctl cannot make one for that broker."""
    with private_vhost(amqp_url, "qmf-web-dashboard-test") as url:
        yield url


@dataclass
class Env:
    base: str
    http: aiohttp.ClientSession
    model: Any  # examples/demo_agent.py DemoBroker
    agent: Agent
    proxy: Proxy

    async def get(self, path: str, **params: str) -> tuple[int, Any]:
        async with self.http.get(self.base + path, params=params or None) as r:
            return r.status, await r.json()

    async def post(self, path: str, body: Any = None, *, raw: bytes | None = None
                   ) -> tuple[int, Any]:
        data = raw if raw is not None else json.dumps(body if body is not None else {}).encode()
        async with self.http.post(self.base + path, data=data,
                                  headers={"Content-Type": "application/json",
                                           "Origin": self.base}) as r:
            return r.status, await r.json()

    async def queues(self) -> dict[str, dict[str, Any]]:
        status, body = await self.get("/api/objects/queue")
        assert status == 200, body
        return {q["properties"]["name"]: q for q in body}

    async def the_broker(self) -> dict[str, Any]:
        status, body = await self.get("/api/objects/broker")
        assert status == 200 and len(body) == 1, body
        return body[0]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(bus_url: str) -> AsyncIterator[Env]:
    label = f"web-dashboard-test-{uuid.uuid4().hex[:8]}"
    # server, client, role and agent share one event loop here: the 200-request burst
    # may hold heartbeats back for longer than 3 intervals, so ageing is made lenient
    role = ManagementBroker(bus_url, broker_id=uuid.uuid4(), interval=INTERVAL,
                            agent_timeout=AGENT_TIMEOUT, label=f"{label}-role")
    await role.start()
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(role.stop, 2.0)
        agent, model = demo.build_demo_agent(bus_url, interval=INTERVAL, queues=1, seed=7,
                                             label=label, attach_timeout=1.0)
        await model.start()
        stack.push_async_callback(model.stop)
        parts = urlsplit(bus_url)
        proxy = Proxy(parts.hostname or "localhost", parts.port or 5672)
        await proxy.start()
        stack.push_async_callback(proxy.close)
        netloc = parts.netloc.rsplit("@", 1)
        app_url = urlunsplit(parts._replace(netloc=(netloc[0] + "@" if len(netloc) == 2 else "")
                                            + f"127.0.0.1:{proxy.port}"))
        app = dashboard.create_app(app_url, request_timeout=5.0, session_options={
            "broker_timeout": 1.0, "reconnect_min_delay": 0.1, "reconnect_max_delay": 0.5,
            "missed_heartbeats": round(AGENT_TIMEOUT / INTERVAL)},
            # echo and create too, for the tests of calls and errors
            guard=dashboard.Guard(methods=("queue.purge", "broker.echo", "broker.create")))
        runner = web.AppRunner(app, shutdown_timeout=5.0)
        await runner.setup()
        stack.push_async_callback(runner.cleanup)
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        http = await stack.enter_async_context(
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                  timeout=aiohttp.ClientTimeout(total=20)))
        e = Env(f"http://{host}:{port}", http, model, agent, proxy)

        async def demo_agent_listed() -> bool:
            status, body = await e.get("/api/agents")
            return status == 200 and any(a["label"] == label for a in body["agents"])

        await wait_until(demo_agent_listed, 10.0, 0.05, message="demo agent listed")
        yield e


# --------------------------------------------------------------------------- JSON API


async def test_agents_objects_and_one_object(env: Env) -> None:
    status, body = await env.get("/api/agents")
    assert status == 200 and body["connected"] is True
    assert [b["connected"] for b in body["brokers"]] == [True]
    assert "guest" not in json.dumps(body)  # credentials never leave the server
    mine = [a for a in body["agents"] if a["label"] == env.agent.label]
    assert [(a["broker_bank"], a["agent_bank"]) for a in mine] \
        == [(env.agent.broker_bank, env.agent.agent_bank)]

    queues = await env.queues()
    assert set(queues) == QUEUES
    orders = queues["orders"]
    assert ObjectId.parse(orders["object_id"]).agent_key() \
        == (env.agent.broker_bank, env.agent.agent_bank)
    assert orders["class_key"].startswith("org.apache.qpid.broker:queue(")
    assert (orders["package"], orders["class"]) == ("org.apache.qpid.broker", "queue")
    assert orders["properties"]["durable"] is True
    assert ObjectId.parse(orders["properties"]["vhostRef"])  # references as text
    assert {"msgDepth", "msgTotalEnqueues"} <= set(orders["statistics"])
    ts = orders["timestamps"]
    assert ts["updated"] >= ts["created"] > 0 and ts["deleted"] == 0

    status, body = await env.get("/api/objects/queue",
                                 where="name = 'orders' OR name LIKE 'work-%'",
                                 package="org.apache.qpid.broker")
    assert status == 200 and sorted(q["properties"]["name"] for q in body) == ["orders", "work-1"]
    status, body = await env.get("/api/objects/queue", where="msgDepth < 0")
    assert (status, body) == (200, [])  # a known class with no match: empty, not 404

    status, one = await env.get(f"/api/object/{orders['object_id']}")
    assert status == 200 and one["object_id"] == orders["object_id"]
    assert one["properties"]["name"] == "orders" and one["class_key"] == orders["class_key"]


async def test_method_calls(env: Env) -> None:
    broker = await env.the_broker()
    path = f"/api/object/{broker['object_id']}/methods"
    status, body = await env.post(f"{path}/echo", {"sequence": 42, "body": "héllo"})
    assert (status, body) == (200, {"status": 0, "text": "OK",
                                    "out_args": {"sequence": 42, "body": "héllo"}})
    # an agent-reported failure: 422 with the agent's status and text
    status, body = await env.post(f"{path}/create", {"type": "queue", "name": "orders",
                                                     "properties": {}, "strict": True})
    assert status == 422, body
    assert body["status"] == 7 and body["text"] == "object already exists: orders"
    assert body["type"] == "MethodError"


@pytest.mark.parametrize(("method", "path", "payload", "want"), [
    ("GET", "/api/objects/queue?where=msgDepth%20%3E%3E%201", None, 400),
    ("GET", "/api/objects/queue?where=name%20LIKE", None, 400),
    ("GET", "/api/objects/no-such-class", None, 404),
    ("GET", "/api/object/not-an-object-id", None, 400),
    ("GET", "/api/object/0-0-1-1048575-1", None, 404),   # no such agent
    ("GET", "/api/object/{agent}-999999", None, 404),    # no such object
    ("GET", "/api/no-such-endpoint", None, 404),
    ("POST", "/api/object/{broker}/methods/echo", {"sequence": "x", "body": "b"}, 400),
    ("POST", "/api/object/{broker}/methods/echo", {"sequence": 1}, 400),
    ("POST", "/api/object/{broker}/methods/echo", {"sequence": 1, "body": "b", "x": 1}, 400),
    ("POST", "/api/object/{broker}/methods/echo", {"sequence": 1, "_timeout": 1}, 400),
    ("POST", "/api/object/{broker}/methods/echo", b"{not json", 400),
    ("POST", "/api/object/{broker}/methods/echo", b"[1, 2]", 400),
    ("POST", "/api/object/{broker}/methods/noSuchMethod", {}, 403),  # not offered
    ("POST", "/api/object/{queue}/methods/echo", {"sequence": 1, "body": "b"}, 403),
    ("POST", "/api/object/{queue}/methods/purge", {"request": -1}, 400),
    ("POST", "/api/object/0-0-1-1048575-1/methods/purge", {"request": 0}, 404),
])
async def test_errors_are_json_with_the_right_status(env: Env, method: str, path: str,
                                                     payload: Any, want: int) -> None:
    broker = await env.the_broker()
    queue = (await env.queues())["audit"]
    oid = ObjectId.parse(broker["object_id"])
    path = path.format(broker=broker["object_id"], queue=queue["object_id"],
                       agent=f"{oid.flags}-{oid.sequence}-{oid.broker_bank}-{oid.agent_bank}")
    if method == "GET":
        async with env.http.get(env.base + path) as r:
            status, body = r.status, await r.json()
    elif isinstance(payload, bytes):
        status, body = await env.post(path, raw=payload)
    else:
        status, body = await env.post(path, payload)
    assert status == want, body
    assert isinstance(body, dict) and isinstance(body["error"], str) and body["error"]
    if "where=" in path:
        assert body["type"] == "SelectorError" and isinstance(body["position"], int)


async def test_200_concurrent_requests_share_one_session(env: Env) -> None:
    broker = await env.the_broker()
    queues = await env.queues()
    echo = f"/api/object/{broker['object_id']}/methods/echo"

    async def one(i: int) -> tuple[int, Any]:
        kind = i % 4
        if kind == 0:
            return await env.post(echo, {"sequence": i, "body": f"request {i}"})
        if kind == 1:
            name = sorted(QUEUES)[i % len(QUEUES)]
            return await env.get("/api/objects/queue", where=f"name = '{name}'")
        if kind == 2:
            return await env.get(f"/api/object/{queues['orders']['object_id']}")
        return await env.get("/api/objects/queue")

    started = time.monotonic()
    results = await asyncio.gather(*(one(i) for i in range(200)))
    elapsed = time.monotonic() - started
    for i, (status, body) in enumerate(results):
        assert status == 200, (i, body)
        kind = i % 4
        if kind == 0:  # every caller got its own answer back
            assert body["out_args"] == {"sequence": i, "body": f"request {i}"}
        elif kind == 1:
            assert [q["properties"]["name"] for q in body] == [sorted(QUEUES)[i % len(QUEUES)]]
        elif kind == 2:
            assert body["object_id"] == queues["orders"]["object_id"]
        else:
            assert {q["properties"]["name"] for q in body} == QUEUES
    assert elapsed < 15, f"200 requests took {elapsed:.1f} s"


# --------------------------------------------------------------------------- who may write
#
# The attacks of issue 34 against the running application: a foreign page's writes
# (forged Origin or Referer, none at all, a form or text/plain body that a browser
# sends without a preflight), DNS rebinding (a foreign Host), and methods outside the
# allow-list.  Each is refused and the queue keeps its messages; the same purge from the
# dashboard's own origin as JSON works.


async def _busy_queue(env: Env) -> tuple[str, dict[str, Any]]:
    """A queue with messages, with the demo traffic paused (the caller resumes it)."""
    async def busy() -> tuple[str, dict[str, Any]] | None:
        found = await env.queues()
        names = [n for n in sorted(found) if found[n]["statistics"]["msgDepth"] > 0]
        return (names[0], found[names[0]]) if names else None

    env.model.paused = False
    await wait_until(busy, 10.0, 0.1, message="a queue with messages")
    env.model.paused = True
    found = await busy()  # paused now: this depth holds
    if found is None:
        env.model.paused = False
        found = await wait_until(busy, 10.0, 0.1, message="a queue with messages")
        env.model.paused = True
    return found


async def test_foreign_writes_are_refused_and_the_queue_stays(env: Env) -> None:
    name, queue = await _busy_queue(env)
    try:
        depth = queue["statistics"]["msgDepth"]
        broker = await env.the_broker()
        purge = f"/api/object/{queue['object_id']}/methods/purge"
        evil = "http://evil.example"
        port = urlsplit(env.base).port
        as_json = {"Content-Type": "application/json"}
        body = json.dumps({"request": 0})
        attacks: list[tuple[str, str, dict[str, str], str, int]] = [
            ("forged Origin", purge, {**as_json, "Origin": evil}, body, 403),
            ("Origin of another port", purge,
             {**as_json, "Origin": f"http://127.0.0.1:{port + 1 if port else 1}"}, body, 403),
            ("opaque Origin (sandboxed page)", purge, {**as_json, "Origin": "null"}, body, 403),
            ("foreign Referer without Origin", purge, {**as_json, "Referer": f"{evil}/x"},
             body, 403),
            ("neither Origin nor Referer", purge, as_json, body, 403),
            ("DNS rebinding (foreign Host)", purge,
             {**as_json, "Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"},
             body, 403),
            ("form from a foreign page", purge,
             {"Content-Type": "application/x-www-form-urlencoded", "Origin": evil},
             "request=0", 403),
            ("text/plain from a foreign page", purge,
             {"Content-Type": "text/plain", "Origin": evil}, body, 403),
            ("form from the app's origin", purge,
             {"Content-Type": "application/x-www-form-urlencoded", "Origin": env.base},
             "request=0", 415),
            ("multipart form from the app's origin", purge,
             {"Content-Type": "multipart/form-data; boundary=x", "Origin": env.base},
             '--x\r\nContent-Disposition: form-data; name="request"\r\n\r\n0\r\n--x--\r\n', 415),
            ("text/plain from the app's origin", purge,
             {"Content-Type": "text/plain", "Origin": env.base}, body, 415),
            ("no Content-Type from the app's origin", purge, {"Origin": env.base}, body, 415),
            # the attack of the issue: delete of the queue on the broker object, as JSON
            # from the app's own origin; delete is not on the list
            ("broker.delete (not offered)",
             f"/api/object/{broker['object_id']}/methods/delete",
             {**as_json, "Origin": env.base}, json.dumps({"type": "queue", "name": name,
                                                         "options": {}}), 403),
            ("purge of a broker object (purge is offered on queues only)",
             f"/api/object/{broker['object_id']}/methods/purge",
             {**as_json, "Origin": env.base}, body, 403),
        ]
        for what, path, headers, data, want in attacks:
            async with env.http.post(env.base + path, data=data.encode(),
                                     headers=headers) as r:
                answer = await r.json()
                assert r.status == want, (what, r.status, answer)
                assert isinstance(answer["error"], str) and answer["error"], (what, answer)
        # another HTTP method on the endpoint: refused by origin, then not routed
        async with env.http.delete(env.base + purge, headers={"Origin": evil}) as r:
            assert r.status == 403, await r.text()
        async with env.http.put(env.base + purge, data=body,
                                headers={**as_json, "Origin": env.base}) as r:
            assert r.status == 405, await r.text()

        after = await env.queues()
        assert name in after, "the queue was deleted"
        assert after[name]["statistics"]["msgDepth"] == depth, "the queue was purged"

        # the same request from the app's own origin, as JSON: it works
        async with env.http.post(env.base + purge, data=body.encode(),
                                 headers={**as_json, "Origin": env.base}) as r:
            assert r.status == 200, await r.text()
            assert (await r.json())["status"] == 0
        # ... and with a Referer of the app instead of an Origin, and a localhost Host
        localhost = f"http://localhost:{port}"
        async with env.http.post(env.base + purge, data=body.encode(), headers={
                **as_json, "Host": f"localhost:{port}", "Referer": f"{localhost}/?queue=x"}) as r:
            assert r.status == 200, await r.text()

        async def purged() -> bool:
            return bool((await env.queues())[name]["statistics"]["msgDepth"] == 0)

        await wait_until(purged, 10.0, 0.1, message=f"{name} purged")
    finally:
        env.model.paused = False


@pytest.mark.parametrize(("host", "want"), [
    ("evil.example:{port}", 403),  # DNS rebinding: a foreign name for our address
    ("127.0.0.1:{other}", 403),
    ("", 403),
    ("127.0.0.1:{port}", 200),
    ("localhost:{port}", 200),
    ("[::1]:{port}", 200),
])
async def test_reads_check_the_host_too(env: Env, host: str, want: int) -> None:
    port = urlsplit(env.base).port or 80
    value = host.format(port=port, other=port + 1)
    for path in ("/api/agents", "/"):
        async with env.http.get(env.base + path, headers={"Host": value,
                                                          "Origin": "http://evil.example"}) as r:
            assert r.status == want, (path, value, await r.text())
            # no CORS header: a foreign page cannot read what the dashboard answers
            assert not any(h.lower().startswith("access-control-") for h in r.headers)
            if want == 403:
                assert (await r.json())["type"] == "Forbidden"


@dataclass
class Tokened:
    base: str
    token: str


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def tokened(env: Env, bus_url: str) -> AsyncIterator[Tokened]:
    """A second dashboard on the same bus, with a write token (as one bound beyond
    loopback has)."""
    token = "t0ken-for-the-test-" + uuid.uuid4().hex
    app = dashboard.create_app(bus_url, request_timeout=5.0,
                               guard=dashboard.Guard(token=token),
                               session_options={"broker_timeout": 1.0})
    runner = web.AppRunner(app, shutdown_timeout=5.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        yield Tokened(f"http://{host}:{port}", token)
    finally:
        await runner.cleanup()


async def _audit(env: Env, base: str) -> Any:
    async with env.http.get(base + "/api/objects/queue",
                            params={"where": "name = 'audit'"}) as r:
        found = await r.json() if r.status == 200 else []
        return found[0] if found else None


async def test_a_token_guards_the_writes(env: Env, tokened: Tokened) -> None:
    """With a token, a write from the app's own origin as JSON still needs
    ``Authorization: Bearer``; reads do not."""
    base, token = tokened.base, tokened.token
    queue = await wait_until(lambda: _audit(env, base), 10.0, 0.1, message="audit listed")
    purge = f"{base}/api/object/{queue['object_id']}/methods/purge"
    headers = {"Content-Type": "application/json", "Origin": base}
    for authorization in (None, "Bearer wrong-token-of-the-same-size",
                          f"Basic {token}", f"Bearer {token}x"):
        sent = {**headers, **({"Authorization": authorization} if authorization else {})}
        async with env.http.post(purge, json={"request": 0}, headers=sent) as r:
            assert r.status == 401, (authorization, await r.text())
            assert r.headers["WWW-Authenticate"].startswith("Bearer")
    async with env.http.post(purge, json={"request": 0},
                             headers={**headers, "Authorization": f"Bearer {token}"}) as r:
        assert r.status == 200, await r.text()


async def test_the_page_sends_the_token_from_its_address(env: Env, tokened: Tokened,
                                                         browser: Browser) -> None:
    """Opened as ``/#token=...`` (the address printed at start), the page keeps the
    token (not in the address) and its purge works; opened without it, the purge is
    refused with the reason shown."""
    name, _ = await _busy_queue(env)
    try:
        for with_token in (False, True):
            context = await browser.new_context(viewport={"width": 1280, "height": 800})
            try:
                page = await context.new_page()
                suffix = f"#token={tokened.token}" if with_token else ""
                await page.goto(f"{tokened.base}/?queue={name}{suffix}")
                assert tokened.token not in page.url  # taken out of the address at once
                row = page.locator(f"tr[data-queue='{name}']")
                await expect(row).to_have_count(1, timeout=WAIT_MS)
                await expect(row.locator("button.purge")).to_be_enabled(timeout=WAIT_MS)
                await row.locator("button.purge").click()
                await page.locator("#confirm-purge").click()
                if with_token:
                    await expect(page.locator("#message")).to_contain_text(
                        f"Purged {name}", timeout=WAIT_MS)
                else:
                    await expect(page.locator("#message")).to_contain_text(
                        "needs the dashboard's token", timeout=WAIT_MS)
                    depth = (await env.queues())[name]["statistics"]["msgDepth"]
                    assert depth > 0, "purged without the token"
            finally:
                await context.close()
    finally:
        env.model.paused = False


async def test_bound_beyond_loopback_it_makes_and_prints_a_token() -> None:
    """``app.py --host 0.0.0.0``: a token is made and printed with the address to open;
    writes without it get 401, with it they pass the guard (here to a bus that is not
    there: 503)."""
    await asyncio.to_thread(_bound_beyond_loopback)


def _bound_beyond_loopback() -> None:
    import subprocess
    import sys
    import urllib.error
    import urllib.request

    env = {k: v for k, v in os.environ.items() if k != dashboard.TOKEN_ENV}
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "examples" / "web_dashboard" / "app.py"), "--url",
         "amqp://guest:guest@127.0.0.1:1/", "--host", "0.0.0.0", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        assert proc.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 30
        while not any("Running on" in line for line in lines):
            assert time.monotonic() < deadline and proc.poll() is None, lines
            lines.append(proc.stdout.readline())
        text = "".join(lines)
        token = re.search(r"writes need this token: (\S+)", text)
        assert token, text
        assert f"/#token={token.group(1)}" in text
        port = re.search(r"Running on http://0\.0\.0\.0:(\d+)", text)
        assert port, text
        base = f"http://127.0.0.1:{port.group(1)}"

        def post(authorization: str | None) -> int:
            headers = {"Content-Type": "application/json", "Origin": base}
            if authorization:
                headers["Authorization"] = authorization
            request = urllib.request.Request(
                f"{base}/api/object/0-1-1-10-7/methods/purge", data=b'{"request": 0}',
                headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=10) as r:
                    return int(r.status)
            except urllib.error.HTTPError as exc:
                return int(exc.code)

        assert post(None) == 401
        assert post("Bearer not-the-token-at-all") == 401
        assert post(f"Bearer {token.group(1)}") == 503  # past the guard: no broker
    finally:
        proc.terminate()
        proc.wait(10)


async def test_the_token_beyond_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(dashboard.TOKEN_ENV, raising=False)
    for loopback in ("127.0.0.1", "127.0.1.1", "::1", "localhost"):
        assert dashboard.write_token(loopback, None) == (None, False)
    made, generated = dashboard.write_token("0.0.0.0", None)
    assert generated and made is not None and len(made) >= 32
    assert dashboard.write_token("192.0.2.7", None)[1]
    assert dashboard.write_token("0.0.0.0", None)[0] != made  # a new one each start
    given = "a-token-of-the-operator"
    assert dashboard.write_token("0.0.0.0", given) == (given, False)
    assert dashboard.write_token("127.0.0.1", given) == (given, False)  # kept on loopback
    monkeypatch.setenv(dashboard.TOKEN_ENV, given)
    assert dashboard.write_token("0.0.0.0", None) == (given, False)
    from qmf_async import UsageError
    with pytest.raises(UsageError, match="at least 16"):
        dashboard.write_token("0.0.0.0", "short")
    with pytest.raises(UsageError, match=r"CLASS\.METHOD"):
        dashboard.parse_methods("queue.purge,delete")
    assert dashboard.parse_methods("") == ()
    with pytest.raises(UsageError, match="HOST"):
        dashboard.create_app("amqp://localhost/", guard=dashboard.Guard(hosts=("a:b:c:x",)))
    with pytest.raises(UsageError, match="origin"):
        dashboard.create_app("amqp://localhost/",
                             guard=dashboard.Guard(origins=("dash.example.com",)))


# --------------------------------------------------------------------------- stream


async def _sse_events(response: aiohttp.ClientResponse) -> AsyncIterator[tuple[str, Any]]:
    event, data = "message", []
    async for raw in response.content:
        line = raw.decode().rstrip("\r\n")
        if not line:
            if data:
                yield event, json.loads("\n".join(data))
            event, data = "message", []
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())


async def _next_event(events: AsyncIterator[tuple[str, Any]], want: str,
                      timeout: float = 10.0, check: Any = None) -> Any:
    async def find() -> Any:
        async for name, data in events:
            if name == want and (check is None or check(data)):
                return data
        raise AssertionError(f"stream ended before a {want!r} event")
    return await asyncio.wait_for(find(), timeout)


async def test_stream_samples_rates_and_broker_outage(env: Env) -> None:
    env.model.paused = False
    audit = (await env.queues())["audit"]
    async with env.http.get(env.base + "/api/stream") as r:
        assert r.status == 200 and r.headers["Content-Type"].startswith("text/event-stream")
        events = _sse_events(r)
        status = await _next_event(events, "status")
        assert status["connected"] is True
        await _next_event(events, "snapshot")
        # queue updates with samples; rates are counter deltas over sample-time deltas
        last: dict[str, tuple[int, int]] = {}
        rated = 0
        deadline = time.monotonic() + 10
        while rated < 3:
            assert time.monotonic() < deadline, "no rated samples within 10 s"
            update = await _next_event(events, "queue")
            sample, oid = update["sample"], update["object"]["object_id"]
            if sample is None:
                continue
            assert sample["depth"] == update["object"]["statistics"]["msgDepth"]
            assert sample["enqueues"] == update["object"]["statistics"]["msgTotalEnqueues"]
            if oid in last and sample["t"] > last[oid][0]:
                t0, e0 = last[oid]
                want = (sample["enqueues"] - e0) * 1e9 / (sample["t"] - t0)
                assert sample["rate"] == pytest.approx(want)
                rated += 1
            last[oid] = (sample["t"], sample["enqueues"])

        # an outage of the broker: the stream says so, requests fail fast with 503
        env.proxy.cut()
        try:
            down = await _next_event(events, "status", check=lambda s: not s["connected"])
            assert down["brokers"][0]["connected"] is False
            async with env.http.get(env.base + "/api/objects/queue") as resp:
                assert resp.status == 503 and resp.headers["Retry-After"] == "1"
                body = await resp.json()
                assert body["type"] == "NotConnectedError" and body["error"]
            status_code, body = await env.post(
                f"/api/object/{audit['object_id']}/methods/purge", {"request": 0})
            assert status_code == 503, body
        finally:
            env.proxy.restore()
        up = await _next_event(events, "status", check=lambda s: s["connected"])
        assert up["brokers"][0]["reconnects"] >= 1
    await wait_until(lambda: _queues_listed(env), 10.0, 0.1, message="queues after reconnect")


async def _queues_listed(env: Env) -> bool:
    status, body = await env.get("/api/objects/queue")
    return status == 200 and {q["properties"]["name"] for q in body} == QUEUES


# --------------------------------------------------------------------------- the page


def _chromium() -> str | None:
    for candidate in (os.environ.get("QMF_CHROMIUM"), shutil.which("chromium"),
                      shutil.which("chromium-browser"), "/usr/bin/chromium"):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    executable = _chromium()
    if executable is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium)")
    async with async_playwright() as pw:
        b = await pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            await b.close()


@pytest_asyncio.fixture(loop_scope="module")
async def page(browser: Browser, env: Env) -> AsyncIterator[Page]:
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    p = await context.new_page()
    errors: list[str] = []
    p.on("pageerror", lambda exc: errors.append(str(exc)))
    await p.goto(env.base + "/")
    try:
        yield p
    finally:
        await context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


async def _screenshot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / name), full_page=True)


async def _page(browser: Browser, env: Env, width: int, path: str = "/"
                ) -> tuple[BrowserContext, Page, list[str]]:
    context = await browser.new_context(viewport={"width": width, "height": 800})
    p = await context.new_page()
    errors: list[str] = []
    p.on("pageerror", lambda exc: errors.append(str(exc)))
    await p.goto(env.base + path)
    return context, p, errors


async def test_page_table_charts_and_purge(env: Env, page: Page) -> None:
    env.model.paused = False
    rows = page.locator("#queues tbody tr")
    await expect(rows).to_have_count(len(QUEUES), timeout=WAIT_MS)
    for name in QUEUES:
        await expect(page.locator(f"tr[data-queue='{name}']")).to_have_count(1)
    await expect(page.locator("#banner")).to_be_hidden(timeout=WAIT_MS)
    await expect(page.locator("#conn")).to_have_attribute("data-state", "connected")

    # the sparklines grow with the stream's samples
    points = ("() => [...document.querySelectorAll('svg.spark.depth')]"
              ".reduce((n, s) => n + Number(s.dataset.points), 0)")
    await page.wait_for_function(f"({points})() >= 2", timeout=WAIT_MS)
    before = await page.evaluate(points)
    await page.wait_for_function(f"({points})() > {before}", timeout=WAIT_MS)
    # the main charts are uPlot charts of the first queue by name, with a time axis
    await expect(page.locator("#selected-name")).to_have_text(min(QUEUES), timeout=WAIT_MS)
    await page.wait_for_function(
        "Number(document.querySelector('#depth-chart').dataset.points) >= 2", timeout=WAIT_MS)
    assert await page.locator("#depth-chart .uplot canvas").count() == 1
    ticks = await page.locator("#depth-chart").get_attribute("data-ticks") or ""
    assert re.fullmatch(r"(\d\d:\d\d:\d\d(\.\d+)? ?)+", ticks), ticks  # clock times
    assert len(set(ticks.split())) == len(ticks.split()), ticks  # no label twice

    # purge: with the traffic paused, the purged queue's depth drops to 0 and stays
    async def busy_queue() -> str | None:
        found = {n: q["statistics"]["msgDepth"] for n, q in (await env.queues()).items()}
        return max((n for n in found if found[n] > 0), key=found.__getitem__, default=None)

    env.model.paused = True
    try:
        name = await busy_queue()
        if name is None:  # nothing waiting: let traffic run until a queue fills
            env.model.paused = False
            name = await wait_until(busy_queue, 10.0, 0.1, message="a queue with messages")
            env.model.paused = True
        depth = (await env.queues())[name]["statistics"]["msgDepth"]
        row = page.locator(f"tr[data-queue='{name}']")
        dialog = page.locator("#confirm")
        await expect(row.locator("td.depth")).not_to_have_text("0", timeout=WAIT_MS)
        # the first click asks, naming the queue; Cancel leaves the messages alone
        await row.locator("button.purge").click()
        await expect(dialog).to_be_visible()
        await expect(page.locator("#confirm-text")).to_contain_text(f"Purge queue {name}?")
        await page.locator("#confirm-cancel").click()
        await expect(dialog).to_be_hidden()
        await expect(page.locator("#message")).to_have_text(f"Purge of {name} cancelled.")
        assert (await env.queues())[name]["statistics"]["msgDepth"] == depth
        # confirmed, it purges
        await row.locator("button.purge").click()
        await expect(dialog).to_be_visible()
        await _screenshot(page, "web_dashboard_confirm.png")
        await page.locator("#confirm-purge").click()
        await expect(page.locator("#message")).to_contain_text(f"Purged {name}",
                                                               timeout=WAIT_MS)
        await expect(row.locator("td.depth")).to_have_text("0", timeout=WAIT_MS)
        assert (await env.queues())[name]["statistics"]["msgDepth"] == 0
        await _screenshot(page, "web_dashboard.png")
    finally:
        env.model.paused = False


async def test_page_shows_agent_labels(env: Env, page: Page) -> None:
    await expect(page.locator("#queues tbody tr")).to_have_count(len(QUEUES), timeout=WAIT_MS)
    label = env.agent.label
    cells = page.locator("#queues tbody td.agent")
    for i in range(len(QUEUES)):
        await expect(cells.nth(i)).to_have_text(label, timeout=WAIT_MS)


async def test_page_shows_a_broker_outage_and_recovers(env: Env, page: Page) -> None:
    env.model.paused = False
    banner = page.locator("#banner")
    await expect(page.locator("#queues tbody tr")).to_have_count(len(QUEUES), timeout=WAIT_MS)
    await expect(banner).to_be_hidden(timeout=WAIT_MS)
    buttons = page.locator("button.purge")
    await expect(buttons.first).to_be_enabled(timeout=WAIT_MS)
    await page.wait_for_function(
        "Number(document.querySelector('#depth-chart').dataset.points) >= 2", timeout=WAIT_MS)
    assert await page.locator("#depth-chart").get_attribute("data-gaps") == "0"
    env.proxy.cut()
    try:
        await expect(banner).to_be_visible(timeout=WAIT_MS)
        await expect(banner).to_have_attribute("data-state", "disconnected")
        await expect(banner).to_contain_text("Broker disconnected")
        # no action while the broker is away
        for i in range(await buttons.count()):
            await expect(buttons.nth(i)).to_be_disabled()
        await _screenshot(page, "web_dashboard_outage.png")
    finally:
        env.proxy.restore()
    await expect(banner).to_be_hidden(timeout=WAIT_MS)
    await expect(page.locator("#conn")).to_have_attribute("data-state", "connected")
    for i in range(await buttons.count()):
        await expect(buttons.nth(i)).to_be_enabled()
    # updates flow again after the reconnect, and the outage is a gap in the charts
    updates = int(await page.locator("#queues").get_attribute("data-updates") or 0)
    await page.wait_for_function(
        f"Number(document.querySelector('#queues').dataset.updates) > {updates}",
        timeout=WAIT_MS)
    # a queue sampled again: its sparkline is two pieces; chosen, its chart has the gap
    broken = ("() => [...document.querySelectorAll('#queues tbody tr')].find((tr) => "
              "(tr.querySelector('svg.spark.depth path').getAttribute('d').match(/M/g) "
              "|| []).length >= 2)")
    await page.wait_for_function(f"Boolean(({broken})())", timeout=WAIT_MS)
    name = await page.evaluate(f"({broken})().dataset.queue")
    await page.locator(f"tr[data-queue='{name}']").click()
    await expect(page.locator("#depth-chart")).not_to_have_attribute("data-gaps", "0")
    await _screenshot(page, "web_dashboard_gap.png")


async def test_chosen_queue_is_kept_in_the_address(env: Env, browser: Browser) -> None:
    context, page, errors = await _page(browser, env, 1280)
    try:
        await expect(page.locator("#queues tbody tr")).to_have_count(len(QUEUES),
                                                                      timeout=WAIT_MS)
        other = sorted(QUEUES)[1]
        await page.locator(f"tr[data-queue='{other}']").click()
        await expect(page.locator("#selected-name")).to_have_text(other)
        assert page.url.endswith(f"?queue={other}")
        await expect(page.locator(f"tr[data-queue='{other}']")).to_have_class("selected")
        # the chart follows the chosen queue only, whatever updates first
        await page.reload()
        await expect(page.locator("#selected-name")).to_have_text(other, timeout=WAIT_MS)
        await expect(page.locator("#queue-select option:checked")).to_have_text(other)
        # the drop-down chooses too
        third = sorted(QUEUES)[2]
        option = page.locator("#queue-select option", has_text=third)
        await page.locator("#queue-select").select_option(
            value=await option.get_attribute("value"))
        await expect(page.locator("#selected-name2")).to_have_text(third)
        assert page.url.endswith(f"?queue={third}")
    finally:
        await context.close()
    assert not errors, errors


async def test_layout_at_700_pixels(env: Env, browser: Browser) -> None:
    context, page, errors = await _page(browser, env, 700)
    try:
        await expect(page.locator("#queues tbody tr")).to_have_count(len(QUEUES),
                                                                      timeout=WAIT_MS)
        buttons = page.locator("button.purge")
        for i in range(await buttons.count()):
            box = await buttons.nth(i).bounding_box()
            assert box is not None and box["x"] + box["width"] <= 700, box
        assert await page.evaluate("document.documentElement.scrollWidth") <= 700
        for chart in ("#depth-chart", "#rate-chart"):
            box = await page.locator(chart).bounding_box()
            assert box is not None and box["x"] + box["width"] <= 700, (chart, box)
        await _screenshot(page, "web_dashboard_700px.png")
    finally:
        await context.close()
    assert not errors, errors


async def test_an_idle_queue_has_a_readable_chart(env: Env, browser: Browser) -> None:
    """One sample (a queue created while nothing moves) and a flat series: the time
    axis spans some seconds around the sample with distinct clock times, the depth
    axis has distinct whole numbers."""
    env.model.paused = True
    name = f"idle-{uuid.uuid4().hex[:6]}"
    broker = await env.the_broker()
    methods = f"/api/object/{broker['object_id']}/methods"
    status, body = await env.post(f"{methods}/create", {"type": "queue", "name": name,
                                                        "properties": {}, "strict": False})
    assert status == 200, body
    context, page, errors = await _page(browser, env, 1280, f"/?queue={name}")
    try:
        await expect(page.locator("#selected-name")).to_have_text(name, timeout=WAIT_MS)
        depth = page.locator("#depth-chart")
        await expect(depth).to_have_attribute("data-points", "1", timeout=WAIT_MS)
        await page.wait_for_function(
            "document.querySelector('#depth-chart').dataset.ticks", timeout=WAIT_MS)
        for chart in ("#depth-chart", "#rate-chart"):
            ticks = (await page.locator(chart).get_attribute("data-ticks") or "").split()
            assert len(ticks) >= 2 and len(set(ticks)) == len(ticks), (chart, ticks)
            assert all(re.fullmatch(r"\d\d:\d\d:\d\d(\.\d+)?", t) for t in ticks), ticks
            yticks = (await page.locator(chart).get_attribute("data-yticks") or "").split()
            assert len(yticks) >= 2 and len(set(yticks)) == len(yticks), (chart, yticks)
        yticks = (await depth.get_attribute("data-yticks") or "").split()
        assert all(t.isdigit() for t in yticks), yticks  # whole messages only
        await _screenshot(page, "web_dashboard_idle_queue.png")
    finally:
        try:
            # deleted by the demo broker itself: the dashboard offers no delete
            await env.model.delete(None, type="queue", name=name, options={})
            await expect(page.locator(f"tr[data-queue='{name}']")).to_have_count(
                0, timeout=WAIT_MS)
        finally:
            env.model.paused = False
            await context.close()
    assert not errors, errors


async def test_no_contradiction_while_the_broker_is_down(env: Env, browser: Browser) -> None:
    """The page opened on ?queue=orders while the broker is down: the listing fails
    (503) but the stream's last state has orders; the page shows and charts it and
    does not say it has no such queue, whichever answer comes first (here the worse
    order is forced: the stream waits for the listing's answer)."""
    await wait_until(lambda: _queues_listed(env), 10.0, 0.1, message="queues listed")
    env.proxy.cut()
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        async def down() -> bool:
            status, body = await env.get("/api/agents")
            return status == 200 and body["connected"] is False

        await wait_until(down, 10.0, 0.05, message="the dashboard sees the broker down")
        listed = asyncio.Event()

        async def hold_stream(route: Any) -> None:
            await asyncio.wait_for(listed.wait(), 10)
            await route.continue_()

        await context.route("**/api/stream", hold_stream)
        page = await context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("response", lambda r: listed.set() if "/api/objects/queue" in r.url else None)
        await page.goto(env.base + "/?queue=orders")
        await expect(page.locator("tr[data-queue='orders']")).to_have_count(1,
                                                                          timeout=WAIT_MS)
        await expect(page.locator("#banner")).to_contain_text("Broker disconnected",
                                                              timeout=WAIT_MS)
        await expect(page.locator("#selected-name")).to_have_text("orders")
        await expect(page.locator("#message")).not_to_contain_text("No queue named")
        await _screenshot(page, "web_dashboard_down_on_open.png")
        assert not errors, errors
    finally:
        env.proxy.restore()
        await context.close()
    await wait_until(lambda: _queues_listed(env), 15.0, 0.1, message="queues after reconnect")
