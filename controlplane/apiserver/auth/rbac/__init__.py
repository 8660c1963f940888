"""Kubernetes RBAC on the hub: the four kinds, the authorizer, escalation checks, reviews.

Pure: :mod:`.rules` (rule matching and coverage), :mod:`.index` (roles and bindings by
subject), :mod:`.authorizing` (the authorizer chain), :mod:`.escalation` (the admission
check), :mod:`.kinds` (the served kinds, their validation and tables) and :mod:`.policy`
(the default roles). With I/O: :mod:`.cache` (informers feeding the index, the default
policy written on start) and :mod:`.reviews` (the access-review endpoints).
"""
