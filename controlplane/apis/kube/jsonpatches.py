"""A JSON patch (RFC 6902) applied with the bound kube-apiserver sets on every one it applies.

kube-apiserver sets its JSON patch library's ``AccumulatedCopySizeLimit`` process-wide to its
``JSONPatchMaxCopyBytes`` (3 MiB): the JSON size of what the ``copy`` operations of one patch add,
summed over the patch. Every JSON patch it applies with that library counts against it: a
client's (a PATCH request, 422 past it) and the one a mutating admission webhook answers with (its
dispatcher's 500 ``Internal error occurred: Unable to complete the copy, ...``). Without it a patch
of a few dozen copies, each of the document into itself, doubles the object each time: gigabytes
from a response of a few kilobytes.

In: a document and a JSON patch (parsed). Out: the patched document, or :class:`CopiedTooMuch`
(or the ``jsonpatch`` library's own errors for an operation that does not apply). Pure: no I/O.
"""

from __future__ import annotations

import copy
from typing import Any, Final

import jsonpatch
import jsonpointer

from controlplane.gojson import go_json

#: kube's ``JSONPatchMaxCopyBytes`` (3 MiB, as the request body limit): the most the ``copy``
#: operations of one JSON patch may add, in bytes of JSON.
MAX_JSON_PATCH_COPY_BYTES: Final = 3 * 1024 * 1024


class CopiedTooMuch(ValueError):
    """The ``copy`` operations of a JSON patch added more than :data:`MAX_JSON_PATCH_COPY_BYTES`;
    its text is the JSON patch library's (evanphx/json-patch)."""


def json_patched(doc: Any, patch: list[Any]) -> Any:
    """A copy of ``doc`` with the RFC 6902 ``patch`` applied, one operation at a time, counting
    what each ``copy`` adds as kube's JSON patch library does (the copied value's JSON size,
    once its source and its target's parent resolve): past :data:`MAX_JSON_PATCH_COPY_BYTES`
    it stops with that library's error, before the copy is made."""
    doc = copy.deepcopy(doc)
    copied = 0
    for op in patch:
        if isinstance(op, dict) and op.get("op") == "copy" and isinstance(source := op.get("from"), str):
            target = op.get("path")
            if (resolves(doc, source) and isinstance(target, str)
                    and (target == "" or resolves(doc, target.rpartition("/")[0]))):
                copied += len(go_json(jsonpointer.resolve_pointer(doc, source)).encode())
                if copied > MAX_JSON_PATCH_COPY_BYTES:
                    raise CopiedTooMuch(
                        f"Unable to complete the copy, the accumulated size increase of copy is {copied}, "
                        f"exceeding the limit {MAX_JSON_PATCH_COPY_BYTES}")
        doc = jsonpatch.apply_patch(doc, [op], in_place=True)
    return doc


def resolves(doc: Any, pointer: str) -> bool:
    """Whether the JSON pointer ``pointer`` names a value in ``doc``."""
    try:
        jsonpointer.resolve_pointer(doc, pointer)
    except (jsonpointer.JsonPointerException, TypeError):
        return False
    return True
