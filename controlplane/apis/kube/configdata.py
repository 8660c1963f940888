"""What kube's decoding and conversion do to a Secret's and a ConfigMap's data on every write.

kube holds ``data`` (Secret) and ``binaryData`` (ConfigMap) as bytes: what it stores and serves
is the value decoded and encoded again, so a value written with line breaks (as ``base64``
wraps it) or with stray bits after its last byte reads back as plain padded base64. A Secret's
``stringData`` is merged into ``data`` (its values win) and never stored; its ``type``
defaults to ``Opaque``.

Pure: the object is changed in place. A value Go cannot decode, or ``stringData`` that is not a
map of strings, is left as written, for the decoder's 400 (``illegal base64 data at input byte 4``).
"""

from __future__ import annotations

import base64
import contextlib
from typing import Any

from controlplane.apis.kube.gobase64 import CorruptInput, std_decode


def _reencoded(values: Any) -> None:
    if not isinstance(values, dict):
        return
    for key, value in values.items():
        if isinstance(value, str):
            with contextlib.suppress(CorruptInput):  # left for the decoder, which refuses it
                values[key] = base64.b64encode(std_decode(value)).decode()


def prepare_secret(obj: dict[str, Any]) -> None:
    """Default ``type`` to Opaque, store ``data`` as kube encodes it, fold ``stringData`` into it."""
    if not obj.get("type"):
        obj["type"] = "Opaque"
    _reencoded(obj.get("data"))
    string_data = obj.get("stringData")
    if string_data is not None and not (
        isinstance(string_data, dict) and all(v is None or isinstance(v, str) for v in string_data.values())
    ):
        return  # left for the decoder, which refuses it (400) before anything is merged, as kube's does
    obj.pop("stringData", None)
    if string_data:
        if obj.get("data") is None:
            obj["data"] = {}
        data = obj["data"]
        if isinstance(data, dict):
            for key, value in string_data.items():
                data[key] = base64.b64encode((value or "").encode()).decode()


def prepare_config_map(obj: dict[str, Any]) -> None:
    """Store ``binaryData`` as kube encodes it."""
    _reencoded(obj.get("binaryData"))
