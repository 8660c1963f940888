"""Karmada's ResourceInterpreterCustomization YAML applies unchanged with the real kubectl:
the shipped examples are created and listed (short name ``ric``), and a script that does not
compile is refused with the field and the Lua error."""

from __future__ import annotations

from pathlib import Path

import pytest

from controlplane.apiserver.kinds.core import core_resources
from controlplane.apiserver.kinds.karmada_config import interpreter_customization_resources
from controlplane.apiserver.resources import Registry

from .test_real_clients import kubeconfig, kubectl, needs_kubectl, server_url  # noqa: F401 (fixtures)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "interpreter-customizations"


@pytest.fixture
def api_registry() -> Registry:
    """The ``objects``, ``server_url`` and ``kubeconfig`` fixtures serve the customization kind."""
    return Registry(core_resources(), interpreter_customization_resources())


@needs_kubectl
async def test_kubectl_applies_karmada_customizations(kubeconfig: Path, tmp_path: Path) -> None:  # noqa: F811
    code, out, err = await kubectl(kubeconfig, "apply", "-f", str(EXAMPLES))
    assert code == 0, err
    assert sorted(out.splitlines()) == [
        "resourceinterpretercustomization.config.karmada.io/kubeflow-trainjob created",
        "resourceinterpretercustomization.config.karmada.io/volcano-job created",
    ]
    code, out, err = await kubectl(kubeconfig, "get", "ric")
    assert code == 0, err
    header, *rows = out.splitlines()
    assert header.split() == ["NAME", "TARGET-API-VERSION", "TARGET-KIND", "AGE"]
    assert [row.split()[:3] for row in rows] == [
        ["kubeflow-trainjob", "trainer.kubeflow.org/v1alpha1", "TrainJob"],
        ["volcano-job", "batch.volcano.sh/v1alpha1", "Job"],
    ]
    code, out, err = await kubectl(kubeconfig, "apply", "-f", str(EXAMPLES))
    assert code == 0 and "unchanged" in out, err

    broken = tmp_path / "broken.yaml"
    broken.write_text(
        "apiVersion: config.karmada.io/v1alpha1\n"
        "kind: ResourceInterpreterCustomization\n"
        "metadata: {name: broken}\n"
        "spec:\n"
        "  target: {apiVersion: example.com/v1, kind: Widget}\n"
        "  customizations:\n"
        "    replicaResource:\n"
        "      luaScript: |\n"
        "        function GetReplicas(obj)\n"
        "          return obj.spec.replicas +\n"
        "        end\n"
    )
    code, out, err = await kubectl(kubeconfig, "apply", "-f", str(broken))
    assert code != 0
    assert (
        'Error from server (Forbidden): error when creating "' + str(broken) + '": admission webhook '
        '"resourceinterpretercustomization.karmada.io" denied the request: InterpreterOperation(InterpretReplica) '
        "Lua script error: the script does not compile: "
    ) in err, err


#: Karmada's examples/customresourceinterpreter/webhook-configuration.yaml, its placeholders filled.
KARMADA_WEBHOOK_CONFIGURATION = """---
apiVersion: config.karmada.io/v1alpha1
kind: ResourceInterpreterWebhookConfiguration
metadata:
  name: examples
webhooks:
  - name: workloads.example.com
    rules:
      - operations: [ "InterpretReplica","ReviseReplica","Retain","AggregateStatus", "InterpretHealth", "InterpretStatus" ]
        apiGroups: [ "workload.example.io" ]
        apiVersions: [ "v1alpha1" ]
        kinds: [ "Workload" ]
    clientConfig:
      url: https://10.0.0.7:443/interpreter-workload
      caBundle: Cg==
    interpreterContextVersions: [ "v1alpha1" ]
    timeoutSeconds: 3
"""


@needs_kubectl
async def test_kubectl_applies_karmada_webhook_configuration(kubeconfig: Path, tmp_path: Path) -> None:  # noqa: F811
    sample = tmp_path / "webhook-configuration.yaml"
    sample.write_text(KARMADA_WEBHOOK_CONFIGURATION)
    code, out, err = await kubectl(kubeconfig, "apply", "-f", str(sample))
    assert code == 0, err
    assert out.strip() == "resourceinterpreterwebhookconfiguration.config.karmada.io/examples created"
    code, out, err = await kubectl(kubeconfig, "get", "resourceinterpreterwebhookconfigurations")
    assert code == 0, err
    assert [row.split()[0] for row in out.splitlines()] == ["NAME", "examples"]

    sample.write_text(KARMADA_WEBHOOK_CONFIGURATION.replace("timeoutSeconds: 3", "timeoutSeconds: 60"))
    code, out, err = await kubectl(kubeconfig, "apply", "-f", str(sample))
    assert code != 0
    assert 'The ResourceInterpreterWebhookConfiguration "examples" is invalid' in err
    assert "webhooks[0].timeoutSeconds: Invalid value: 60: the timeout value must be between 1 and 30 seconds" in err
