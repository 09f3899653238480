"""Shared by the deployment tests: where the deploy tools are (scripts/setup.sh deploy),
and whether a missing tool skips a test or fails it (ORTSERVE_REQUIRE_DEPLOY_TOOLS=1,
set by scripts/run_tests.sh after `make deploy-deps`, so that CI cannot skip them)."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import pytest
import yaml

from harness import REPO_ROOT

DEPLOY_TOOLS = pathlib.Path(os.environ.get("DEPLOY_TOOLS", REPO_ROOT / ".cache" / "deploy-tools"))
CHART = REPO_ROOT / "deploy" / "helm" / "ortserve"
KUBE_VERSION = "1.30.0"


def require(what: str) -> None:
    """Skips (or fails, when the tools must be there) for a missing tool."""
    message = f"{what} is missing: run scripts/setup.sh deploy (DEPLOY_TOOLS={DEPLOY_TOOLS})"
    if os.environ.get("ORTSERVE_REQUIRE_DEPLOY_TOOLS") == "1":
        pytest.fail(message)
    pytest.skip(message)


def helm() -> str:
    path = DEPLOY_TOOLS / "bin" / "helm"
    if not path.exists():
        require("helm")
    return str(path)


def deploy_python() -> str:
    path = DEPLOY_TOOLS / "venv" / "bin" / "python"
    if not path.exists():
        require("the deploy check venv (kubernetes-validate, checkov)")
    return str(path)


def haproxy() -> str:
    path = shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin:/usr/local/sbin")
    if path is None:
        require("haproxy (Debian package)")
    return path


def render_chart(values_file: pathlib.Path | None = None, set_values: tuple = ()) -> list[dict]:
    cmd = [helm(), "template", "ortserve", str(CHART), "--kube-version", KUBE_VERSION]
    if values_file:
        cmd += ["-f", str(values_file)]
    for s in set_values:
        cmd += ["--set", s]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def one(docs: list[dict], kind: str) -> dict:
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"{len(found)} {kind} documents"
    return found[0]


def ortserve_workload(docs: list[dict]) -> dict:
    """The Deployment (or, with routing by model name, StatefulSet) that runs ortserve."""
    found = [d for d in docs if d["kind"] in ("Deployment", "StatefulSet")
             and any(c["name"] == "ortserve" for c in d["spec"]["template"]["spec"]["containers"])]
    assert len(found) == 1, f"{len(found)} ortserve workloads"
    return found[0]


def named(docs: list[dict], kind: str, name: str) -> dict:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"{len(found)} {kind} documents named {name}"
    return found[0]


def flag_values(args: list[str]) -> dict:
    """--name=value arguments as {name: value} (the chart always writes the = form)."""
    values = {}
    for a in args:
        assert a.startswith("--") and "=" in a, f"argument {a!r} is not --flag=value"
        name, value = a.split("=", 1)
        values.setdefault(name, []).append(value)
    return values
