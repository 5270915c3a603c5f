"""Which environment variables may hold a credential that interlock sends or compares.

A plan names the variable that holds a provider's key (``api_key_env``, sent upstream with every request
and probe) or a caller key's secret (``key_env``, compared with what callers send). Both are read from the
gateway's environment, which also holds the process's own settings and the platform's other secrets. A
config anyone can edit must not be able to point either at them: ``api_key_env: AWS_SECRET_ACCESS_KEY``
would ship the AWS secret to whatever ``base_url`` says, and ``key_env: HOME`` would make ``/root`` an
operator key.

``not_a_credential`` is the deny rule for both kinds of variable, imported by the compiler (with a
position) and by the runtime when it loads a plan (a plan file can be written by hand), which may not
import each other: the process's own variables, paths and settings, other systems' well-known secrets,
interlock's own settings (IL111). The allow rule for a caller key's variable (its name says it holds a
secret, or starts with a prefix the operator declared) is ``interlock.common.apikeys.secret_like``'s.

Which vendor a provider credential belongs to, and where it may go, is ``interlock.common.vendors``.
"""

from __future__ import annotations

from interlock.common import words

PROCESS_VARIABLES = frozenset(
    words(
        """
    _ HOME PATH USER LOGNAME USERNAME SHELL PWD OLDPWD LANG LANGUAGE TERM COLORTERM TZ TMPDIR TMP TEMP
    HOSTNAME HOST HOSTTYPE OSTYPE MACHTYPE MAIL EDITOR VISUAL PAGER DISPLAY SHLVL UID EUID PPID IFS PS1
    PS2 PS3 PS4 PROMPT_COMMAND HISTFILE HISTSIZE HISTFILESIZE HISTCONTROL HISTIGNORE HISTTIMEFORMAT
    TERM_PROGRAM TERM_PROGRAM_VERSION TERM_SESSION_ID LISTEN_FDS LISTEN_PID LISTEN_FDNAMES COLUMNS LINES
    ENV CDPATH MANPATH INFOPATH LD_LIBRARY_PATH LD_PRELOAD PYTHONPATH PYTHONHOME VIRTUAL_ENV GOPATH GOROOT
    GOBIN GOFLAGS NODE_OPTIONS MAKEFLAGS CUDA_VISIBLE_DEVICES INVOCATION_ID JOURNAL_STREAM NOTIFY_SOCKET
    DBUS_SESSION_BUS_ADDRESS WAYLAND_DISPLAY USERPROFILE APPDATA LOCALAPPDATA COMSPEC SYSTEMROOT WINDIR
    PATHEXT SSH_AUTH_SOCK HTTP_PROXY HTTPS_PROXY NO_PROXY ALL_PROXY
    """
    )
)
"""The process's own variables: every process has some of them, and none of them is a credential (``_``
is the shell's last command, exported to every child: e.g. ``/usr/bin/setsid``)."""

PROCESS_PREFIXES = words(
    "LC_ XDG_ SSH_ SUDO_ KUBERNETES_ HIST BASH_ ZSH_ CONDA_ JAVA_ NVM_ PYENV_ TERM_ LISTEN_"
)
"""Families of process and platform variables (locale, desktop, SSH session, sudo, the pod's service, the
shell's settings (``HIST``: HISTFILE, HISTSIZE, HISTCONTROL), toolchains and their environments)."""

PATH_SUFFIXES = ("_HOME", "_PATH", "_DIR", "_ROOT", "_PREFIX", "_FILE")
"""Names of files and folders (``JAVA_HOME``, ``CARGO_HOME``, ``OPENAI_API_KEY_FILE``): the value is a
path, never the secret itself."""

FOREIGN_SECRETS = frozenset(
    words(
        """
    GOOGLE_APPLICATION_CREDENTIALS GOOGLE_OAUTH_ACCESS_TOKEN GOOGLE_GHA_CREDS_PATH GOOGLE_CLIENT_SECRET
    CLOUDSDK_AUTH_ACCESS_TOKEN CI_JOB_TOKEN NPM_TOKEN NODE_AUTH_TOKEN PYPI_TOKEN TWINE_PASSWORD
    CARGO_REGISTRY_TOKEN GEM_HOST_API_KEY NUGET_API_KEY HOMEBREW_GITHUB_API_TOKEN CODECOV_TOKEN
    SONAR_TOKEN SNYK_TOKEN DATABASE_URL REDIS_URL MONGODB_URI MONGO_URL AMQP_URL RABBITMQ_URL
    CELERY_BROKER_URL PGPASSWORD MYSQL_PWD DIGITALOCEAN_TOKEN HCLOUD_TOKEN LINODE_TOKEN NETLIFY_AUTH_TOKEN
    VERCEL_TOKEN FLY_API_TOKEN RAILWAY_TOKEN FIREBASE_TOKEN OP_SERVICE_ACCOUNT_TOKEN DOPPLER_TOKEN
    DD_API_KEY DD_APP_KEY SECRET_KEY SECRET_KEY_BASE DJANGO_SECRET_KEY RAILS_MASTER_KEY APP_KEY JWT_SECRET
    JWT_SECRET_KEY SESSION_SECRET NEXTAUTH_SECRET AUTH_SECRET ENCRYPTION_KEY
    """
    )
)
"""Well-known secrets of other systems (clouds, CI, registries, databases, web frameworks: Django's and
Flask's ``SECRET_KEY`` signs the web app's sessions)."""

FOREIGN_PREFIXES = words(
    """
    AWS_ AZURE_ ARM_ GCLOUD_ CLOUDSDK_ GCP_ GOOGLE_CLOUD_ ACTIONS_ GITHUB_ GH_ GITLAB_ DOCKER_ VAULT_ KUBE
    TF_VAR_ TF_TOKEN_ STRIPE_ SLACK_ SENTRY_ TWILIO_ SENDGRID_ MAILGUN_ DATADOG_ NEW_RELIC_ CLOUDFLARE_
    HEROKU_ DIGITALOCEAN_ OCI_ IBMCLOUD_ ALICLOUD_ ALIBABA_CLOUD_ SUPABASE_ OKTA_ AUTH0_ PULUMI_
    """
)
"""Families of other systems' credentials: clouds (AWS, Azure and Terraform's ARM_*, Google Cloud, OCI,
IBM, Alibaba), CI and code hosts (GitHub Actions, GitLab), Docker, Vault, Kubernetes (``KUBE``:
KUBECONFIG, KUBE_TOKEN), Terraform's
variables, payments, chat, error trackers, mail, monitoring, auth providers."""

FOREIGN_SUFFIXES = words(
    """
    _PASSWORD _PASSWD _PASSPHRASE _DSN _PRIVATE_KEY _CLIENT_SECRET _DATABASE_URL _CONNECTION_STRING
    _SERVICE_ACCOUNT_KEY _SERVICE_ACCOUNT_JSON _SECRET_ACCESS_KEY _WEBHOOK_SECRET _SIGNING_SECRET
    _SIGNING_KEY
    """
)
"""Shapes of other systems' secrets whatever the system: passwords, database DSNs and URLs, private keys,
OAuth client secrets, service-account keys, webhook and signing secrets."""

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
    if name.endswith(PATH_SUFFIXES):
        return "names a file or a folder, not a credential"
    if name.startswith(MODEL_VENDOR_PREFIXES) and not name.endswith(FOREIGN_SUFFIXES):
        return None
    if name in FOREIGN_SECRETS or name.startswith(FOREIGN_PREFIXES) or name.endswith(FOREIGN_SUFFIXES):
        return "holds another system's credential (a cloud, CI, registry, database or service secret)"
    return None
