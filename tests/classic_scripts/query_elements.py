"""Which properties and statistics a classic ``getObjects`` answer lists (Python 2.7
and 3) for the queue QUEUE, and what an element it does not list reads as.  The
classic console queries qpidd over QMF v2 whenever qpidd speaks it; qpidd's v2 maps
name some statistics otherwise than its schema does.

usage: query_elements.py HOST:PORT QUEUE
"""
import sys

from qmf.console import Session


def names(pairs):
    return " ".join(sorted(str(element.name) for element, _ in pairs))


def main():
    address, queue = sys.argv[1], sys.argv[2]
    sess = Session(rcvObjects=False, rcvEvents=False, rcvHeartbeats=False)
    broker = sess.addBroker(address)
    (found,) = sess.getObjects(_class="queue", name=queue)
    listed = set(s.name for s, _ in found.getStatistics())
    missing = sorted(s.name for s in found.getSchema().getStatistics() if s.name not in listed)
    print("query properties: " + names(found.getProperties()))
    print("query statistics: " + names(found.getStatistics()))
    print("query unlisted: " + " ".join(n + "=" + repr(getattr(found, n)) for n in missing))
    print("msgDepth: " + str(found.msgDepth))
    sess.delBroker(broker)


if __name__ == "__main__":
    main()
