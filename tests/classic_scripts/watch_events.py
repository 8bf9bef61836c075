# A classic Console subclass printing events and queue updates (the tutorial's
# asynchronous session).  usage: watch_events.py BROKER QUEUE-PREFIX
from __future__ import print_function  # noqa: UP010 (the script runs on Python 2.7 too)

import sys
import threading

from qmf.console import Console, Session

prefix = sys.argv[2]
seen = threading.Event()


class EventConsole(Console):
    def brokerConnected(self, broker):
        print("connected", broker.isConnected())

    def event(self, broker, event):
        args = event.getArguments()
        if str(args.get("qName", "")).startswith(prefix):
            print("event", event.getClassKey().getClassName(), args["qName"])
            print("line", event)
            seen.set()

    def objectProps(self, broker, record):
        if record.getClassKey().getClassName() == "queue" and record.name.startswith(prefix):
            # a callback may call back into the session (the classic console deadlocks)
            found = broker.session.getObjects(_objectId=record.getObjectId())
            print("props", record.name, len(found))


sess = Session(EventConsole(), rcvObjects=True, rcvEvents=True)
broker = sess.addBroker(sys.argv[1])
br = sess.getObjects(_class="broker")[0]
r = br.create("queue", prefix + "-ev", {}, False)
print("create", r.status)
print("seen", seen.wait(20))
sess.close()
