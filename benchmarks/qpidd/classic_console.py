# Python 2.7: the classic QMF v1 console (qmf.console, what qpid-tool uses) against a
# qpidd over AMQP 0-10.  PYTHONPATH = a copy of classic-tools/lib (see broker.py).
# Times getObjects of the broker's queues (best of N) and the broker object's echo
# method, 1 in flight and W in flight (_async=True; replies come through
# Console.methodResponse).  Prints one JSON line.
# ruff: noqa: UP031  (Python 2.7: %-formatting)
import json
import optparse
import os
import resource
import socket
import threading
import time

import qpid.util

import qmf.console
from qmf.console import Console, Session

CLK_TCK = os.sysconf("SC_CLK_TCK")
BODY = "qmf-bench-echo"


def proc_cpu(pid):
    """utime+stime seconds of process pid, from /proc/PID/stat."""
    with open("/proc/%d/stat" % pid) as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / float(CLK_TCK)


def use_nodelay():
    """Make the console's 0-10 socket send at once (TCP_NODELAY): the library leaves
    Nagle's algorithm on, so each synced request waits for the peer's delayed ACK."""
    def connect(host, port):
        sock = qpid.util.connect(host, port)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock
    qmf.console.connect = connect


def self_cpu():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


class Replies(Console):
    """Counts asynchronous method responses and wakes the sender."""

    def __init__(self):
        self.cv = threading.Condition()
        self.done = 0
        self.failed = 0
        self.pending = set()
        self.early = set()  # replies that came before echo() returned their seq

    def methodResponse(self, broker, seq, response):
        self.cv.acquire()
        try:
            if seq in self.pending:
                self.pending.discard(seq)
                self.done += 1
                if response.status != 0:
                    self.failed += 1
                self.cv.notify()
            else:
                self.early.add((seq, response.status))
        finally:
            self.cv.release()


def timed(fn, qpidd_pid):
    c0, q0, t0 = self_cpu(), proc_cpu(qpidd_pid), time.time()
    value = fn()
    t1 = time.time()
    return value, {"seconds": t1 - t0, "cpu": self_cpu() - c0,
                   "qpidd_cpu": proc_cpu(qpidd_pid) - q0}


def echo_sequential(broker_obj, seconds, qpidd_pid):
    def run():
        n = 0
        end = time.time() + seconds
        while time.time() < end:
            r = broker_obj.echo(n, BODY, _timeout=30)
            if r.status != 0 or r.outArgs.get("sequence") != n:
                raise RuntimeError("echo %d answered %r" % (n, r))
            n += 1
        return n
    n, t = timed(run, qpidd_pid)
    t.update(calls=n, rate=n / t["seconds"], window=1, failed=0)
    return t


def echo_pipelined(broker_obj, replies, window, seconds, qpidd_pid):
    def run():
        cv = replies.cv
        n = 0
        end = time.time() + seconds
        cv.acquire()
        try:
            while time.time() < end:
                while len(replies.pending) >= window:
                    cv.wait(30)
                    if time.time() > end + 60:
                        raise RuntimeError("echo replies stalled")
                cv.release()
                try:
                    seq = broker_obj.echo(n, BODY, _async=True)
                finally:
                    cv.acquire()
                if (seq, 0) in replies.early:
                    replies.early.discard((seq, 0))
                    replies.done += 1
                elif [e for e in replies.early if e[0] == seq]:
                    replies.early = set(e for e in replies.early if e[0] != seq)
                    replies.done += 1
                    replies.failed += 1
                else:
                    replies.pending.add(seq)
                n += 1
            deadline = time.time() + 60
            while replies.pending and time.time() < deadline:
                cv.wait(1)
            if replies.pending:
                raise RuntimeError("%d echo replies missing" % len(replies.pending))
        finally:
            cv.release()
        return n
    replies.done = 0
    _sent, t = timed(run, qpidd_pid)
    t.update(calls=replies.done, rate=replies.done / t["seconds"], window=window,
             failed=replies.failed)
    return t


def main():
    p = optparse.OptionParser()
    p.add_option("--port", type="int")
    p.add_option("--qpidd-pid", type="int")
    p.add_option("--expect", type="int", default=10000)
    p.add_option("--repeat", type="int", default=3)
    p.add_option("--seconds", type="float", default=5.0)
    p.add_option("--window", type="int", default=1000)
    p.add_option("--nodelay", action="store_true", help="TCP_NODELAY on the 0-10 socket")
    opts, _ = p.parse_args()
    if opts.nodelay:
        use_nodelay()

    replies = Replies()
    session = Session(replies, rcvObjects=False, rcvEvents=False, rcvHeartbeats=False,
                      manageConnections=False)
    t0 = time.time()
    broker = session.addBroker("127.0.0.1:%d" % opts.port, timeout=30)
    connect_s = time.time() - t0
    out = {"client": "classic_nodelay" if opts.nodelay else "classic", "connect_seconds": connect_s,
           "qmf_v2_broker": bool(broker.brokerSupportsV2)}

    runs = []
    for _ in range(opts.repeat):
        queues, t = timed(lambda: session.getObjects(
            _class="queue", _package="org.apache.qpid.broker", _timeout=300), opts.qpidd_pid)
        t["objects"] = len(queues)
        runs.append(t)
        del queues
    if min(r["objects"] for r in runs) < opts.expect:
        raise SystemExit("getObjects returned %d queues, expected >= %d"
                         % (min(r["objects"] for r in runs), opts.expect))
    out["get_objects"] = {"runs": runs, "best": min(runs, key=lambda r: r["seconds"])}

    broker_obj = session.getObjects(_class="broker", _package="org.apache.qpid.broker")[0]
    out["echo_1"] = echo_sequential(broker_obj, opts.seconds, opts.qpidd_pid)
    out["echo_window"] = echo_pipelined(broker_obj, replies, opts.window, opts.seconds,
                                        opts.qpidd_pid)
    session.delBroker(broker)
    ru = resource.getrusage(resource.RUSAGE_SELF)
    out.update(max_rss_kb=ru.ru_maxrss, cpu_user=ru.ru_utime, cpu_sys=ru.ru_stime)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
