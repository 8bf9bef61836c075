"""Benchmarks against a genuine qpidd: helpers to start one, create queues and read
its CPU time, plus the clients the driver (``benchmarks/qpidd_compare.py``) runs."""
