"""The qpid-queue-stats pattern (Python 2.7 and 3): a Console with objectProps and
objectStats, ``userBindings=True`` and ``bindClass`` for queues.  Prints which queues
named PREFIX-* were seen through objectProps and objectStats, and whether each one's
objectProps came before its first objectStats.

usage: object_callbacks.py HOST:PORT PREFIX COUNT
"""
import sys
import threading
import time

from qmf.console import Console, Session


class Watch(Console):
    def __init__(self, prefix):
        self.prefix = prefix
        self.lock = threading.Lock()
        self.names = {}  # object id -> queue name (from objectProps)
        self.calls = {}  # object id -> "p"/"s" in call order

    def _note(self, record, kind):
        key = str(record.getObjectId())
        with self.lock:
            self.calls.setdefault(key, []).append(kind)
            if kind == "p" and record.name.startswith(self.prefix):
                self.names[key] = record.name

    def objectProps(self, broker, record):
        self._note(record, "p")

    def objectStats(self, broker, record):
        self._note(record, "s")

    def state(self):
        with self.lock:
            both = sorted(set(n for k, n in self.names.items() if "s" in self.calls[k]))
            first = all(self.calls[k][0] == "p" for k in self.names)
            return sorted(set(self.names.values())), both, first


def main():
    address, prefix, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    watch = Watch(prefix + "-")
    sess = Session(watch, userBindings=True, rcvEvents=False, rcvHeartbeats=False)
    broker = sess.addBroker(address)
    sess.bindClass("org.apache.qpid.broker", "queue")
    deadline = time.time() + 20
    while time.time() < deadline and len(watch.state()[1]) < count:
        time.sleep(0.1)
    props, both, first = watch.state()
    print("objectProps: " + " ".join(props))
    print("objectStats: " + " ".join(both))
    print("objectProps first: " + str(first))
    sess.delBroker(broker)


if __name__ == "__main__":
    main()
