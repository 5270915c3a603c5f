"""The compiler passes, in the order they run. Each module holds one pass named like the module."""

from __future__ import annotations

from collections.abc import Callable

from interlock.compiler.context import CompileContext
from interlock.compiler.passes.access import access
from interlock.compiler.passes.aliases import aliases
from interlock.compiler.passes.capabilities import capabilities
from interlock.compiler.passes.contract import contract
from interlock.compiler.passes.cors import cors
from interlock.compiler.passes.destinations import destinations
from interlock.compiler.passes.headers import headers
from interlock.compiler.passes.health import health
from interlock.compiler.passes.keyvars import keyvars
from interlock.compiler.passes.placement import placement
from interlock.compiler.passes.preflight import preflight
from interlock.compiler.passes.providers import providers
from interlock.compiler.passes.routing import routing
from interlock.compiler.passes.shape import shape
from interlock.compiler.passes.surfaces import surfaces
from interlock.compiler.passes.usage import usage
from interlock.compiler.passes.vram import vram
from interlock.compiler.passes.workers import workers

Pass = Callable[[CompileContext], None]

PASSES: tuple[Pass, ...] = (
    shape,  # raw sections -> typed sections
    headers,  # names and headers that cannot be sent on the wire rejected
    providers,  # kinds, base URLs, credential variables
    destinations,  # a vendor's credential bound to its vendor's hosts (or `api_key_hosts`)
    workers,  # profiles applied, pattern tables built
    health,  # health and timeout values
    cors,  # server.cors: origins and headers normalized
    surfaces,  # server.surfaces: the API surfaces served, each known
    aliases,  # chains expanded, cycles rejected
    capabilities,  # requires vs known capabilities
    preflight,  # preflight settings, context limits within model maxima
    contract,  # aliases -> the agent contract: guaranteed window, output ceiling, reasoning
    vram,  # weights + KV cache at full slots against worker memory
    routing,  # worker-choice weights and saturation policies in range
    placement,  # workers' memory + models' sizes -> which models stay loaded where
    access,  # tenants, keys, ACL patterns and prices; secrets only as variable names or hashes
    keyvars,  # caller keys' variables named (and, with --require-env, valued) as secrets
    usage,  # warnings about unused parts
)
