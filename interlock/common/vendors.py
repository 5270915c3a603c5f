"""Model vendors' credentials and the hosts each may be sent to: one table, one row a vendor.

A variable such as ``OPENAI_API_KEY`` or ``HF_TOKEN`` is set on the gateway's machine for one vendor; a
provider naming it sends its value to the provider's ``base_url`` (and its workers) with every request and
probe. Pointed anywhere else, it hands that vendor's key to whoever runs the host, and the kind does not
help: ``kind: anthropic`` at ``https://evil.example`` sends ``ANTHROPIC_API_KEY`` there. So a vendor's
variable goes only to that vendor's hosts (the domain or any name under it), unless the provider lists the
other host in ``api_key_hosts``: a line a reviewer sees, and ``interlock diff`` reports (IL117 otherwise).
The same list pins any other variable: once set, every host the provider calls must be in it.

A variable the table does not know is an allow rule, not a deny list (``NOMAD_TOKEN``,
``CONSUL_HTTP_TOKEN``, ``CI_JOB_JWT``: a list of other systems' secrets always misses some): it goes off
this network (``interlock.common.hosts``: not loopback, a private address or a local name) only to a model
vendor's host or to one the provider lists in ``api_key_hosts`` (IL120 otherwise).

Imported by the compiler (IL117, with a position) and by the runtime when it loads a plan; neither may
import the other. Names are compared without regard to case, hosts lowercase without a trailing dot.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from interlock.common.hosts import host_class


@dataclass(frozen=True, slots=True)
class Vendor:
    """A model vendor: the variables its keys are kept in, and the domains that serve its API."""

    name: str
    variables: tuple[str, ...]
    domains: tuple[str, ...]  # a host is the vendor's when it is one of these or a name under one

    def serves(self, host: str) -> bool:
        """Whether ``host`` (lowercase, no trailing dot) is one of this vendor's."""
        return any(host == domain or host.endswith(f".{domain}") for domain in self.domains)


VENDORS: tuple[Vendor, ...] = (
    Vendor("OpenAI", ("OPENAI_API_KEY", "OPENAI_KEY"), ("openai.com",)),
    Vendor(
        "Azure OpenAI",
        ("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_KEY", "AZURE_AI_API_KEY"),
        ("openai.azure.com", "cognitiveservices.azure.com", "services.ai.azure.com", "models.ai.azure.com"),
    ),
    Vendor("Anthropic", ("ANTHROPIC_API_KEY", "CLAUDE_API_KEY"), ("anthropic.com",)),
    Vendor("Groq", ("GROQ_API_KEY",), ("groq.com",)),
    Vendor(
        "Google",
        ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENERATIVE_AI_API_KEY"),
        ("googleapis.com",),
    ),
    Vendor("OpenRouter", ("OPENROUTER_API_KEY",), ("openrouter.ai",)),
    Vendor("Mistral", ("MISTRAL_API_KEY",), ("mistral.ai",)),
    Vendor(
        "Hugging Face",
        ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACEHUB_API_TOKEN", "HF_API_TOKEN", "HF_API_KEY"),
        ("huggingface.co", "huggingface.cloud"),
    ),
    Vendor("Together", ("TOGETHER_API_KEY", "TOGETHERAI_API_KEY"), ("together.xyz", "together.ai")),
    Vendor("DeepSeek", ("DEEPSEEK_API_KEY",), ("deepseek.com",)),
    Vendor("xAI", ("XAI_API_KEY", "GROK_API_KEY"), ("x.ai",)),
    Vendor("Cohere", ("COHERE_API_KEY", "CO_API_KEY"), ("cohere.com", "cohere.ai")),
    Vendor("Fireworks", ("FIREWORKS_API_KEY",), ("fireworks.ai",)),
    Vendor("Perplexity", ("PERPLEXITY_API_KEY", "PPLX_API_KEY"), ("perplexity.ai",)),
    Vendor("Cerebras", ("CEREBRAS_API_KEY",), ("cerebras.ai",)),
    Vendor("DeepInfra", ("DEEPINFRA_API_KEY", "DEEPINFRA_TOKEN"), ("deepinfra.com",)),
    Vendor("Replicate", ("REPLICATE_API_TOKEN", "REPLICATE_API_KEY"), ("replicate.com",)),
    Vendor("NVIDIA", ("NVIDIA_API_KEY", "NGC_API_KEY"), ("nvidia.com",)),
    Vendor("Moonshot", ("MOONSHOT_API_KEY",), ("moonshot.ai", "moonshot.cn")),
    Vendor("SambaNova", ("SAMBANOVA_API_KEY",), ("sambanova.ai",)),
    Vendor("Voyage", ("VOYAGE_API_KEY",), ("voyageai.com",)),
)


def vendor_of(variable: str) -> Vendor | None:
    """The vendor whose key ``variable`` holds, or None for a variable the table does not know."""
    name = variable.upper()
    return next((vendor for vendor in VENDORS if name in vendor.variables), None)


def host_of(url: str) -> str:
    """The host a URL sends to, lowercase and without a trailing dot (the URL itself when unreadable)."""
    try:
        host = urlsplit(url.strip()).hostname
    except ValueError:
        host = None
    return (host or url).lower().rstrip(".")


def listed_host(entry: str) -> str:
    """An ``api_key_hosts`` entry as a host (``[::1]`` and ``::1`` alike)."""
    return entry.strip().lower().removeprefix("[").removesuffix("]").rstrip(".")


def stray_hosts(variable: str, urls: Iterable[str], allowed: Iterable[str]) -> list[str]:
    """The hosts among ``urls``' that ``variable`` may not be sent to, sorted: for a vendor's variable,
    those neither the vendor's nor in ``allowed``; for any other, those not in ``allowed`` when it is
    given (an empty ``allowed`` pins nothing)."""
    vendor = vendor_of(variable)
    permitted = {listed_host(entry) for entry in allowed}
    if vendor is None and not permitted:
        return []
    hosts = {host_of(url) for url in urls}
    return sorted(
        host for host in hosts if host not in permitted and (vendor is None or not vendor.serves(host))
    )


def unlisted_hosts(variable: str, urls: Iterable[str], allowed: Iterable[str]) -> list[str]:
    """For a variable no vendor's key is kept in, the hosts among ``urls``' off this network that no
    vendor serves, sorted: where only the configuration can say that the variable holds that host's key.
    Empty for a vendor's variable, and once ``allowed`` lists any host (``stray_hosts`` binds both)."""
    if vendor_of(variable) is not None or any(True for _ in allowed):
        return []
    hosts = {host_of(url) for url in urls}
    return sorted(
        host
        for host in hosts
        if host_class(host) is None and not any(vendor.serves(host) for vendor in VENDORS)
    )
