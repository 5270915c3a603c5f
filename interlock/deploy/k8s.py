"""Kubernetes: a ConfigMap holding the plan, a Deployment, a Service and a Prometheus ServiceMonitor.

The ConfigMap's name carries the plan's content hash (``<name>-plan-<12 hex>``), and the Deployment's
pod template names it, so a new plan is a new ConfigMap and a rolling update, and the old pods keep
serving the old plan until the new ones are ready. Readiness is ``/readyz`` (ready once the first probe
round is done), liveness ``/healthz``. Credential variables (providers' and caller keys') come from one
Secret, key = variable name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from interlock.deploy.base import DeployOptions
from interlock.schema.canonical import canonical_json
from interlock.schema.plan import RoutingPlan

PLAN_DIR = "/etc/interlock"
STATE_URL_VARIABLE = "INTERLOCK_STATE_URL"  # what `interlock serve` reads when --state-url is not given


def plan_configmap_name(plan: RoutingPlan, options: DeployOptions) -> str:
    return f"{options.name}-plan-{plan.content_hash.removeprefix('sha256:')[:12]}"


def manifests(plan: RoutingPlan, options: DeployOptions) -> Mapping[str, str]:
    """File name -> YAML text, one resource a file."""
    labels = {"app.kubernetes.io/name": "interlock", "app.kubernetes.io/instance": options.name}
    resources = {
        "configmap.yaml": _configmap(plan, options, labels),
        "deployment.yaml": _deployment(plan, options, labels),
        "service.yaml": _service(options, labels),
        "servicemonitor.yaml": _service_monitor(options, labels),
    }
    return {name: _yaml(resource) for name, resource in resources.items()}


def _metadata(name: str, options: DeployOptions, labels: Mapping[str, str]) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": dict(labels)}
    if options.namespace is not None:
        metadata["namespace"] = options.namespace
    return metadata


def _configmap(plan: RoutingPlan, options: DeployOptions, labels: Mapping[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(plan_configmap_name(plan, options), options, labels),
        "immutable": True,
        "data": {"plan.json": canonical_json(plan.model_dump(mode="json"))},
    }


def credential_variables(plan: RoutingPlan) -> set[str]:
    """Every variable the plan reads a secret from: each provider's ``api_key_env`` and, when caller keys
    are read (``auth`` not ``off``), each key's ``key_env``; a pod missing one does not start."""
    out = {p.api_key_env for p in plan.providers.values() if p.api_key_env is not None}
    if plan.server.auth != "off":
        out.update(key.key_env for key in plan.access.keys.values() if key.key_env is not None)
    return out


def _deployment(plan: RoutingPlan, options: DeployOptions, labels: Mapping[str, str]) -> dict[str, Any]:
    args = ["serve", f"{PLAN_DIR}/plan.json", "--host", "0.0.0.0", "--port", str(options.port)]
    if options.workers > 1:
        args += ["--workers", str(options.workers)]
    if options.state_url is not None:
        args += ["--state-url", options.state_url]
    secret = options.credentials_secret or f"{options.name}-credentials"
    variables = sorted(credential_variables(plan))
    if options.state_url_in_secret:
        variables.append(STATE_URL_VARIABLE)
    env = [{"name": var, "valueFrom": {"secretKeyRef": {"name": secret, "key": var}}} for var in variables]
    container: dict[str, Any] = {
        "name": "interlock",
        "image": options.image,
        "command": ["interlock"],
        "args": args,
        "ports": [{"name": "http", "containerPort": options.port, "protocol": "TCP"}],
        "readinessProbe": {
            "httpGet": {"path": "/readyz", "port": "http"},
            "periodSeconds": 5,
            "failureThreshold": 2,
        },
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": "http"},
            "initialDelaySeconds": 10,
            "periodSeconds": 10,
            "failureThreshold": 3,
        },
        "volumeMounts": [
            {"name": "plan", "mountPath": PLAN_DIR, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},  # --workers N: the supervisor's private socket dir
        ],
        "securityContext": {
            "runAsNonRoot": True,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    if env:
        container["env"] = env
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(options.name, options, labels),
        "spec": {
            "replicas": options.replicas,
            "selector": {"matchLabels": dict(labels)},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "template": {
                "metadata": {
                    "labels": dict(labels),
                    "annotations": {"interlock.dev/plan": plan.content_hash},
                },
                "spec": {
                    "terminationGracePeriodSeconds": 30,
                    "securityContext": {"runAsUser": 10001, "runAsGroup": 10001, "fsGroup": 10001},
                    "containers": [container],
                    "volumes": [
                        {"name": "plan", "configMap": {"name": plan_configmap_name(plan, options)}},
                        {"name": "tmp", "emptyDir": {}},
                    ],
                },
            },
        },
    }


def _service(options: DeployOptions, labels: Mapping[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(options.name, options, labels),
        "spec": {
            "type": "ClusterIP",
            "selector": dict(labels),
            "ports": [{"name": "http", "port": options.port, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def _service_monitor(options: DeployOptions, labels: Mapping[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": _metadata(options.name, options, labels),
        "spec": {
            "selector": {"matchLabels": dict(labels)},
            "endpoints": [{"port": "http", "path": "/metrics", "interval": "30s"}],
        },
    }


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the plan) as literal blocks, readable in a review."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def _yaml(resource: Mapping[str, Any]) -> str:
    text: str = yaml.dump(
        dict(resource), Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=110
    )
    return text
