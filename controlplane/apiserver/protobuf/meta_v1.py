"""Field tables of ``k8s.io/apimachinery/pkg/apis/meta/v1`` (generated.proto) that objects embed.

ObjectMeta, OwnerReference, LabelSelector and LabelSelectorRequirement; ``Time``,
``Quantity`` and ``IntOrString`` are field types of their own
(:class:`~controlplane.apiserver.protobuf.schema.FieldType`).
"""

from __future__ import annotations

from controlplane.apiserver.protobuf.schema import (
    Message,
    boolean,
    int64,
    nested,
    string,
    string_map,
    time,
    unsupported,
)

OWNER_REFERENCE = Message(
    "OwnerReference",
    {
        5: string("apiVersion"),
        1: string("kind"),
        3: string("name"),
        4: string("uid"),
        6: boolean("controller", pointer=True),
        7: boolean("blockOwnerDeletion", pointer=True),
    },
)

OBJECT_META = Message(
    "ObjectMeta",
    {
        1: string("name"),
        2: string("generateName"),
        3: string("namespace"),
        4: string("selfLink"),
        5: string("uid"),
        6: string("resourceVersion"),
        7: int64("generation"),
        8: time("creationTimestamp"),
        9: time("deletionTimestamp", pointer=True),
        10: int64("deletionGracePeriodSeconds", pointer=True),
        11: string_map("labels"),
        12: string_map("annotations"),
        13: nested("ownerReferences", OWNER_REFERENCE, repeated=True),
        14: string("finalizers", repeated=True),
        # Removed from the API; clients of that era always wrote it, empty.
        15: unsupported("clusterName"),
        16: unsupported("initializers", pointer=True),
        17: unsupported("managedFields", repeated=True),
    },
)

LABEL_SELECTOR_REQUIREMENT = Message(
    "LabelSelectorRequirement",
    {1: string("key"), 2: string("operator"), 3: string("values", repeated=True)},
)

LABEL_SELECTOR = Message(
    "LabelSelector",
    {1: string_map("matchLabels"), 2: nested("matchExpressions", LABEL_SELECTOR_REQUIREMENT, repeated=True)},
)
