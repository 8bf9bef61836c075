# Python 2.7: create N queues on a qpidd over AMQP 0-10 with the classic qpid client
# (PYTHONPATH = a copy of classic-tools/lib). Prints one JSON line.
# ruff: noqa: UP031  (Python 2.7: %-formatting)
#   declare:   queue.declare commands pipelined on one session (no per-command sync),
#              then one execution.sync: the broker has created them all when it returns.
#   messaging: qpid.messaging senders to "NAME; {create: always}" (one round trip each).
import json
import optparse
import time


def by_declare(port, names):
    from qpid.connection import Connection
    from qpid.util import connect
    conn = Connection(connect("127.0.0.1", port), mechanism="ANONYMOUS")
    conn.start(timeout=30)
    try:
        ssn = conn.session("make-queues-%d" % time.time(), timeout=30)
        ssn.auto_sync = False
        for name in names:
            ssn.queue_declare(queue=name)
        ssn.sync(timeout=600)
        ssn.close(timeout=30)
    finally:
        conn.close(timeout=30)


def by_messaging(port, names):
    from qpid.messaging import Connection
    conn = Connection.establish("127.0.0.1:%d" % port, sasl_mechanisms="ANONYMOUS")
    try:
        ssn = conn.session()
        for name in names:
            ssn.sender("%s; {create: always}" % name).close()
    finally:
        conn.close()


def main():
    p = optparse.OptionParser()
    p.add_option("--port", type="int")
    p.add_option("--count", type="int", default=10000)
    p.add_option("--prefix", default="bench-q-")
    p.add_option("--method", choices=["declare", "messaging"], default="declare")
    opts, _ = p.parse_args()
    names = ["%s%05d" % (opts.prefix, i) for i in range(opts.count)]
    t0 = time.time()
    (by_declare if opts.method == "declare" else by_messaging)(opts.port, names)
    print(json.dumps({"method": opts.method, "created": len(names),
                      "seconds": round(time.time() - t0, 3)}))


if __name__ == "__main__":
    main()
