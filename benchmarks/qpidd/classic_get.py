# Python 2.7: the classic console (qmf.console, what qpid-tool and qpid-stat use)
# getObjects of the broker's queues against a qpidd over AMQP 0-10, best of N.  On a
# broker with qmf.default.direct it speaks QMF v2 (map messages): its v2 path.
# PYTHONPATH = a copy of classic-tools/lib (see broker.py).  Prints one JSON line.
# ruff: noqa: UP031  (Python 2.7: %-formatting)
import json
import optparse
import os
import resource
import time

from qmf.console import Session

CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid):
    with open("/proc/%d/stat" % pid) as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / float(CLK_TCK)


def self_cpu():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def main():
    p = optparse.OptionParser()
    p.add_option("--port", type="int")
    p.add_option("--qpidd-pid", type="int")
    p.add_option("--expect", type="int", default=0)
    p.add_option("--repeat", type="int", default=3)
    opts, _ = p.parse_args()
    session = Session(rcvObjects=False, rcvEvents=False, rcvHeartbeats=False,
                      manageConnections=False)
    broker = session.addBroker("127.0.0.1:%d" % opts.port, timeout=30)
    out = {"client": "classic_console", "qmf_v2_broker": bool(broker.brokerSupportsV2)}
    runs = []
    for _ in range(opts.repeat):
        c0, q0, t0 = self_cpu(), proc_cpu(opts.qpidd_pid), time.time()
        queues = session.getObjects(_class="queue", _package="org.apache.qpid.broker",
                                    _timeout=300)
        runs.append({"seconds": time.time() - t0, "cpu": self_cpu() - c0,
                     "qpidd_cpu": proc_cpu(opts.qpidd_pid) - q0, "objects": len(queues)})
        del queues
    if min(r["objects"] for r in runs) < opts.expect:
        raise SystemExit("getObjects returned %d queues, expected >= %d"
                         % (min(r["objects"] for r in runs), opts.expect))
    session.delBroker(broker)
    ru = resource.getrusage(resource.RUSAGE_SELF)
    out.update(runs=runs, max_rss_kb=ru.ru_maxrss, cpu_user=ru.ru_utime, cpu_sys=ru.ru_stime)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
