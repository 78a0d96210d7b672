"""The host: its inventory and fingerprint, the knobs that change system settings, the
journal that restores them, and the binding of NVMe devices to user-space drivers.

Responsible for: reading and, through journaled knobs only, changing the machine.
Not responsible for: deciding what a run needs (``iolab.experiments``, ``iolab.core``).
"""
