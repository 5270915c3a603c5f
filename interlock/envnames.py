"""Which environment variables may hold a credential that interlock sends or compares.

A plan names the variable that holds a provider's key (``api_key_env``, sent upstream with every request
and probe) or a caller key's secret (``key_env``, compared with what callers send). Both are read from the
gateway's environment, which also holds the process's own settings and the platform's other secrets. A
config anyone can edit must not be able to point either at them: ``api_key_env: AWS_SECRET_ACCESS_KEY``
would ship the AWS secret to whatever ``base_url`` says, and ``key_env: HOME`` would make ``/root`` an
operator key. One rule, imported by the compiler (IL111, with a position) and by the runtime when it loads
a plan (a plan file can be written by hand), which may not import each other.
"""

from __future__ import annotations

PROCESS_VARIABLES = frozenset(
    (
        "HOME",
        "PATH",
        "USER",
        "LOGNAME",
        "USERNAME",
        "SHELL",
        "PWD",
        "OLDPWD",
        "LANG",
        "LANGUAGE",
        "TERM",
        "TZ",
        "TMPDIR",
        "TMP",
        "TEMP",
        "HOSTNAME",
        "HOST",
        "MAIL",
        "EDITOR",
        "VISUAL",
        "PAGER",
        "DISPLAY",
        "SHLVL",
        "UID",
        "EUID",
        "PPID",
        "IFS",
        "PS1",
        "LD_LIBRARY_PATH",
        "LD_PRELOAD",
        "PYTHONPATH",
        "PYTHONHOME",
        "VIRTUAL_ENV",
        "SSH_AUTH_SOCK",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "ALL_PROXY",
    )
)
"""The process's own variables: every process has them, and none of them is a credential."""

PROCESS_PREFIXES = ("LC_", "XDG_", "SSH_", "SUDO_", "KUBERNETES_")
"""Families of process and platform variables (locale, desktop, SSH session, sudo, the pod's service)."""

FOREIGN_SECRETS = frozenset(
    (
        "GOOGLE_APPLICATION_CREDENTIALS",
        "GOOGLE_OAUTH_ACCESS_TOKEN",
        "GOOGLE_GHA_CREDS_PATH",
        "CLOUDSDK_AUTH_ACCESS_TOKEN",
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "GITLAB_TOKEN",
        "CI_JOB_TOKEN",
        "NPM_TOKEN",
        "PYPI_TOKEN",
        "TWINE_PASSWORD",
        "DOCKER_PASSWORD",
        "VAULT_TOKEN",
        "DATABASE_URL",
        "REDIS_URL",
        "PGPASSWORD",
        "MYSQL_PWD",
        "DIGITALOCEAN_TOKEN",
        "HCLOUD_TOKEN",
        "CLOUDFLARE_API_TOKEN",
        "HEROKU_API_KEY",
    )
)
"""Well-known secrets of other systems (clouds, CI, registries, databases)."""

FOREIGN_PREFIXES = ("AWS_", "AZURE_", "ARM_", "GCLOUD_", "CLOUDSDK_", "ACTIONS_", "DOCKER_", "VAULT_")
"""Families of other systems' credentials: AWS, Azure (and Terraform's ARM_*), Google Cloud's SDK, GitHub
Actions, Docker, Vault."""

MODEL_VENDOR_PREFIXES = ("AZURE_OPENAI_", "AZURE_AI_")
"""Under a foreign family, the variables a model vendor's own key is kept in (Azure OpenAI's key)."""

OWN_PREFIX = "INTERLOCK_"
"""interlock's own settings (``INTERLOCK_STATE_URL`` and ``INTERLOCK_USAGE_URL`` carry passwords)."""


def not_a_credential(variable: str) -> str | None:
    """Why ``variable`` may not hold a key interlock sends or compares (None when it may); the reason
    completes "`X` ...". Matched without regard to case: Windows and some shells fold it."""
    name = variable.upper()
    if name.startswith(OWN_PREFIX):
        return "is one of interlock's own settings (`INTERLOCK_*`), not a credential"
    if name in PROCESS_VARIABLES or name.startswith(PROCESS_PREFIXES):
        return "is a variable of the process itself, not a credential"
    if name.startswith(MODEL_VENDOR_PREFIXES):
        return None
    if name in FOREIGN_SECRETS or name.startswith(FOREIGN_PREFIXES):
        return "holds another system's credential (a cloud, CI, registry or database secret)"
    return None
