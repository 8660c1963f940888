"""The training operator's validating webhooks for its kubeflow.org/v1 jobs: a create or update of a
PyTorchJob, TFJob, XGBoostJob, PaddleJob or JAXJob the operator would refuse is refused with its
field errors, as controller-runtime answers an aggregate error (``admission.Denied``: 403 Forbidden)
and kube-apiserver a webhook's denial; the job is stored as written (the operator defaults in
memory, with no mutating webhook); MPIJob has no such webhook."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from controlplane.apis.kubeflow import TRAINING_KINDS

DNS_1035 = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
            "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
            "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")

# kind -> (its container, the roles of a valid job)
KINDS = {
    "PyTorchJob": ("pytorch", ("Master", "Worker")),
    "TFJob": ("tensorflow", ("Chief", "Worker")),
    "XGBoostJob": ("xgboost", ("Master", "Worker")),
    "PaddleJob": ("paddle", ("Master", "Worker")),
    "JAXJob": ("jax", ("Worker",)),
}


def pod(container: str, image: str = "train:1") -> dict[str, Any]:
    return {"spec": {"containers": [{"name": container, "image": image}]}}


def job(kind: str, name: str = "train", **roles: dict[str, Any]) -> dict[str, Any]:
    training = TRAINING_KINDS[kind]
    return {"apiVersion": "kubeflow.org/v1", "kind": kind, "metadata": {"name": name, "namespace": "default"},
            "spec": {training.specs_field: roles}}


def valid(kind: str, name: str = "train") -> dict[str, Any]:
    container, roles = KINDS[kind]
    return job(kind, name, **{role: {"replicas": 1, "template": pod(container)} for role in roles})


def collection(kind: str) -> str:
    return f"/apis/kubeflow.org/v1/namespaces/default/{TRAINING_KINDS[kind].plural}"


def denied(kind: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "code": 403,
            "reason": "Forbidden",
            "message": f'admission webhook "validator.{kind.lower()}.training-operator.kubeflow.org" '
                       f"denied the request: {message}"}


@pytest.mark.parametrize("kind", list(KINDS))
async def test_a_valid_job_is_stored_as_written(api: TestClient[Any, Any], kind: str) -> None:
    created = await api.post(collection(kind), json=valid(kind))
    assert created.status == 201, await created.text()
    spec = (await created.json())["spec"]
    assert spec == valid(kind)["spec"]  # no replicas, restartPolicy, port or runPolicy added


@pytest.mark.parametrize("kind", list(KINDS))
async def test_the_kinds_container_name_is_required(api: TestClient[Any, Any], kind: str) -> None:
    container, roles = KINDS[kind]
    obj = valid(kind)
    role = roles[-1]
    obj["spec"][TRAINING_KINDS[kind].specs_field][role]["template"] = pod("main")
    refused = await api.post(collection(kind), json=obj)
    assert refused.status == 403
    path = f"spec.{TRAINING_KINDS[kind].specs_field}[{role}].template.spec.containers"
    assert await refused.json() == denied(
        kind, f"{path}: Required value: must have at least one container with name {container}")
    assert (await api.get(f"{collection(kind)}/train")).status == 404


@pytest.mark.parametrize("kind", list(KINDS))
async def test_the_name_must_be_a_dns_1035_label(api: TestClient[Any, Any], kind: str) -> None:
    refused = await api.post(collection(kind), json=valid(kind, name="1train"))
    assert refused.status == 403
    assert await refused.json() == denied(kind, f'metadata.name: Invalid value: "1train": should match: {DNS_1035}')


async def test_every_error_is_given_in_the_webhooks_order(api: TestClient[Any, Any]) -> None:
    obj = job("PyTorchJob", Master={"replicas": 2, "template": {"spec": {"containers": [{"name": "pytorch"}]}}},
              Chief={"replicas": 1})
    obj["spec"]["elasticPolicy"] = {"nProcPerNode": 2}
    obj["spec"]["nprocPerNode"] = "2"
    refused = await api.post(collection("PyTorchJob"), json=obj)
    assert refused.status == 403
    specs = "spec.pytorchReplicaSpecs"
    assert await refused.json() == denied("PyTorchJob", "[" + ", ".join([
        f"{specs}[Worker]: Required value: must be configured if elastic policy is used",
        "spec.elasticPolicy.nProcPerNode: Forbidden: must not be used with spec.nprocPerNode",
        f"{specs}[Master].template.spec.containers[0].image: Required value: must be required",
        f'{specs}[Chief]: Unsupported value: "Chief": supported values: "Master", "Worker"',
        f"{specs}[Chief].template.spec.containers: Required value: must be specified",
        f"{specs}[Chief].template.spec.containers: Required value: must have at least one container with name pytorch",
        f"{specs}[Master].replicas: Forbidden: must be 1",
    ]) + "]")


@pytest.mark.parametrize(("kind", "roles", "message"), [
    # The operator checks the job as written: a Master without replicas is not 1 yet.
    ("PyTorchJob", ("Master",), "spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1"),
    ("XGBoostJob", ("Worker",), "spec.xgbReplicaSpecs[Master]: Required value: must be present"),
    ("TFJob", ("Chief", "Master"), "spec.tfReplicaSpecs: Forbidden: must not have more than 1 Chief or Master role"),
    ("JAXJob", ("Master",), 'spec.jaxReplicaSpecs[Master]: Unsupported value: "Master": supported values: "Worker"'),
    ("PaddleJob", ("PS",), 'spec.paddleReplicaSpecs[PS]: Unsupported value: "PS": supported values: "Master", "Worker"'),
])
async def test_each_kinds_own_roles_rules(
    api: TestClient[Any, Any], kind: str, roles: tuple[str, ...], message: str
) -> None:
    container = KINDS[kind][0]
    refused = await api.post(collection(kind), json=job(kind, **{role: {"template": pod(container)} for role in roles}))
    assert refused.status == 403
    assert await refused.json() == denied(kind, message)


async def test_replica_specs_are_required(api: TestClient[Any, Any]) -> None:
    """The CRD requires them, and its schema is checked before the webhook is called: the answer is
    the schema's 422, not the webhook's ``Required value: must be required``, as on a cluster."""
    obj = job("PaddleJob")
    del obj["spec"]["paddleReplicaSpecs"]
    refused = await api.post(collection("PaddleJob"), json=obj)
    body = await refused.json()
    assert (refused.status, body["reason"], body["message"]) == (
        422, "Invalid", 'PaddleJob.kubeflow.org "train" is invalid: spec.paddleReplicaSpecs: Required value')


async def test_an_update_is_checked_too(api: TestClient[Any, Any]) -> None:
    created = await api.post(collection("TFJob"), json=valid("TFJob"))
    assert created.status == 201
    obj = await created.json()
    obj["spec"]["tfReplicaSpecs"]["Master"] = {"template": pod("tensorflow")}
    refused = await api.put(f"{collection('TFJob')}/train", json=obj)
    assert refused.status == 403
    assert await refused.json() == denied("TFJob", "spec.tfReplicaSpecs: Forbidden: must not have more than 1 Chief or Master role")
    patched = await api.patch(f"{collection('TFJob')}/train", json={"spec": {"tfReplicaSpecs": {"Worker": {"replicas": 4}}}},
                              headers={"Content-Type": "application/merge-patch+json"})
    assert patched.status == 200
    assert (await patched.json())["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] == 4


async def test_an_mpijob_has_no_webhook(api: TestClient[Any, Any]) -> None:
    obj = job("MPIJob", "1launch", Launcher={"template": pod("launcher")})
    assert (await api.post(collection("MPIJob"), json=obj)).status == 201


@pytest.mark.parametrize(("kind", "checked"), [("PyTorchJob", True), ("TFJob", True), ("PaddleJob", True),
                                               ("XGBoostJob", False), ("JAXJob", False)])
async def test_managed_by_names_a_controller_the_operator_knows(
    api: TestClient[Any, Any], kind: str, checked: bool
) -> None:
    obj = valid(kind)
    obj["spec"]["runPolicy"] = {"managedBy": "example.com/mine"}
    answer = await api.post(collection(kind), json=obj)
    if not checked:
        assert answer.status == 201
        return
    assert answer.status == 403
    assert await answer.json() == denied(kind, 'spec.runPolicy.managedBy: Unsupported value: "example.com/mine": '
                                               'supported values: "kueue.x-k8s.io/multikueue", "kubeflow.org/training-operator"')
    obj["spec"]["runPolicy"] = {"managedBy": "kueue.x-k8s.io/multikueue"}
    assert (await api.post(collection(kind), json=obj)).status == 201


async def test_the_elastic_nproc_per_node_is_a_deprecation_warning(api: TestClient[Any, Any]) -> None:
    obj = valid("PyTorchJob")
    obj["spec"]["elasticPolicy"] = {"nProcPerNode": 2}
    created = await api.post(collection("PyTorchJob"), json=obj)
    assert created.status == 201
    assert created.headers.getall("Warning") == [
        '299 - "spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode instead"']


@pytest.mark.parametrize(("kind", "checked"), [("PaddleJob", True), ("JAXJob", False)])
async def test_an_update_keeps_managed_by(api: TestClient[Any, Any], kind: str, checked: bool) -> None:
    created = await api.post(collection(kind), json=valid(kind))
    assert created.status == 201
    obj = await created.json()
    obj["spec"]["runPolicy"] = {"managedBy": "kueue.x-k8s.io/multikueue"}
    obj["metadata"]["name"] = "train"
    answer = await api.put(f"{collection(kind)}/train", json=obj)
    if not checked:  # the JAXJob and XGBoostJob webhooks check no runPolicy
        assert answer.status == 200
        return
    assert answer.status == 403
    assert await answer.json() == denied(
        kind, 'spec.runPolicy.managedBy: Invalid value: "kueue.x-k8s.io/multikueue": field is immutable')
    # The errors of an update come as one list, the immutable field first.
    obj["spec"]["paddleReplicaSpecs"]["Worker"]["template"] = pod("main")
    answer = await api.put(f"{collection(kind)}/train", json=obj)
    assert (await answer.json())["message"].endswith(
        'denied the request: [spec.runPolicy.managedBy: Invalid value: "kueue.x-k8s.io/multikueue": field is immutable, '
        "spec.paddleReplicaSpecs[Worker].template.spec.containers: Required value: must have at least one container "
        "with name paddle]")
