"""Open WebUI, unchanged, through interlock: one chat over its Ollama connection, one over its OpenAI one.

    bash examples/open_webui/run.sh            # installs Open WebUI into its own venv first, then this

Run with the project's venv (interlock, playwright); Open WebUI itself runs from ``$OPEN_WEBUI``
(default ``~/.cache/interlock/open-webui/bin/open-webui``), never from the project's venv. It starts:

- a fake Ollama worker and a fake OpenAI-compatible cloud (``interlock.testing``), on loopback;
- ``interlock serve`` with two aliases: ``ow/local`` (the worker) and ``ow/cloud`` (the cloud);
- a recording proxy (``python -m interlock.testing.recorder``) in front of the gateway, so every JSON
  request Open WebUI sends is kept as it was sent;
- ``open-webui serve``, its Ollama connection and its OpenAI connection both at that proxy (each
  connection lists one alias: ``OLLAMA_API_CONFIGS`` / ``OPENAI_API_CONFIGS``), offline, without
  persistent config, without login, without the background title / tag / follow-up chats;
- headless Chromium (the system ``chromium``, driven by Playwright), which opens a new chat per alias,
  types a prompt into Open WebUI's input and waits for the upstream's answer to show in the page.

Prints what each step saw; ``--record DIR`` keeps the recorded requests (``requests.jsonl``) and a
screenshot per chat there. Nothing but 127.0.0.1 is contacted.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson

from interlock.testing.fake_ollama import FakeOllama, ModelSpec
from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.replies import Reply

CLOUD_KEY = "sk-cloud-example-7d2e"
GATEWAY_KEY = "sk-gateway-example"  # what Open WebUI's OpenAI connection sends; the gateway has no keys
PLAN = """\
version: 1
server: {{alias_namespace: ow/}}
providers:
  box:
    kind: ollama
    timeouts: {{connect: 1s, first_byte: 60s, total: 120s}}
    workers: [{{name: box1, url: "{box}"}}]
  boxtools:
    kind: ollama
    timeouts: {{connect: 1s, first_byte: 60s, total: 120s}}
    workers: [{{name: boxtools1, url: "{boxtools}"}}]
  cloud:
    kind: openai
    base_url: "{cloud}/v1"
    api_key_env: CLOUD_KEY
    timeouts: {{connect: 1s, first_byte: 60s, total: 120s}}
  cloudtools:
    kind: openai
    base_url: "{cloudtools}/v1"
    api_key_env: CLOUD_KEY
    timeouts: {{connect: 1s, first_byte: 60s, total: 120s}}
aliases:
  ow/local: {{description: the Ollama worker, chain: [box/llama3.2:3b]}}
  ow/cloud: {{description: the OpenAI-compatible cloud, chain: [cloud/gpt-4o-mini]}}
  ow/local-tools: {{description: the worker calls a tool first, chain: [boxtools/llama3.2:3b]}}
  ow/cloud-tools: {{description: the cloud calls a tool first, chain: [cloudtools/gpt-4o-mini]}}
