"""Make the telemetry pictures of the docs from a real run against qpidd.

    PYTHONPATH=. .venv/bin/python scripts/telemetry_images.py [--seconds 150]
        [--out docs/img]

Starts a qpidd with the stock management settings (QMF v2 only, statistics every 2 s)
and three queues with known traffic from a plain AMQP client
(``benchmarks/qpidd/known_traffic.py``): ``orders`` 200 msg/s in and 170 out (its depth
grows by 30 a second), ``invoices`` 50 in and 50 out, ``audit`` 10 in and none out;
and a dynamic receiver attached and detached every 5 s (``benchmarks/qpidd/traffic.py
--churn 0.2``), for qpidd's queueDeclare, subscribe, unsubscribe and queueDelete events.
Then, side by side:

- ``qmf collect`` for ``--seconds``, then ``qmf pipeline`` (local[2]); the report's
  PNGs are copied to ``OUT/pipeline_*.png``;
- the web dashboard (examples/web_dashboard/app.py) on the same qpidd, with a
  screenshot by headless Chromium (playwright) of the page following ``orders``
  (``OUT/web_dashboard_qpidd.png``).

Every wait has a deadline; every process it starts is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.qpidd.known_traffic import Traffic  # noqa: E402
from benchmarks.qpidd.v2 import V2Qpidd  # noqa: E402

TRAFFIC = {"orders": (200.0, 170.0), "invoices": (50.0, 50.0), "audit": (10.0, 0.0)}
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _chromium() -> str:
    for candidate in (os.environ.get("QMF_CHROMIUM"), shutil.which("chromium"),
                      "/usr/bin/chromium"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise SystemExit("Chromium is not installed (Debian: apt-get install chromium)")


async def _dashboard_screenshot(base: str, path: Path, timeout: float = 60.0) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=_chromium(),
                                           args=["--headless", "--no-sandbox"])
        try:
            page = await browser.new_page(viewport={"width": 1280, "height": 860})
            await page.goto(f"{base}/?queue=orders", timeout=timeout * 1000)
            # the table lists the three queues, and the charts have drawn some points
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                text = await page.inner_text("body")
                if all(name in text for name in TRAFFIC):
                    break
                await asyncio.sleep(0.5)
            else:
                raise SystemExit("the dashboard did not list the queues in time")
            await asyncio.sleep(40)  # let the charts fill: 40 s of samples
            await page.screenshot(path=str(path), full_page=True)
        finally:
            await browser.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=150.0, help="collection time")
    p.add_argument("--out", default=str(ROOT / "docs" / "img"))
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="qmf-telemetry-images-"))
    procs: list[subprocess.Popen[bytes]] = []
    traffics: list[Traffic] = []
    try:
        with V2Qpidd(qmf1=False, pub_interval=2, workdir=work / "qpidd") as broker:
            address = f"127.0.0.1:{broker.port}"
            collect = subprocess.Popen(
                [sys.executable, "-m", "qmf_async.tools.cli", "collect", broker.url,
                 "--out", str(work / "dataset"), "--duration", str(args.seconds),
                 "--json", "--quiet"], stdout=subprocess.PIPE, env=ENV)
            procs.append(collect)
            procs.append(subprocess.Popen(
                [sys.executable, str(ROOT / "benchmarks" / "qpidd" / "traffic.py"),
                 "--port", str(broker.port), "--rate", "0.0001", "--queues", "1",
                 "--churn", "0.2"], env=ENV, stdout=subprocess.DEVNULL))
            for queue, (rate_in, rate_out) in TRAFFIC.items():
                traffic = Traffic(address, queue, rate_in, rate_out or 1e-9)
                traffic.start()
                traffics.append(traffic)
            port = _free_port()
            procs.append(subprocess.Popen(
                [sys.executable, str(ROOT / "examples" / "web_dashboard" / "app.py"),
                 "--url", broker.url, "--port", str(port)], env=ENV,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            asyncio.run(_dashboard_screenshot(f"http://127.0.0.1:{port}",
                                              out / "web_dashboard_qpidd.png"))
            stdout, _ = collect.communicate(timeout=args.seconds + 120)
            print("collect:", json.loads(stdout))
            for traffic in traffics:
                traffic.stop()
        done = subprocess.run(
            [sys.executable, "-m", "qmf_async.tools.cli", "pipeline", "--dataset",
             str(work / "dataset"), "--out", str(work / "out"), "--master", "local[2]",
             "--json"], capture_output=True, text=True, env=ENV, timeout=900, check=True)
        summary = json.loads(done.stdout)
        print("pipeline:", {k: summary[k] for k in ("rows", "window", "restarts",
                                                   "sample_interval_seconds")})
        for png in summary["plots"]:
            shutil.copy(png, out / f"pipeline_{Path(png).name}")
            print("wrote", out / f"pipeline_{Path(png).name}")
        print("wrote", out / "web_dashboard_qpidd.png")
    finally:
        for traffic in traffics:
            try:
                traffic.stop()
            except Exception:
                pass
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(20)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
