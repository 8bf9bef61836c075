"""Which properties and statistics a classic record lists (Python 2.7 and 3): the
queue QUEUE from ``getObjects`` and from the first ``objectStats`` update of it, and
what an element it does not list reads as.  Over QMF v2 an agent may leave elements
out of an object's map; the classic console lists only those that arrived.

usage: record_elements.py HOST:PORT QUEUE
"""
import sys
import threading
import time

from qmf.console import Console, Session


class Watch(Console):
    def __init__(self, queue):
        self.queue = queue
        self.ids = set()
        self.stats = []
        self.lock = threading.Lock()

    def objectStats(self, broker, record):
        with self.lock:
            if str(record.getObjectId()) in self.ids and not self.stats:
                self.stats.append(record)


def names(pairs):
    return " ".join(sorted(str(element.name) for element, _ in pairs))


def unlisted(record):
    listed = set(s.name for s, _ in record.getStatistics())
    missing = sorted(s.name for s in record.getSchema().getStatistics()
                     if s.name not in listed)
    return " ".join(n + "=" + repr(getattr(record, n)) for n in missing)


def main():
    address, queue = sys.argv[1], sys.argv[2]
    watch = Watch(queue)
    sess = Session(watch, rcvEvents=False, rcvHeartbeats=False)
    broker = sess.addBroker(address)
    (found,) = sess.getObjects(_class="queue", name=queue)
    with watch.lock:
        watch.ids.add(str(found.getObjectId()))
    print("query properties: " + names(found.getProperties()))
    print("query statistics: " + names(found.getStatistics()))
    print("query unlisted: " + unlisted(found))
    deadline = time.time() + 20
    while time.time() < deadline and not watch.stats:
        time.sleep(0.1)
    if watch.stats:
        print("update statistics: " + names(watch.stats[0].getStatistics()))
        print("update unlisted: " + unlisted(watch.stats[0]))
    sess.delBroker(broker)


if __name__ == "__main__":
    main()
