"""The classic ``qmf`` package name, provided by qmf-async (see ``qmf.console``)."""
