"""The hub's scheduler: where a binding's replicas run.

``core/`` holds the pure decisions (snapshots, the estimator, reservations, plugins, division,
re-deciding placed bindings); ``controller/`` is their I/O side (watches, the reconcile loop,
moves, evictions, reservation bookkeeping, status and Event writes). The core imports nothing
of the controller (an import-linter contract keeps it so).
"""