"""
# The worker's model holds what Open WebUI asks: its built-in tools alone are ~26 kB of schemas (with
# the fake's default 4096-token context the gateway rightly refuses them, naming the context needed).
MODEL = ModelSpec("llama3.2:3b", ("completion", "tools"), context_length=131072, num_ctx=131072)
CHATS = (  # (alias, Open WebUI's connection, the answer the page must show)
    ("ow/local", "ollama", "Hello from box, model llama3.2:3b."),
    ("ow/cloud", "openai", "Hello from cloud, model gpt-4o-mini."),
    # the first answer calls Open WebUI's built-in get_current_timestamp, which Open WebUI runs itself
    # and sends back; the upstream's answer to that turn is what the page then shows
    ("ow/local-tools", "ollama", "Hello from boxtools, model llama3.2:3b."),
    ("ow/cloud-tools", "openai", "Hello from cloudtools, model gpt-4o-mini."),
)
TOOL_CALL = Reply(tool_calls=(("get_current_timestamp", {}),))
PROMPT = "Say hi."
START_S = 600  # bounds on waits: failures, not speed checks (Open WebUI's first start is slow)
ANSWER_S = 120
BROWSER_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for(url: str, timeout_s: float, what: str, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{what} did not answer 200 at {url} within {timeout_s:.0f} s")


@contextmanager
def process(command: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=out, stdin=subprocess.DEVNULL, env=env
        )
        try:
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(20)
            if proc.stdout is not None:
                proc.stdout.close()


def first_line(proc: subprocess.Popen[bytes], what: str, log: Path) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline().decode().strip()
    if not line:
        raise RuntimeError(f"{what} did not start:\n{log.read_text(errors='replace')[-3000:]}")
    return line


def open_webui_env(proxy: str, data: Path, port: int) -> dict[str, str]:
    """Open WebUI's settings: both connections at the proxy, nothing fetched, no login, no side chats."""
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(data),
        "DATA_DIR": str(data),
        "PORT": str(port),
        "WEBUI_SECRET_KEY": "example-secret-not-for-use",
        "WEBUI_AUTH": "False",  # one local admin, no sign-in page
        "OFFLINE_MODE": "true",  # no update checks, no Hugging Face downloads (sets HF_HUB_OFFLINE)
        "HF_HUB_OFFLINE": "1",
        "ENABLE_PERSISTENT_CONFIG": "false",  # the environment wins on every start
        "ENABLE_VERSION_UPDATE_CHECK": "false",
        "RAG_EMBEDDING_ENGINE": "ollama",  # no local SentenceTransformer loaded (or fetched) at start
        "RAG_EMBEDDING_MODEL_AUTO_UPDATE": "false",
        "RAG_RERANKING_MODEL_AUTO_UPDATE": "false",
        "WHISPER_MODEL_AUTO_UPDATE": "false",
        "ENABLE_TITLE_GENERATION": "false",  # only the chat itself goes to the gateway
        "ENABLE_TAGS_GENERATION": "false",
        "ENABLE_FOLLOW_UP_GENERATION": "false",
        "ENABLE_AUTOCOMPLETE_GENERATION": "false",
        "ENABLE_OLLAMA_API": "true",
        "OLLAMA_BASE_URL": proxy,
        "OLLAMA_API_CONFIGS": orjson.dumps({"0": {"model_ids": ["ow/local", "ow/local-tools"]}}).decode(),
        "ENABLE_OPENAI_API": "true",
        "OPENAI_API_BASE_URL": f"{proxy}/v1",
        "OPENAI_API_KEY": GATEWAY_KEY,
        "OPENAI_API_CONFIGS": orjson.dumps({"0": {"model_ids": ["ow/cloud", "ow/cloud-tools"]}}).decode(),
        "RAG_OLLAMA_BASE_URL": proxy,
        "SCARF_NO_ANALYTICS": "true",
        "DO_NOT_TRACK": "true",
        "ANONYMIZED_TELEMETRY": "false",
    }


def chat(page: Any, webui: str, alias: str, expected: str, shots: Path) -> str:
    """A new chat: pick ``alias``, type the prompt into Open WebUI's input, wait for ``expected`` to show."""
    try:
        page.goto(f"{webui}/?models={alias}", timeout=START_S * 1000)
        box = page.locator("#chat-input")
        box.wait_for(state="visible", timeout=ANSWER_S * 1000)
        page.keyboard.press("Escape")  # the "what's new" dialog of a first visit, when it shows
        box.click()
        page.keyboard.type(PROMPT)
        page.keyboard.press("Enter")
        answer = page.get_by_text(expected).first
        answer.wait_for(state="visible", timeout=ANSWER_S * 1000)
        page.screenshot(path=str(shots / f"{alias.replace('/', '_')}.png"))
        shown: str = answer.inner_text()
        return shown
    except Exception:
        page.screenshot(path=str(shots / f"{alias.replace('/', '_')}-failed.png"))
        raise


