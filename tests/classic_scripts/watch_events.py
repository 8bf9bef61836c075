# A classic Console subclass printing events and queue updates (the tutorial's
# asynchronous session).  usage: watch_events.py BROKER QUEUE-PREFIX
from __future__ import print_function  # noqa: UP010 (the script runs on Python 2.7 too)

import sys
import threading

from qmf.console import Console, Session

prefix = sys.argv[2]
seen = threading.Event()
_out = threading.Lock()


def say(*words):
    # callbacks print from the session's thread while the main thread prints too:
    # each line is written whole, under one lock, so lines never interleave
    with _out:
        sys.stdout.write(" ".join(str(w) for w in words) + "\n")
        sys.stdout.flush()


class EventConsole(Console):
    def brokerConnected(self, broker):
        say("connected", broker.isConnected())

    def event(self, broker, event):
        args = event.getArguments()
        if str(args.get("qName", "")).startswith(prefix):
            say("event", event.getClassKey().getClassName(), args["qName"])
            say("line", event)
            seen.set()

    def objectProps(self, broker, record):
        if record.getClassKey().getClassName() == "queue" and record.name.startswith(prefix):
            # a callback may call back into the session (the classic console deadlocks)
            found = broker.session.getObjects(_objectId=record.getObjectId())
            say("props", record.name, len(found))


sess = Session(EventConsole(), rcvObjects=True, rcvEvents=True)
broker = sess.addBroker(sys.argv[1])
br = sess.getObjects(_class="broker")[0]
r = br.create("queue", prefix + "-ev", {}, False)
say("create", r.status)
say("seen", seen.wait(20))
sess.close()
