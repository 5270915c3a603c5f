"""Deployment files for a plan: one module per target, one table of targets.

A target turns a ``RoutingPlan`` and ``DeployOptions`` into files (name -> text); it never talks to a
cluster or a Prometheus. Credentials appear only as variable names, read from a secret the operator
creates.
"""

from __future__ import annotations

from collections.abc import Mapping

from interlock.deploy.base import DeployOptions, Target
from interlock.schema.plan import RoutingPlan


def _k8s(plan: RoutingPlan, options: DeployOptions) -> Mapping[str, str]:
    from interlock.deploy.k8s import manifests

    return manifests(plan, options)


def _prometheus_rules(plan: RoutingPlan, options: DeployOptions) -> Mapping[str, str]:
    from interlock.deploy.prometheus import targets

    return targets(plan)


TARGETS: Mapping[str, Target] = {
    "k8s": Target(_k8s, one_file=False),
    "prometheus-rules": Target(_prometheus_rules, one_file=True),
}
