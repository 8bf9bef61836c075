# A qpidtoollibs script, run by Python 2.7 with the classic library (over a
# qpid.messaging connection) and by Python 3 with qmf-async (from the address).
# usage: oracle_toollibs.py BROKER NAME
from __future__ import print_function  # noqa: UP010 (the script runs on Python 2.7 too)

import sys

from qpidtoollibs import BrokerAgent

try:
    from qpid.messaging import Connection
    conn = Connection(sys.argv[1])
    conn.open()
except ImportError:  # qmf-async: BrokerAgent takes the address itself
    conn = sys.argv[1]

name = sys.argv[2]
agent = BrokerAgent(conn)
print(sorted(agent.echo(4, "four").items()))
agent.addQueue(name, {"qpid.max_count": 10})
agent.addExchange("topic", name + "-x")
agent.bind(name + "-x", name, "a.#")
q = agent.getQueue(name)
print(q.name, q.durable, q.autoDelete, q.exclusive, q.msgDepth, q.vhostRef, q.arguments)
print(q.getObjectId(), q.getCreateTime() > 0, q.getDeleteTime())
print(sorted(k for k in q.values if not k.startswith(("msg", "byte", "discards", "consumer",
                                                       "unacked", "binding", "flow",
                                                       "messageLatency", "acquires",
                                                       "releases", "reroutes", "redirect",
                                                       "creator")))[:8])
print([b for b in agent.getAllBindings() if b.bindingKey == "a.#"])
x = agent.getExchange(name + "-x")
print(x.name, x.type, x.durable, x.getObjectId())
print(agent.getBroker().name, agent.getBroker().getObjectId())
print(sorted(agent.getLogLevel().items()))
print(sorted(e.name for e in agent.getAllExchanges() if e.name.startswith("amq.")))
print([v["name"] for v in agent.list("queue") if v["name"] == name])
agent.unbind(name + "-x", name, "a.#")
agent.delQueue(name)
agent.delExchange(name + "-x")
print(agent.getQueue(name), agent.getExchange(name + "-x"))
agent.close()
