"""kube's checks of a conversion webhook's answer (``webhook_converter.go``), table-driven: the
review's kind and uid, its result, each object's apiVersion, kind and identity, and of its metadata
only labels and annotations taken (``restoreObjectMeta``)."""

from __future__ import annotations

import base64
import copy
from typing import Any

import orjson
import pytest

from controlplane.apiserver.crd.controller import desired_status
from controlplane.apiserver.crd.converting import (
    ConversionFailed,
    checked_object,
    converted_objects,
    review_request,
)
from tests.apiserver.test_crd_conversion_webhook import crd

WHAT = "stable.example.com/v1, Kind=CronTab"
SENT: dict[str, Any] = {
    "apiVersion": "stable.example.com/v1", "kind": "CronTab",
    "metadata": {"name": "a", "namespace": "default", "uid": "u-1", "resourceVersion": "7", "labels": {"team": "ml"},
                 "finalizers": ["keep"]},
    "spec": {"cronSpec": "* * * * *"},
}


def _answer(**response: Any) -> bytes:
    return orjson.dumps({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                         "response": {"uid": "r-1", "result": {"status": "Success"}, "convertedObjects": [], **response}})


def test_the_review_sent() -> None:
    assert review_request([SENT], "stable.example.com/v2", uid="r-1", version="v1beta1") == {
        "apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "ConversionReview",
        "request": {"uid": "r-1", "desiredAPIVersion": "stable.example.com/v2", "objects": [SENT]},
    }


@pytest.mark.parametrize(
    ("raw", "version", "reason"),
    [
        (b"{", "v1", "couldn't get version/kind; json parse error: "),
        (orjson.dumps({"apiVersion": "v1", "kind": "Status"}), "v1",
         "expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got v1, Kind=Status"),
        (orjson.dumps({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview"}), "v1", "no response provided"),
        (_answer(uid="other"), "v1", 'expected response.uid="r-1", got "other"'),
        (_answer(result={"status": "Failure", "message": "bad cron"}), "v1", "bad cron"),
        (_answer(result={"status": "Failure"}), "v1", "response.result.status was 'Failure', not 'Success'"),
        # v1beta1 answers are not checked for their kind and uid (kube keeps v1beta1's leniency).
        (_answer(uid="other", result={"status": "Failure"}), "v1beta1", "response.result.status was 'Failure', not 'Success'"),
    ],
)
def test_an_answer_that_is_not_a_successful_review(raw: bytes, version: str, reason: str) -> None:
    with pytest.raises(ValueError) as caught:
        converted_objects(raw, uid="r-1", version=version)
    assert str(caught.value).startswith(reason), caught.value


def test_a_successful_answer_gives_its_objects() -> None:
    assert converted_objects(_answer(convertedObjects=[SENT]), uid="r-1", version="v1") == [SENT]


def _converted(**changes: Any) -> dict[str, Any]:
    out = copy.deepcopy(SENT)
    out["apiVersion"] = "stable.example.com/v2"
    out["spec"] = {"schedule": "* * * * *"}
    for key, value in changes.items():
        if key.startswith("meta_"):
            out["metadata"][key[5:]] = value
        else:
            out[key] = value
    return out


@pytest.mark.parametrize(
    ("answer", "is_list", "message"),
    [
        (_converted(apiVersion="stable.example.com/v1"), False,
         f"conversion webhook for {WHAT} returned invalid object at index 0: invalid groupVersion "
         "(expected stable.example.com/v2, received stable.example.com/v1)"),
        (_converted(kind="Other"), True,
         f"conversion webhook for {WHAT} returned invalid converted object at index 1: invalid kind (expected CronTab, received Other)"),
        (_converted(meta_name="b"), False, f"conversion webhook for {WHAT} returned invalid object: must have the same name: a != b"),
        (_converted(meta_uid="u-2"), True,
         f"conversion webhook for {WHAT} returned invalid object at index 1: must have the same UID: u-1 != u-2"),
        (_converted(meta_labels={"Bad Key": "x"}), False,
         f"conversion webhook for {WHAT} returned invalid metadata: metadata.labels: Invalid value: \"Bad Key\": "),
        (_converted(meta_annotations={"n": 1}), False,
         f"conversion webhook for {WHAT} returned invalid metadata: metadata.annotations[n] must be a string"),
    ],
)
def test_a_converted_object_is_checked_as_kube_checks_it(answer: dict[str, Any], is_list: bool, message: str) -> None:
    with pytest.raises(ConversionFailed) as caught:
        checked_object(SENT, answer, "stable.example.com/v2", what=WHAT, index=0, is_list=is_list)
    assert caught.value.message.startswith(message), caught.value.message
    assert caught.value.to_status()["code"] == 500
    assert "reason" not in caught.value.to_status()


def test_only_labels_and_annotations_of_the_answers_metadata_are_kept() -> None:
    answer = _converted(meta_labels={"team": "ml", "converted": "yes"}, meta_annotations={"note": "v2"},
                        meta_finalizers=[], meta_resourceVersion="999")
    out = checked_object(SENT, answer, "stable.example.com/v2", what=WHAT, index=0, is_list=False)
    assert out["metadata"] == {**SENT["metadata"], "labels": {"team": "ml", "converted": "yes"}, "annotations": {"note": "v2"}}
    assert out["spec"] == {"schedule": "* * * * *"}
    # Labels the answer drops are dropped.
    out = checked_object(SENT, _converted(meta_labels=None), "stable.example.com/v2", what=WHAT, index=0, is_list=False)
    assert "labels" not in out["metadata"]


@pytest.mark.parametrize(("bundle", "established"), [
    (base64.b64encode(b"no certificate").decode(), ("False", "InvalidCABundle", "The conversion webhook CABundle is invalid")),
    (None, ("True", "InitialNamesAccepted", "the initial names have been accepted")),
])
def test_a_crd_whose_ca_bundle_holds_no_certificate_is_not_established(
    bundle: str | None, established: tuple[str, str, str]
) -> None:
    client = {"url": "https://convert.example.com/crontabs"} | ({"caBundle": bundle} if bundle else {})
    conditions = desired_status(crd(client), None)["conditions"]
    assert [(c["status"], c["reason"], c["message"]) for c in conditions if c["type"] == "Established"] == [established]
