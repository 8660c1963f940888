"""Real kubectl as the reference for strategic merge patch in the patching tests.

``kubectl patch --local`` runs Kubernetes' own strategic merge patch code on a file
without any server, so every table case whose behaviour the hub shares with Kubernetes
is also run through it and must give the same object.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

KubectlPatch = Callable[[dict[str, Any], dict[str, Any]], "dict[str, Any] | str"]


@pytest.fixture
def kubectl_patch(tmp_path: Path) -> KubectlPatch:
    """Patch with real kubectl: the patched object, or kubectl's error text when it refuses."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed; it is the reference for strategic merge patch")
    env = {**os.environ, "KUBECONFIG": str(tmp_path / "no-kubeconfig")}

    def run(original: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any] | str:
        source = tmp_path / "object.json"
        source.write_text(json.dumps(original))
        done = subprocess.run(
            [
                kubectl,
                "patch",
                "--local",
                "-f",
                str(source),
                "--type",
                "strategic",
                "-p",
                json.dumps(patch),
                "-o",
                "json",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            check=False,
        )
        if done.returncode != 0:
            return done.stderr.strip() or f"kubectl exited {done.returncode}"
        result: dict[str, Any] = json.loads(done.stdout)
        return result

    return run
