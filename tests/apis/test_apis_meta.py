"""ObjectMeta, conditions, label selectors, tolerations, DNS-1123 names and validation causes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import ValidationError

from controlplane.apis.meta import (
    CauseType,
    Condition,
    LabelSelector,
    ObjectMeta,
    Taint,
    Toleration,
    get_condition,
    is_condition_true,
    repeated,
    set_condition,
    taints_tolerated,
    validate_dns1123_label,
    validate_dns1123_subdomain,
    validation_causes,
)
from controlplane.apis.timestamps import format_micro_time, format_time, parse_time, parse_time_or_none

T0 = datetime(2024, 5, 1, 10, 0, 0, tzinfo=UTC)
T1 = datetime(2024, 5, 1, 11, 30, 0, tzinfo=UTC)


def test_object_meta_round_trips_and_keeps_unknown_fields() -> None:
    wire = {
        "name": "train",
        "namespace": "ml",
        "uid": "0c7e",
        "resourceVersion": "42",
        "generation": 3,
        "creationTimestamp": "2024-05-01T10:00:00Z",
        "labels": {"app": "train"},
        "annotations": {"a": "b"},
        "finalizers": ["gpufed.io/propagation"],
        "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "o", "uid": "u", "controller": True}],
        "managedFields": [{"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:spec": {}}}],
        "selfLink": "/legacy",
    }
    meta = ObjectMeta.model_validate(wire)
    assert meta.resource_version == "42"
    assert meta.model_dump(by_alias=True, exclude_none=True) == wire


def test_object_meta_rejects_bad_timestamp() -> None:
    with pytest.raises(ValidationError) as info:
        ObjectMeta.model_validate({"creationTimestamp": "yesterday"})
    causes = validation_causes(info.value, prefix="metadata")
    assert causes[0].field == "metadata.creationTimestamp"
    assert "RFC 3339" in causes[0].message


def test_time_helpers() -> None:
    assert format_time(T0) == "2024-05-01T10:00:00Z"
    assert parse_time("2024-05-01T10:00:00Z") == T0
    assert format_time(datetime(2024, 5, 1, 10, 0, 0)) == "2024-05-01T10:00:00Z"
    # Go writes the year in 4 digits (strftime's %Y wrote year 1 as "1-01-01T..."), and what it
    # writes parses back
    first = datetime(1, 1, 1, tzinfo=UTC)
    assert format_time(first) == "0001-01-01T00:00:00Z" and parse_time(format_time(first)) == first
    assert format_micro_time(first) == "0001-01-01T00:00:00.000000Z"
    assert format_time(datetime.fromisoformat("2024-05-01T12:00:00.5+02:00")) == "2024-05-01T10:00:00Z"


# --- conditions --------------------------------------------------------------------------------


def _ready(status: str, reason: str = "R", time: str | None = None) -> Condition:
    return Condition(type="Ready", status=status, reason=reason, last_transition_time=time)


@pytest.mark.parametrize(
    ("existing", "new", "expected_time", "expected_reason"),
    [
        pytest.param([], _ready("True"), "2024-05-01T11:30:00Z", "R", id="new condition gets now"),
        pytest.param(
            [_ready("True", "Old", "2024-05-01T10:00:00Z")],
            _ready("True", "New"),
            "2024-05-01T10:00:00Z",
            "New",
            id="same status keeps transition time, updates reason",
        ),
        pytest.param(
            [_ready("True", "Old", "2024-05-01T10:00:00Z")],
            _ready("False", "Down"),
            "2024-05-01T11:30:00Z",
            "Down",
            id="status change moves transition time",
        ),
    ],
)
def test_set_condition(existing: list[Condition], new: Condition, expected_time: str, expected_reason: str) -> None:
    result = set_condition(existing, new, now=T1)
    ready = get_condition(result, "Ready")
    assert ready is not None
    assert ready.last_transition_time == expected_time
    assert ready.reason == expected_reason
    assert len(result) == 1


def test_set_condition_keeps_other_types_and_order() -> None:
    other = Condition(type="Applied", status="True")
    result = set_condition([other, _ready("False")], _ready("True"), now=T1)
    assert [c.type for c in result] == ["Applied", "Ready"]
    assert is_condition_true(result, "Ready")
    assert not is_condition_true(result, "Missing")


def test_condition_status_is_checked() -> None:
    with pytest.raises(ValidationError):
        Condition.model_validate({"type": "Ready", "status": "yes"})


# --- label selectors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ({}, {"a": "1"}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "1", "b": "2"}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "2"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]}, {"a": "2"}, True),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]}]}, {}, False),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {}, True),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {"a": "1"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": ""}, True),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"b": "1"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"b": "1"}, True),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"a": "1"}, False),
        (
            {"matchLabels": {"x": "y"}, "matchExpressions": [{"key": "a", "operator": "Exists"}]},
            {"a": "1"},
            False,
        ),
    ],
)
def test_label_selector_matches(selector: dict[str, Any], labels: dict[str, str], expected: bool) -> None:
    assert LabelSelector.model_validate(selector).matches(labels) is expected


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ({"key": "a", "operator": "In"}, "must be specified when `operator` is 'In'"),
        ({"key": "a", "operator": "Exists", "values": ["x"]}, "may not be specified"),
        ({"key": "a", "operator": "Near", "values": ["x"]}, "Input should be"),
    ],
)
def test_label_selector_validation(expression: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as info:
        LabelSelector.model_validate({"matchExpressions": [expression]})
    causes = validation_causes(info.value)
    assert causes[0].field.startswith("matchExpressions[0].")
    assert message in causes[0].message


# --- taints and tolerations --------------------------------------------------------------------

TAINT = Taint(key="gpu", value="a100", effect="NoSchedule")


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        ({"key": "gpu", "operator": "Equal", "value": "a100"}, TAINT, True),
        ({"key": "gpu", "value": "a100"}, TAINT, True),
        ({"key": "gpu", "value": "h100"}, TAINT, False),
        ({"key": "gpu", "operator": "Exists"}, TAINT, True),
        ({"key": "other", "operator": "Exists"}, TAINT, False),
        ({"operator": "Exists"}, TAINT, True),
        ({"key": "gpu", "operator": "Exists", "effect": "NoExecute"}, TAINT, False),
        ({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}, TAINT, True),
        ({"key": "k", "operator": "Equal"}, Taint(key="k", effect="NoExecute"), True),
    ],
)
def test_toleration_tolerates(toleration: dict[str, Any], taint: Taint, expected: bool) -> None:
    assert Toleration.model_validate(toleration).tolerates(taint) is expected


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        # Karmada accepts both (kube's pod-toleration rules are not applied to cluster tolerations).
        ({"key": "", "operator": "Equal", "value": "x"}, Taint(key="any", value="x", effect="NoSchedule"), True),
        ({"operator": "Equal", "value": "x"}, Taint(key="any", value="y", effect="NoSchedule"), False),
        ({"key": "k", "operator": "Exists", "value": "x"}, Taint(key="k", value="y", effect="NoSchedule"), True),
    ],
)
def test_toleration_accepted_as_karmada_accepts_it(toleration: dict[str, Any], taint: Taint, expected: bool) -> None:
    assert Toleration.model_validate(toleration).tolerates(taint) is expected


def test_taints_tolerated_ignores_prefer_no_schedule_by_default() -> None:
    taints = [Taint(key="soft", effect="PreferNoSchedule"), TAINT]
    ok, first = taints_tolerated(taints, [])
    assert (ok, first) == (False, TAINT)
    ok, first = taints_tolerated(taints, [Toleration(key="gpu", operator="Exists")])
    assert (ok, first) == (True, None)


# --- names -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "valid"),
    [("member-1", True), ("a", True), ("1abc", True), ("Member", False), ("-a", False), ("a-", False),
     ("a.b", False), ("a" * 63, True), ("a" * 64, False)],
)
def test_dns1123_label(name: str, valid: bool) -> None:
    errors = validate_dns1123_label(name)
    assert (not errors) is valid
    if not valid and len(name) <= 63:
        assert errors[0].startswith("a lowercase RFC 1123 label must consist of lower case alphanumeric characters")


@pytest.mark.parametrize(
    ("name", "valid"),
    [("example.com", True), ("a-b.c", True), ("A.b", False), ("a..b", False), ("a_b", False),
     ("a" * 253, True), ("a" * 254, False)],
)
def test_dns1123_subdomain(name: str, valid: bool) -> None:
    errors = validate_dns1123_subdomain(name)
    assert (not errors) is valid
    if len(name) > 253:
        assert errors[0] == "must be no more than 253 characters"


def test_validation_causes_reasons() -> None:
    with pytest.raises(ValidationError) as info:
        Toleration.model_validate({"key": "k", "effect": "Sometimes", "colour": "red", "tolerationSeconds": "x"})
    by_field = {c.field: c for c in validation_causes(info.value, prefix="spec")}
    assert by_field["spec.colour"].reason == CauseType.FIELD_VALUE_UNKNOWN
    assert by_field["spec.colour"].type == "extra_forbidden"
    assert by_field["spec.effect"].reason == CauseType.FIELD_VALUE_NOT_SUPPORTED
    assert by_field["spec.tolerationSeconds"].reason == CauseType.FIELD_VALUE_TYPE_INVALID
    assert by_field["spec.effect"].as_status_cause()["field"] == "spec.effect"


@pytest.mark.parametrize(
    ("names", "twice"),
    [([], None), (["a", "b", "c"], None), (["a", "b", "a"], "a"), (["x", "y", "y", "x"], "y")],
)
def test_repeated_names_the_first_name_seen_twice(names: list[str], twice: str | None) -> None:
    assert repeated(iter(names)) == twice


@pytest.mark.parametrize("value", [None, "", 0, 5, True, ["2024-05-01T10:00:00Z"], "yesterday", "2024-05-01T10:00:00"])
def test_parse_time_or_none_gives_none_for_what_it_cannot_use(value: Any) -> None:
    """Absent, not a string, not RFC 3339, or without a time zone: nothing to go on."""
    assert parse_time_or_none(value) is None


def test_parse_time_or_none_reads_a_timestamp() -> None:
    assert parse_time_or_none("2024-05-01T10:00:00Z") == T0
    assert parse_time_or_none("2024-05-01T12:00:00+02:00") == T0


def test_parse_time_or_none_can_read_a_timestamp_without_a_zone_as_utc() -> None:
    """The table columns' lenient reading: no zone is UTC, what is not a timestamp still None."""
    assert parse_time_or_none("2024-05-01T10:00:00", naive_as_utc=True) == T0
    assert parse_time_or_none("2024-05-01T12:00:00+02:00", naive_as_utc=True) == T0
    assert parse_time_or_none("yesterday", naive_as_utc=True) is None


def test_format_micro_time_is_kubes_micro_time_in_utc() -> None:
    moment = datetime(2024, 5, 1, 12, 0, 0, 1500, tzinfo=timezone(timedelta(hours=2)))
    assert format_micro_time(moment) == "2024-05-01T10:00:00.001500Z"
    assert format_micro_time(datetime(2024, 5, 1, 10, 0)) == "2024-05-01T10:00:00.000000Z"  # no zone: UTC
