"""Importers of results made elsewhere: AiSIO's CIJOE archives, re-derived from their raw
tool output into this package's store.

Responsible for: reading foreign archives and the tidy rows of the campaigns they become.
Not responsible for: the tools' output formats (``iolab.parsers``, ``iolab.tools``).
"""
