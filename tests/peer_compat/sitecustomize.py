"""Python 3.12+ compatibility for the *tests' own* code in the upstream conformance
suites (``../shared/peer-suite``): their AMQP 0-10 client, their runner and their test
classes.  Used by tests/test_peer_suite.py only, and only on Python 3.12 and newer.

Python 3.12 removed three things those upstream files use; this puts them back with
their Python 3.11 meaning, and touches nothing else:

- ``ssl.wrap_socket``: qpid-python's ``qpid/util.py`` and ``qpid/messaging/transports.py``
  import it at module level, so without it neither ``qpid.util`` nor ``qpid.messaging``
  imports and no test starts.  Rebuilt on ``ssl.SSLContext``.  The suites run in
  clear, so it is never called.
- the ``imp`` module: qpid-cpp's ``brokertest.py`` (the qmfv2 suite's base) imports it
  (for ``imp.load_module`` in a helper the suites never call).
- the ``unittest.TestCase`` aliases (``assertEquals``, ``failUnless``, ``assert_``,
  ``failIfEqual`` ...): the federation, message and qmf_client tests call them.

Nothing in ``qmf.console``, ``qpidtoollibs`` or ``qmf.client`` (this project's, under
test) uses any of them.

It is loaded as ``sitecustomize`` (Python imports that module from ``sys.path`` at
start-up) because the harness's launcher lives in ``../shared``, which this project
does not change: the test module puts this directory on the harness's PYTHONPATH when
the interpreter under test is 3.12 or newer, and on nothing else.
"""

import importlib.machinery
import importlib.util
import ssl
import sys
import types
import unittest

if sys.version_info >= (3, 12) and not hasattr(ssl, "wrap_socket"):

    def wrap_socket(sock, keyfile=None, certfile=None, server_side=False,
                    cert_reqs=ssl.CERT_NONE, ssl_version=ssl.PROTOCOL_TLS, ca_certs=None,
                    do_handshake_on_connect=True, suppress_ragged_eofs=True,
                    ciphers=None):
        """``ssl.wrap_socket`` as Python 3.11 defined it (deprecated there)."""
        if server_side and not certfile:
            raise ValueError("certfile must be specified for server-side operations")
        if keyfile and not certfile:
            raise ValueError("certfile must be specified")
        context = ssl.SSLContext(ssl_version)
        context.verify_mode = cert_reqs
        if ca_certs:
            context.load_verify_locations(ca_certs)
        if certfile:
            context.load_cert_chain(certfile, keyfile)
        if ciphers:
            context.set_ciphers(ciphers)
        return context.wrap_socket(sock=sock, server_side=server_side,
                                   do_handshake_on_connect=do_handshake_on_connect,
                                   suppress_ragged_eofs=suppress_ragged_eofs)

    ssl.wrap_socket = wrap_socket

if sys.version_info >= (3, 12) and "imp" not in sys.modules:
    try:
        import imp  # noqa: F401  (an installed backport wins)
    except ImportError:
        _imp = types.ModuleType("imp", "the part of Python 3.11's imp the suites import")
        _imp.PY_SOURCE = 1

        def load_module(name, file, pathname, description):
            """``imp.load_module`` for a Python source file (PY_SOURCE)."""
            loader = importlib.machinery.SourceFileLoader(name, pathname)
            spec = importlib.util.spec_from_file_location(name, pathname, loader=loader)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            loader.exec_module(module)
            return module

        _imp.load_module = load_module
        sys.modules["imp"] = _imp

if sys.version_info >= (3, 12):
    for _alias, _name in (("assertEquals", "assertEqual"),
                          ("assertNotEquals", "assertNotEqual"),
                          ("assertAlmostEquals", "assertAlmostEqual"),
                          ("assertNotAlmostEquals", "assertNotAlmostEqual"),
                          ("assert_", "assertTrue"), ("failUnless", "assertTrue"),
                          ("failIf", "assertFalse"), ("failUnlessEqual", "assertEqual"),
                          ("failIfEqual", "assertNotEqual"),
                          ("failUnlessAlmostEqual", "assertAlmostEqual"),
                          ("failIfAlmostEqual", "assertNotAlmostEqual"),
                          ("failUnlessRaises", "assertRaises"),
                          ("assertRegexpMatches", "assertRegex"),
                          ("assertNotRegexpMatches", "assertNotRegex"),
                          ("assertRaisesRegexp", "assertRaisesRegex")):
        if not hasattr(unittest.TestCase, _alias):
            setattr(unittest.TestCase, _alias, getattr(unittest.TestCase, _name))
