# A classic qmf.console script (the Qpid console tutorial's synchronous session), run
# unchanged by Python 2.7 with the classic console and by Python 3 with qmf-async.
# usage: oracle_session.py BROKER QUEUE-PREFIX
from __future__ import print_function  # noqa: UP010 (the script runs on Python 2.7 too)

import re
import sys

from qmf.console import Session

prefix = sys.argv[2]
sess = Session()
broker = sess.addBroker(sys.argv[1])
print(sess)
print(broker)
print(sess.getPackages())
print(sorted(repr(c) for c in sess.getClasses("org.apache.qpid.broker")))
queues = [q for q in sess.getObjects(_class="queue", _package="org.apache.qpid.broker")
          if re.match(prefix, q.name)]
queues.sort(key=lambda q: q.name)
for q in queues:
    print(q)
    print(q.name, q.msgDepth, q.durable, q.autoDelete, q.exclusive, q.vhostRef)
    print(q.getIndex(), q.getClassKey(), q.getSchema())
    print([p for p, v in q.getProperties()])
    print([s for s, v in q.getStatistics()][:5])
    oid = q.getObjectId()
    print(oid.getAgentBank(), oid.getObject(), oid.getSequence(), oid.isDurable())
    print(q.isDeleted(), q.getTimestamps()[1] > 0)
    same = sess.getObjects(_objectId=oid)
    print(len(same), same[0].name, same[0].getObjectId() == oid)
one = sess.getObjects(_class="queue", name=queues[0].name)
print(len(one), one[0])
br = sess.getObjects(_class="broker")[0]
print(br)
r = br.echo(7, "hello world")
print(r.status, r.text, r.body, r.sequence)
print(sess.getAgents())
schema = sess.getSchema(queues[0].getClassKey())
print(schema.getMethods())
print(schema.getProperties())
print(schema.getStatistics())
r = br.getLogLevel()
print(r.status, r.text, r.level)
print(sorted(e.name for e in sess.getObjects(_class="exchange") if e.name.startswith("amq.")))
print(queues[0].vhostRef == queues[-1].vhostRef)
sess.delBroker(broker)
print(sess)
sess.close()
