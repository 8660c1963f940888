"""Field tables: how a Kubernetes protobuf message maps onto its JSON form.

Each :class:`Message` lists, by field number, what the field is called in JSON and how
to read it. The numbers come from the ``generated.proto`` files of ``k8s.io/api`` and
``k8s.io/apimachinery``; the proto field names there are the JSON names. The tables
themselves are data (:mod:`~controlplane.apiserver.protobuf.tables`).

Two facts of Go's generated marshalling shape the tables:

* Fields that are *not* pointers in the Go type are always written, even when empty
  (``""``, ``0``, ``false``, an empty message). The JSON path omits them (``omitempty``),
  so the decoder drops zero values of such fields.
* Pointer fields are written only when set, so a present zero (``replicas: 0``,
  ``emptyDir: {}``) is meaningful: ``pointer=True`` keeps it.

A field the server cannot represent is listed as :data:`FieldType.UNSUPPORTED`: it may
be absent, or present with a zero value when it is not a pointer (clients always write
those); anything else makes the decoder refuse the body rather than drop data.
Pure data, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class FieldType(StrEnum):
    STRING = "string"
    INT32 = "int32"
    INT64 = "int64"
    BOOL = "bool"
    MESSAGE = "message"
    #: resource.Quantity: ``{string = 1}``, a string in JSON.
    QUANTITY = "quantity"
    #: intstr.IntOrString: ``{type = 1, intVal = 2, strVal = 3}``, a number or a string in JSON.
    INT_OR_STRING = "int-or-string"
    #: meta/v1 Time: ``{seconds = 1, nanos = 2}``, RFC 3339 (seconds) in JSON.
    TIME = "time"
    STRING_MAP = "map<string, string>"
    #: map<string, bytes>: values are base64 in JSON (Secret.data, ConfigMap.binaryData).
    BYTES_MAP = "map<string, bytes>"
    QUANTITY_MAP = "map<string, Quantity>"
    #: bytes: base64 in JSON (a CertificateSigningRequest's request and certificate).
    BYTES = "bytes"
    #: meta/v1 FieldsV1 (``{bytes Raw = 1}``, JSON text): the JSON object itself (managedFields).
    FIELDS_V1 = "FieldsV1"
    #: map<string, ExtraValue> (``{repeated string items = 1}``): lists of strings in JSON (user extra).
    EXTRA_MAP = "map<string, ExtraValue>"
    UNSUPPORTED = "unsupported"


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a message: its JSON name and how its wire value reads."""

    name: str
    type: FieldType
    message: Message | None = None
    repeated: bool = False
    #: A Go pointer (or a field written only when set): a present zero value is kept.
    pointer: bool = False
    #: Embedded with ``json:",inline"``: the nested message's keys join the parent's.
    inline: bool = False


@dataclass(frozen=True, slots=True)
class Message:
    """A protobuf message: its Go name (for messages) and its fields by number."""

    name: str
    fields: Mapping[int, Field] = field(default_factory=dict)
