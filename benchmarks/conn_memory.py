"""Memory per connection: the resident memory one more ``Session`` connected to a broker
adds, measured as the growth of the process's RSS over ``--extra`` sessions (after one
warm-up session, which pays for imports and first-use costs).

    python benchmarks/conn_memory.py amqp://127.0.0.1:5672 --extra 40

Run it with ``PYTHONPATH`` naming the checkout to measure (from a directory outside the
checkouts, so that the current directory does not shadow it).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
from typing import Any


def rss_kib() -> int:
    """The process's resident set, KiB (Linux)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


async def connected(url: str) -> Any:
    from qmf_async import Session

    session = Session()
    await session.__aenter__()
    await session.add_broker(url)
    return session


async def main(url: str, extra: int, settle: float) -> float:
    sessions = [await connected(url)]
    await asyncio.sleep(settle)
    gc.collect()
    base = rss_kib()
    for _ in range(extra):
        sessions.append(await connected(url))
    await asyncio.sleep(settle)
    gc.collect()
    per = (rss_kib() - base) / extra
    for session in sessions:
        await session.__aexit__(None, None, None)
    return per


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("url")
    p.add_argument("--extra", type=int, default=40, help="sessions measured")
    p.add_argument("--settle", type=float, default=0.5, help="seconds before each reading")
    args = p.parse_args()
    per = asyncio.run(main(args.url, args.extra, args.settle))
    print(f"{per:.1f} KiB per connection ({args.extra} more sessions)")
