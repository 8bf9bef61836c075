"""qmf_async.tools."""