def summary(rec: dict[str, Any]) -> str:
    body = rec["body"]
    tools = body.get("tools") or []
    names = [t.get("function", t).get("name") for t in tools]
    size = len(orjson.dumps(tools))
    answered = rec["interlock_answered"]["status"]
    return (
        f"{rec['method']} {rec['path']} model={body.get('model')} stream={body.get('stream')} "
        f"messages={[m.get('role') for m in body.get('messages') or []]} tools={len(tools)} ({size} bytes: "
        f"{', '.join(names[:6])}{', ...' if len(names) > 6 else ''}) -> interlock {answered}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--record", type=Path, default=None, help="keep requests.jsonl and screenshots here")
    parser.add_argument(
        "--open-webui",
        default=os.environ.get(
            "OPEN_WEBUI", str(Path.home() / ".cache" / "interlock" / "open-webui" / "bin" / "open-webui")
        ),
    )
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="open-webui-example-"))
    out = args.record or work
    out.mkdir(parents=True, exist_ok=True)
    requests = out / "requests.jsonl"
    requests.unlink(missing_ok=True)
    text = Reply(tool_calls=())  # a text answer, whatever tools Open WebUI offers
    with ExitStack() as stack:
        box = FakeOllama(name="box", models=(MODEL,), reply=text).start()
        stack.callback(box.stop)
        boxtools = FakeOllama(name="boxtools", models=(MODEL,), reply=TOOL_CALL).start()
        stack.callback(boxtools.stop)
        cloud = FakeOpenAI(name="cloud", api_key=CLOUD_KEY, reply=text).start()
        stack.callback(cloud.stop)
        cloudtools = FakeOpenAI(name="cloudtools", api_key=CLOUD_KEY, reply=TOOL_CALL).start()
        stack.callback(cloudtools.stop)
        fakes = {"box": box, "boxtools": boxtools, "cloud": cloud, "cloudtools": cloudtools}
        plan = work / "interlock.yaml"
        plan.write_text(PLAN.format(**{name: fake.url for name, fake in fakes.items()}))
        env = {"PATH": os.environ.get("PATH", ""), "CLOUD_KEY": CLOUD_KEY}
        serve_log = work / "interlock.log"
        gateway_proc = stack.enter_context(
            process([sys.executable, "-m", "interlock", "serve", str(plan), "--port", "0"], env, serve_log)
        )
        gateway = first_line(gateway_proc, "interlock serve", serve_log).split()[2]
        wait_for(f"{gateway}/readyz", 60, "interlock")
        print(f"interlock serving {gateway}, aliases: {', '.join(alias for alias, _, _ in CHATS)}")
        recorder_log = work / "recorder.log"
        recorder_cmd = [sys.executable, "-m", "interlock.testing.recorder", "--target", gateway]
        recorder_cmd += ["--out", str(requests), "--client", "open-webui"]
        recorder = stack.enter_context(process(recorder_cmd, env, recorder_log))
        proxy = first_line(recorder, "the recorder", recorder_log)
        port = free_port()
        webui = f"http://127.0.0.1:{port}"
        data = work / "open-webui-data"
        data.mkdir()
        webui_log = work / "open-webui.log"
        started = time.monotonic()
        owui = stack.enter_context(
            process(
                [args.open_webui, "serve", "--host", "127.0.0.1", "--port", str(port)],
                open_webui_env(proxy, data, port),
                webui_log,
            )
        )
        try:
            wait_for(f"{webui}/health", START_S, "open-webui serve", owui)
        except RuntimeError:
            print(webui_log.read_text(errors="replace")[-4000:], file=sys.stderr)
            raise
        took = time.monotonic() - started
        print(f"open-webui serving {webui} after {took:.0f} s (load average {load_average()})")
        # without login (WEBUI_AUTH=False), a sign-in with no credentials is the local admin's (as the page's)
        token = httpx.post(f"{webui}/api/v1/auths/signin", json={"email": "", "password": ""}, timeout=60)
        auth = {"Authorization": f"Bearer {token.json()['token']}"}
        models = httpx.get(f"{webui}/api/models", headers=auth, timeout=60).json()
        print("open-webui lists:", sorted((m["id"], m.get("owned_by")) for m in models["data"]))
        version = httpx.get(f"{webui}/api/version", timeout=60).json()["version"]
        from playwright.sync_api import sync_playwright

        chromium = os.environ.get("CHROMIUM", "chromium")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=_which(chromium), args=BROWSER_FLAGS)
            try:
                page = browser.new_page()
                errors: list[str] = []
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                for alias, connection, expected in CHATS:
                    shown = chat(page, webui, alias, expected, out)
                    print(
                        f"chat via Open WebUI's {connection} connection, model {alias}: page shows {shown!r}"
                    )
                print(f"page errors: {errors}")
            finally:
                browser.close()
        for name, fake in fakes.items():
            print(f"chats the fake {name} was asked: {_asked(fake)}")
    records = [orjson.loads(line) for line in requests.read_bytes().splitlines()]
    print(f"recorded {len(records)} JSON requests from Open WebUI {version} (in {out}):")
    written: set[Path] = set()
    for rec in records:
        print("  " + summary(rec))
        path = fixture(rec, version, out)
        if path not in written:  # the first of each kind (a tool alias's first turn is a plain one's twin)
            path.write_bytes(orjson.dumps(rec, option=orjson.OPT_INDENT_2) + b"\n")
            written.add(path)


def fixture(rec: dict[str, Any], version: str, out: Path) -> Path:
    """Where ``rec`` goes as a fixture of tests/fixtures/clients/: named by client, version, path, whether
    it offers tools and whether it carries a tool's result back; ``rec`` gets its ``client``."""
    rec["client"] = f"open-webui-{version}"
    tools = "_builtin-tools" if rec["body"].get("tools") else ""
    result = "_tool-result" if any(m.get("role") == "tool" for m in rec["body"].get("messages") or ()) else ""
    return out / f"open-webui-{version}_{rec['path'].strip('/').replace('/', '_')}{tools}{result}.json"


def _asked(fake: Any) -> list[str]:
    """The chat requests ``fake`` got, each as its path, model and the roles of its messages."""
    chats = [r for r in fake.requests if r.path in ("/api/chat", "/v1/chat/completions")]
    return [f"{r.path} {r.model} {[m.get('role') for m in r.body.get('messages', [])]}" for r in chats]


def _which(name: str) -> str:
    import shutil

    found = shutil.which(name)
    if found is None:
        raise SystemExit(f"no `{name}` on PATH (apt-get install chromium)")
    return found


def load_average() -> str:
    """The machine's load average over 1, 5 and 15 minutes (Open WebUI's start time depends on it)."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


if __name__ == "__main__":
    main()
