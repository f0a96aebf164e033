"""labkit's process handling, with real processes and signals (`slow`: make test runs these, make check does not):
a lab stopped by Ctrl-C, and labkit.serve, the helper a lab uses to start a server and wait for it, against a
stand-in server.

The stand-in is a real process (Python's http.server answering ``GET /health``) that starts a child of
its own, as ``vllm serve`` starts its engine core, and on SIGTERM stops that child first, as vLLM does.
No vLLM here: the lab test (tests/test_labs.py) runs the real ``vllm serve``; these tests show that the
server and its child are gone after the block ends normally, on Ctrl-C, and when the lab is killed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import ROOT, cpu_build_site, labkit_argv
from infercourse import snippets

labkit = snippets.load("labs/labkit")

STAND_IN = """
import http.server, os, signal, subprocess, sys
if sys.argv[2] == "fail":
    print("RuntimeError: the stand-in refuses to start", flush=True)
    sys.exit(1)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print("PIDS", os.getpid(), child.pid, flush=True)
def stop(*_):
    child.terminate(); child.wait(); sys.exit(0)
signal.signal(signal.SIGTERM, stop)
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404); self.end_headers()
    def log_message(self, *args): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()
"""


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its parent to reap it does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, IndexError):
        return False


def _pids(log: Path) -> list[int]:
    line = next(line for line in log.read_text().splitlines() if line.startswith("PIDS "))
    return [int(p) for p in line.split()[1:]]


def _gone(pids: list[int], within_s: float = 10) -> bool:
    deadline = time.monotonic() + within_s
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not any(_alive(p) for p in pids)


def _stand_in(tmp_path: Path, port: int, mode: str = "ok") -> list[str]:
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    return [sys.executable, str(script), str(port), mode]


def test_serve_waits_for_health_and_stops_the_server_and_its_child_on_ctrl_c(tmp_path):
    port, log = labkit.free_port(), tmp_path / "server.log"
    with pytest.raises(KeyboardInterrupt), labkit.serve(_stand_in(tmp_path, port), port, log) as (url, start_s):
        assert url == f"http://127.0.0.1:{port}" and start_s >= 0
        with urllib.request.urlopen(f"{url}/health", timeout=5) as answer:
            assert answer.status == 200
        pids = _pids(log)
        assert all(_alive(p) for p in pids) and not labkit.port_free(port)
        raise KeyboardInterrupt  # what Ctrl-C raises in the lab
    assert _gone(pids) and labkit.port_free(port)


def test_serve_stops_the_server_when_the_block_ends(tmp_path):
    port, log = labkit.free_port(), tmp_path / "server.log"
    with labkit.serve(_stand_in(tmp_path, port), port, log):
        pids = _pids(log)
    assert _gone(pids) and labkit.port_free(port)


def test_a_server_that_dies_before_it_is_ready_is_one_line_with_its_cause(tmp_path, capsys):
    port, log = labkit.free_port(), tmp_path / "server.log"
    with pytest.raises(SystemExit) as stop, labkit.serve(_stand_in(tmp_path, port, "fail"), port, log):
        pass
    assert stop.value.code == 3
    line = capsys.readouterr().err.strip()
    assert line == (
        "error: the server stopped (exit 1) before it was ready: RuntimeError: the stand-in refuses to start "
        f"(log: {log})"
    )


def test_a_port_in_use_is_refused_before_anything_starts(tmp_path, capsys):
    port = labkit.free_port()
    with labkit.serve(_stand_in(tmp_path, port), port, tmp_path / "a.log"):
        with pytest.raises(SystemExit) as stop, labkit.serve(_stand_in(tmp_path, port), port, tmp_path / "b.log"):
            pass
        assert not (tmp_path / "b.log").exists()
    assert stop.value.code == 2
    assert capsys.readouterr().err.strip() == (
        f"error: port {port} on 127.0.0.1 is in use; pass another --port (0 picks a free one)"
    )


LAB = """
import sys, time
sys.path.insert(0, {labs!r})
import labkit
port = labkit.free_port()
with labkit.serve({command!r} + [str(port), "ok"], port, __import__("pathlib").Path({log!r})):
    print("READY", flush=True)
    time.sleep(600)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_lab_that_is_stopped_or_killed_takes_its_server_with_it(tmp_path, sig):
    """SIGTERM (a polite stop): labkit.serve's own cleanup; SIGKILL (``run_labs.py``'s timeout): the
    kernel sends the server SIGTERM when the lab dies (PR_SET_PDEATHSIG)."""
    log = tmp_path / "server.log"
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    lab = tmp_path / "lab.py"
    lab.write_text(
        LAB.format(labs=str(ROOT / "snippets" / "labs"), command=[sys.executable, str(script)], log=str(log))
    )
    proc = subprocess.Popen([sys.executable, str(lab)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "READY"
        pids = _pids(log)
        assert all(_alive(p) for p in pids)
        os.kill(proc.pid, sig)
        proc.wait(timeout=60)
        assert _gone(pids), json.dumps({"alive": [p for p in pids if _alive(p)]})
    finally:
        proc.kill()


def test_serve_says_in_one_line_why_a_server_stopped_and_leaves_nothing_running(tmp_path, capsys):
    """This environment has no vLLM: the server process stops at its import, and serve() names the cause."""
    log, port = tmp_path / "serve.log", labkit.free_port()
    command = labkit.vllm_cli("serve", "some/model", "--port", str(port), "--max-model-len", "512")
    with pytest.raises(SystemExit) as exit_, labkit.serve(command, port, log, timeout_s=120):
        pytest.fail("the block must not run: the server never became healthy")
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 3 and len(err.splitlines()) == 1, err
    assert "before it was ready: ModuleNotFoundError: No module named 'vllm'" in err and str(log) in err


def test_served_metric_totals_reads_prometheus_text():
    """Two engines' label sets: histogram sum 300 + 108 = 408 and count 7 + 5 = 12; counter 3 + 2 = 5."""
    import http.server
    import threading

    page = (
        b"# HELP vllm:iteration_tokens_total Histogram of number of tokens per engine_step.\n"
        b"# TYPE vllm:iteration_tokens_total histogram\n"
        b'vllm:iteration_tokens_total_bucket{engine="0",le="1.0",model_name="m"} 2.0\n'
        b'vllm:iteration_tokens_total_sum{engine="0",model_name="m"} 300.0\n'
        b'vllm:iteration_tokens_total_count{engine="0",model_name="m"} 7.0\n'
        b'vllm:iteration_tokens_total_sum{engine="1",model_name="m"} 108.0\n'
        b'vllm:iteration_tokens_total_count{engine="1",model_name="m"} 5.0\n'
        b"# TYPE vllm:request_success counter\n"
        b'vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 3.0\n'
        b'vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 2.0\n'
        b'vllm:request_success_created{engine="0",finished_reason="stop",model_name="m"} 1.7e9\n'
    )

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the standard library's name)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}"
    try:
        assert labkit.served_metric_totals(url, "vllm:iteration_tokens_total") == (408.0, 12.0)
        assert labkit.served_metric_totals(url, "vllm:request_success") == (5.0, 0)
        with pytest.raises(SystemExit):
            labkit.served_metric_totals(url, "vllm:num_preemptions")
    finally:
        server.shutdown()


def test_ctrl_c_in_a_lab_is_one_line_not_a_traceback(tmp_path):
    """A real SIGINT to a lab after labkit.prepare (what Ctrl-C in its terminal sends): one line on stderr naming the
    lab and vLLM's log, no traceback, and the process ends as one stopped by SIGINT (130 in a shell)."""
    code = (
        "import time, argparse\n"
        "labkit.prepare(argparse.Namespace(lab='demo', receipt=None, verbose=False))\n"
        "print('READY', flush=True); time.sleep(60)"
    )
    lab = subprocess.Popen(
        labkit_argv(code, cpu_build_site(tmp_path)),
        env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # started as a script's background job is (bash without job control): SIGINT ignored, inherited
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    for line in lab.stdout:  # wait until prepare() has run
        if "READY" in line:
            break
    lab.send_signal(signal.SIGINT)
    _, err = lab.communicate(timeout=60)
    assert lab.returncode == -signal.SIGINT, err
    assert len(err.splitlines()) == 1 and err.startswith("interrupted: demo stopped before it wrote its receipt; ")
    assert "vLLM's log: " + str(tmp_path) in err
