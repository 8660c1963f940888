"""CustomResourceDefinitions on a real hub through the real kubectl: a CRD applied is served at
once (discovery, printer columns, short names, categories), its objects are pruned, defaulted
and validated by its schema (CEL included), ``kubectl scale`` works through its scale
subresource, and deleting the CRD deletes its objects."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

CRD = Path(__file__).parent / "manifests" / "crd" / "trainers.yaml"

TRAINERS = """\
apiVersion: ml.example.com/v1
kind: Trainer
metadata:
  name: llama
  namespace: default
spec:
  model: llama-3
  replicas: 2
  bogus: dropped
---
apiVersion: ml.example.com/v1
kind: Trainer
metadata:
  name: mistral
  namespace: default
spec:
  model: mistral-7b
"""


def _apply(kubectl, tmp_path: Path, name: str, text: str, *args: str, check: bool = True):
    manifest = tmp_path / name
    manifest.write_text(text)
    return kubectl.run("apply", "-f", str(manifest), *args, check=check)


def _trainer(spec: str) -> str:
    return f"apiVersion: ml.example.com/v1\nkind: Trainer\nmetadata:\n  name: bad\n  namespace: default\nspec:\n{spec}"


def test_a_crd_is_served_validated_scaled_and_deleted_with_its_objects(processes, tmp_path: Path) -> None:
    _, kubectl = processes.start_hub()
    kubectl.run("apply", "-f", str(CRD))
    kubectl.run("wait", "--for=condition=Established", "crd/trainers.ml.example.com", "--timeout=30s")

    # kubectl's default (--validate=strict) refuses the unknown field, as kube does ...
    strict = _apply(kubectl, tmp_path, "trainers.yaml", TRAINERS, check=False)
    assert strict.returncode != 0
    assert 'strict decoding error: unknown field "spec.bogus"' in strict.stderr
    # ... and with --validate=warn it is pruned with a warning.
    applied = _apply(kubectl, tmp_path, "trainers.yaml", TRAINERS, "--validate=warn")
    assert 'unknown field "spec.bogus"' in applied.stderr

    table = kubectl.run("get", "trainers", "-n", "default").stdout.splitlines()
    assert table[0].split() == ["NAME", "MODEL", "REPLICAS", "AGE"]
    rows = {line.split()[0]: line.split() for line in table[1:]}
    assert rows["llama"][1:3] == ["llama-3", "2"]
    # The schema's default filled the replicas the manifest left out.
    assert rows["mistral"][1:3] == ["mistral-7b", "1"]
    # Short name and category resolve too.
    assert "llama" in kubectl.run("get", "tr", "-n", "default", "-o", "name").stdout
    assert "trainer.ml.example.com/mistral" in kubectl.run("get", "ml", "-n", "default", "-o", "name").stdout

    # The older served version shows the same objects as its own.
    old = kubectl.run("get", "trainers.v1beta1.ml.example.com", "mistral", "-n", "default", "-o", "json").stdout
    assert json.loads(old)["apiVersion"] == "ml.example.com/v1beta1"
    assert json.loads(old)["spec"]["model"] == "mistral-7b"

    # kubectl explain reads the kind's schema from the hub's OpenAPI (v3, and v2 as protobuf).
    explained = kubectl.run("explain", "trainer.spec.replicas").stdout
    assert "FIELD: replicas <integer>" in explained
    v2 = kubectl.run("explain", "trainer.spec", "--output=plaintext-openapiv2").stdout
    assert "model\t<string> -required-" in v2

    stored = json.loads(kubectl.run("get", "trainer", "llama", "-n", "default", "-o", "json").stdout)
    assert "bogus" not in stored["spec"]
    assert stored["spec"]["maxReplicas"] == 8

    cel = _apply(kubectl, tmp_path, "cel.yaml", _trainer("  model: x\n  replicas: 9\n"), check=False)
    assert cel.returncode != 0
    assert 'spec: Invalid value: "object": replicas must not exceed maxReplicas' in cel.stderr
    wrong_type = _apply(kubectl, tmp_path, "type.yaml", _trainer("  model: x\n  replicas: many\n"), check=False)
    assert wrong_type.returncode != 0
    assert 'spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"' in wrong_type.stderr
    missing = _apply(kubectl, tmp_path, "missing.yaml", _trainer("  replicas: 1\n"), check=False)
    assert missing.returncode != 0
    assert "spec.model: Required value" in missing.stderr

    # Updates are validated the same way: a merge patch, a server-side apply.
    patched = kubectl.run("patch", "trainer", "llama", "-n", "default", "--type=merge", "-p", '{"spec":{"replicas":"x"}}', check=False)
    assert patched.returncode != 0
    assert "spec.replicas in body must be of type integer" in patched.stderr
    server_side = _apply(kubectl, tmp_path, "ssa.yaml", _trainer("  model: m\n  replicas: 20\n").replace("name: bad", "name: llama"),
                         "--server-side", "--force-conflicts", check=False)
    assert server_side.returncode != 0
    assert "replicas must not exceed maxReplicas" in server_side.stderr
    # Its options are checked first, all at once, as kube checks them: nothing is written.
    too_long = _apply(kubectl, tmp_path, "ssa.yaml", _trainer("  model: m2\n  replicas: 3\n").replace("name: bad", "name: ssa"),
                      "--server-side", f"--field-manager={'m' * 129}", check=False)
    assert too_long.returncode != 0
    assert 'PatchOptions "" is invalid: fieldManager: Too long: may not be more than 128 bytes' in too_long.stderr
    assert kubectl.run("get", "trainer", "ssa", "-n", "default", check=False).returncode != 0
    _apply(kubectl, tmp_path, "ssa.yaml", _trainer("  model: m2\n  replicas: 3\n").replace("name: bad", "name: ssa"), "--server-side")
    assert kubectl.run("get", "trainer", "ssa", "-n", "default", "-o", "jsonpath={.spec.maxReplicas}").stdout == "8"

    kubectl.run("scale", "trainer/llama", "-n", "default", "--replicas=5")
    assert kubectl.run("get", "trainer", "llama", "-n", "default", "-o", "jsonpath={.spec.replicas}").stdout == "5"

    kubectl.run("delete", "crd", "trainers.ml.example.com", "--timeout=60s")
    gone = kubectl.run("get", "trainers", "-n", "default", check=False)
    assert gone.returncode != 0
    # kubectl's cached discovery still knows the kind; the server no longer serves it.
    assert "the server could not find the requested resource" in gone.stderr
    # Re-created, the kind starts empty: the objects went with the CRD.
    kubectl.run("apply", "-f", str(CRD))
    kubectl.run("wait", "--for=condition=Established", "crd/trainers.ml.example.com", "--timeout=30s")
    assert kubectl.run("get", "trainers", "-A", "-o", "name").stdout.strip() == ""
