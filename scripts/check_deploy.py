#!/usr/bin/env python3
"""Offline checks of the deployment files (docs/deploy.md, "Checks").

For every values file in deploy/helm/ci/: `helm lint`, `helm template`, and
each rendered manifest validated -- Kubernetes kinds against the API schemas
of the PyPI package kubernetes-validate (strict), custom resources against
deploy/schemas/custom-resources.yaml with their containers checked as
Kubernetes containers. The KServe files in deploy/kserve/ likewise. Then
checkov over everything rendered; it must report no failed check (the few
skipped ones are listed in deploy/.checkov.yaml, each with its reason).
Values that must be refused (deploy/helm/ci/refused/) must make `helm
template` fail.

Runs with the deploy venv's Python (scripts/setup.sh deploy):
  $DEPLOY_TOOLS/venv/bin/python scripts/check_deploy.py [--out DIR]
Exit 0 when everything passes; prints one line per check.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import jsonschema
import kubernetes_validate
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHART = ROOT / "deploy" / "helm" / "ortserve"
CI_VALUES = ROOT / "deploy" / "helm" / "ci"
KSERVE = ROOT / "deploy" / "kserve"
CUSTOM_SCHEMAS = ROOT / "deploy" / "schemas" / "custom-resources.yaml"
CHECKOV_CONFIG = ROOT / "deploy" / ".checkov.yaml"
KUBERNETES_VERSION = "1.30.0"  # the chart's kubeVersion floor (preStop sleep action)
DEPLOY_TOOLS = pathlib.Path(os.environ.get("DEPLOY_TOOLS", ROOT / ".cache" / "deploy-tools"))


def tool(name: str) -> str:
    for candidate in (DEPLOY_TOOLS / "bin" / name, DEPLOY_TOOLS / "venv" / "bin" / name):
        if candidate.exists():
            return str(candidate)
    raise SystemExit(f"{name} not found under {DEPLOY_TOOLS}: run scripts/setup.sh deploy")


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def render(values: pathlib.Path) -> list[dict]:
    """helm template of the chart with one values file: its documents."""
    out = run([tool("helm"), "template", "ortserve", str(CHART), "--namespace", "serving",
               "--kube-version", KUBERNETES_VERSION, "-f", str(values)])
    if out.returncode != 0:
        raise AssertionError(f"helm template -f {values.name} failed:\n{out.stderr}")
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def validate_containers(containers: list, where: str) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "check"},
           "spec": {"containers": containers}}
    try:
        kubernetes_validate.validate(pod, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as e:
        raise AssertionError(f"{where}: container: {e.message} at {list(e.path)}") from None


def find_pod_container_lists(schema: dict, doc, path: str, where: str) -> None:
    """Validates every list the schema marks x-pod-containers as Kubernetes containers."""
    if not isinstance(schema, dict):
        return
    if schema.get("x-pod-containers") and isinstance(doc, list):
        validate_containers(doc, f"{where} {path}")
        return
    for key, sub in schema.get("properties", {}).items():
        if isinstance(doc, dict) and key in doc:
            find_pod_container_lists(sub, doc[key], f"{path}.{key}", where)


def validate(doc: dict, custom: dict, where: str) -> str:
    key = f"{doc.get('apiVersion')} {doc.get('kind')}"
    name = f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
    if key in custom:
        try:
            jsonschema.validate(doc, custom[key])
        except jsonschema.ValidationError as e:
            raise AssertionError(f"{where}: {name}: {e.message} at {list(e.path)}") from None
        find_pod_container_lists(custom[key], doc, "", f"{where}: {name}")
        return f"{name} (custom resource schema)"
    try:
        version = kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as e:
        raise AssertionError(f"{where}: {name}: {e.message} at {list(e.path)}") from None
    except kubernetes_validate.SchemaNotFoundError:
        raise AssertionError(f"{where}: {name}: no schema for {key}") from None
    return f"{name} (Kubernetes {version})"


def checkov(directory: pathlib.Path) -> str:
    out = run([tool("checkov"), "--directory", str(directory), "--framework", "kubernetes",
               "--config-file", str(CHECKOV_CONFIG), "--output", "json", "--quiet", "--compact",
               "--skip-download"], env={**os.environ, "BC_SKIP_MAPPING": "TRUE"})
    reports = json.loads(out.stdout or "[]")
    reports = reports if isinstance(reports, list) else [reports]
    failed = [c for r in reports for c in r.get("results", {}).get("failed_checks", [])]
    passed = sum(r.get("summary", {}).get("passed", 0) for r in reports)
    skipped = sum(r.get("summary", {}).get("skipped", 0) for r in reports)
    if failed:
        lines = "\n".join(f"  {c['check_id']} {c['check_name']} ({c['file_path']}, {c['resource']})"
                          for c in failed)
        raise AssertionError(f"checkov: {len(failed)} failed checks:\n{lines}")
    if out.returncode not in (0, 1) or passed == 0:
        raise AssertionError(f"checkov did not run (rc {out.returncode}):\n{out.stderr[-2000:]}")
    return f"{passed} passed, 0 failed ({skipped} skipped inline; deploy/.checkov.yaml turns 3 checks off)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=pathlib.Path, help="keep the rendered manifests here")
    args = ap.parse_args()
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        return run_checks(args.out, kept=True)
    with tempfile.TemporaryDirectory(prefix="ortserve-deploy-") as out_dir:
        return run_checks(pathlib.Path(out_dir), kept=False)


def run_checks(out_dir: pathlib.Path, kept: bool) -> int:
    """Every check, the rendered manifests written under `out_dir` (kept:
    it outlives the run, and the summary names it); 0 when all passed."""
    custom = yaml.safe_load(CUSTOM_SCHEMAS.read_text())
    failures = []

    def check(label: str, fn) -> None:
        try:
            detail = fn()
            print(f"ok   {label}{': ' + detail if detail else ''}")
        except AssertionError as e:
            failures.append(label)
            print(f"FAIL {label}: {e}")

    for values in sorted(CI_VALUES.glob("*.yaml")):
        def lint(values=values):
            out = run([tool("helm"), "lint", "--strict", "--kube-version", KUBERNETES_VERSION, str(CHART),
                       "-f", str(values)])
            if out.returncode != 0:
                raise AssertionError(out.stdout + out.stderr)
        check(f"helm lint --strict -f {values.name}", lint)

        def validate_rendered(values=values):
            docs = render(values)
            (out_dir / values.stem).mkdir(exist_ok=True)
            (out_dir / values.stem / "manifests.yaml").write_text(yaml.safe_dump_all(docs))
            return ", ".join(validate(d, custom, values.name) for d in docs)
        check(f"helm template -f {values.name}", validate_rendered)

    for refused in sorted((CI_VALUES / "refused").glob("*.yaml")):
        def must_fail(refused=refused):
            out = run([tool("helm"), "template", "ortserve", str(CHART), "--kube-version",
                       KUBERNETES_VERSION, "-f", str(refused)])
            if out.returncode == 0:
                raise AssertionError("rendered, but these values must be refused")
            return next(line for line in out.stderr.splitlines() if line.startswith("Error"))
        check(f"helm template refuses {refused.name}", must_fail)

    for manifest in sorted(KSERVE.glob("*.yaml")):
        def validate_kserve(manifest=manifest):
            docs = [d for d in yaml.safe_load_all(manifest.read_text()) if d]
            (out_dir / "kserve").mkdir(exist_ok=True)
            (out_dir / "kserve" / manifest.name).write_text(yaml.safe_dump_all(docs))
            return ", ".join(validate(d, custom, manifest.name) for d in docs)
        check(f"deploy/kserve/{manifest.name}", validate_kserve)

    check("checkov", lambda: checkov(out_dir))
    print(f"{'FAILED' if failures else 'passed'}: deployment checks"
          + (f"; rendered manifests in {out_dir}" if kept else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
