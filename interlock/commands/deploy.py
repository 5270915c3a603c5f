"""`deploy`: write deployment files for a plan (or a configuration, compiled first): Kubernetes manifests,
Prometheus alerting rules; nothing is applied."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any
from urllib.parse import urlsplit

from interlock.commands.files import OutputError, write_atomically, written
from interlock.commands.options import add_source_options, read_plan
from interlock.deploy import TARGETS
from interlock.deploy.base import DeployOptions


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "deploy",
        help="write deployment files for a plan (Kubernetes, Prometheus rules); nothing is applied",
        description=(
            "k8s writes one file per resource into DIR: a new plan gets a new ConfigMap (its name carries "
            "the plan's hash), so applying the files rolls the Deployment out. prometheus-rules writes one "
            "rule file, FILE: alerts per alias, worker and key with credits, compiled from the plan."
        ),
    )
    p.add_argument(
        "target",
        choices=tuple(TARGETS),
        help="what to write for (k8s: Kubernetes; prometheus-rules: Prometheus alerting rules)",
    )
    p.add_argument("source", metavar="PLAN_OR_CONFIG", help="a compiled plan (.json) or a configuration")
    p.add_argument(
        "-o",
        "--output",
        metavar="DIR_OR_FILE",
        required=True,
        help="k8s: the directory; prometheus-rules: the file",
    )
    p.add_argument(
        "--name", default="interlock", help="resource name and instance label (default: interlock)"
    )
    p.add_argument("--namespace", help="namespace (default: none: the one kubectl applies to)")
    p.add_argument("--image", default="interlock:0.1.0", help="container image (default: interlock:0.1.0)")
    p.add_argument("--replicas", type=int, default=2, help="pods (default: 2)")
    p.add_argument("--workers", type=int, default=1, help="`interlock serve --workers` per pod (default: 1)")
    state = p.add_mutually_exclusive_group()
    state.add_argument(
        "--state-url", help="shared state for the replicas, e.g. redis://redis:6379/0 (no password in it)"
    )
    state.add_argument(
        "--state-url-in-secret",
        action="store_true",
        help="read the state URL (with its password) from the credentials Secret, key INTERLOCK_STATE_URL",
    )
    p.add_argument(
        "--credentials-secret", help="the Secret holding the credential variables (default: NAME-credentials)"
    )
    add_source_options(p)
    p.set_defaults(handler=run_deploy, parser=p)


def run_deploy(args: argparse.Namespace) -> int:
    if args.replicas < 1 or args.workers < 1:
        args.parser.error("--replicas and --workers must be at least 1")
    target = TARGETS[args.target]
    if target.one_file:
        return _write_one(args)
    if os.path.exists(args.output) and not os.path.isdir(args.output):
        print(f"interlock deploy: {args.output} exists and is not a directory", file=sys.stderr)
        return 2
    if args.state_url is not None and urlsplit(args.state_url).password is not None:
        print(
            "interlock deploy: --state-url holds a password, which would be written into the Deployment; "
            "put the URL in the credentials Secret under INTERLOCK_STATE_URL and use --state-url-in-secret",
            file=sys.stderr,
        )
        return 2
    plan = read_plan("deploy", args.source, args)
    if plan is None:
        return 1
    options = DeployOptions(
        name=args.name,
        namespace=args.namespace,
        image=args.image,
        replicas=args.replicas,
        workers=args.workers,
        state_url=args.state_url,
        state_url_in_secret=args.state_url_in_secret,
        credentials_secret=args.credentials_secret,
    )
    files = target.write(plan, options)
    try:
        if not os.path.isdir(args.output):
            os.mkdir(args.output)  # DIR itself, as asked; never its missing parents
        for name, text in files.items():
            write_atomically(os.path.join(args.output, name), text)
    except OSError as exc:
        print(f"interlock deploy: cannot create {args.output}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    except OutputError as exc:
        print(f"interlock deploy: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {', '.join(files)} to {args.output} (plan {plan.content_hash})")
    if args.replicas > 1 and args.state_url is None and not args.state_url_in_secret:
        print(
            f"interlock deploy: note: {args.replicas} replicas without --state-url: each pod enforces the "
            "slot limits on its own, so a GPU may get up to that many times its limit",
            file=sys.stderr,
        )
    return 0


def _write_one(args: argparse.Namespace) -> int:
    if os.path.isdir(args.output):
        print(f"interlock deploy: {args.output} is a directory; give the file to write", file=sys.stderr)
        return 2
    plan = read_plan("deploy", args.source, args)
    if plan is None:
        return 1
    (text,) = TARGETS[args.target].write(plan, DeployOptions()).values()
    if not written(args.output, text, "interlock deploy"):
        return 1
    print(f"wrote {args.output} (plan {plan.content_hash})")
    return 0
