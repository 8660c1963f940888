"""Kubernetes' own API rules for its built-in kinds, as pure functions.

As in k8s.io/kubernetes ``pkg/apis/<group>/v1/defaults.go`` and ``pkg/apis/<group>/validation``:

- :mod:`.defaulting`: per kind, a function that fills the fields kube-apiserver defaults
  (in place) before an object is validated and stored;
- :mod:`.validation`: per kind, a function that returns kube's field errors
  (:class:`.field.FieldError`) for a new object (and the stored one, on update).

The API server looks both up by group and kind (``for_kind``) when it builds its
registry; a kind with neither is stored as written. Pure: no I/O, no other layer.
"""
