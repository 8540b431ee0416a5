"""The alert path's real parts for tests: Prometheus and Alertmanager (Debian's packages, unpacked
by .ci/run into ~/.cache/spanassert/prometheus-<version>/), a webhook receiver, and the shipped
configs from collector-config/ with only addresses and intervals changed.

Every process listens on 127.0.0.1 on a free port, every wait has a deadline, and ``close()``
stops what was started (SIGTERM, then SIGKILL), also after a failed assertion.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import yaml

REPO = Path(__file__).resolve().parents[2]
ALERTS_DIR = REPO / "collector-config" / "alerts"
ALERT_RULES = ALERTS_DIR / "spanassert-alerts.yaml"
PROMETHEUS_CONFIG = ALERTS_DIR / "prometheus.yaml"
ALERTMANAGER_CONFIG = ALERTS_DIR / "alertmanager.yaml"
DASHBOARD = REPO / "collector-config" / "dashboards" / "spanassert.json"

START_TIMEOUT = 30.0
STOP_TIMEOUT = 15.0

# The intervals the test runs with (the shipped files say 15s / 10s; only these values change).
SCRAPE_INTERVAL = "1s"
EVALUATION_INTERVAL = "1s"
GROUP_WAIT = "1s"
GROUP_INTERVAL = "1s"
METRIC_EXPORT_INTERVAL_MS = 500


def _cached(binary: str) -> Optional[str]:
    """``binary`` from the newest unpacked package in the cache (``.ci/run`` puts it there)."""
    root = Path(os.environ.get("SPANASSERT_PROMETHEUS_CACHE") or Path.home() / ".cache" / "spanassert")
    found = sorted(glob.glob(str(root / "prometheus-*" / "usr" / "bin" / binary)))
    return found[-1] if found else None


def find_binaries() -> Tuple[Optional[str], Optional[str]]:
    """(prometheus, alertmanager): environment, then the cache, then PATH."""
    prom = os.environ.get("SPANASSERT_PROMETHEUS") or _cached("prometheus") or shutil.which("prometheus")
    am = (os.environ.get("SPANASSERT_ALERTMANAGER") or _cached("prometheus-alertmanager")
          or shutil.which("prometheus-alertmanager") or shutil.which("alertmanager"))
    return prom, am


def http_get(url: str, timeout: float = 5.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return bytes(response.read())


class Webhook:
    """Alertmanager's webhook receiver: every POST body, parsed, with the wall time it arrived."""

    def __init__(self) -> None:
        self.received: List[Tuple[float, str, Dict[str, Any]]] = []
        self._cond = threading.Condition()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(min(length, 1 << 20))
                arrived = time.time()
                try:
                    doc = json.loads(body)
                except ValueError:
                    doc = {"unparsable": body.decode("utf-8", "replace")}
                with outer._cond:
                    outer.received.append((arrived, self.path, doc))
                    outer._cond.notify_all()
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.server.server_address[1])
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def wait_for(self, predicate: Any, timeout: float) -> Tuple[float, str, Dict[str, Any], Dict[str, Any]]:
        """The first (arrival, path, notification, alert) whose alert satisfies ``predicate``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for arrived, path, doc in self.received:
                    for alert in doc.get("alerts") or []:
                        if predicate(doc, alert):
                            return arrived, path, doc, alert
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no matching notification within {timeout:.0f}s; received: "
                                         f"{json.dumps([d for _, _, d in self.received], indent=1)[:4000]}")
                self._cond.wait(min(left, 0.5))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Process:
    """One server process with its log in a file."""

    def __init__(self, name: str, args: List[str], workdir: Path, env: Optional[Dict[str, str]] = None) -> None:
        self.name = name
        self.log_path = workdir / f"{name}.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, cwd=str(workdir),
                                     env=env if env is not None else dict(os.environ))

    def log(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-6000:]
        except OSError:
            return ""

    def wait_http_ok(self, url: str, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited with {self.proc.returncode} at startup:\n{self.log()}")
            try:
                http_get(url, timeout=2)
                return
            except OSError as exc:
                last = str(exc)
            time.sleep(0.1)
        raise AssertionError(f"{self.name} not ready at {url} after {timeout:.0f}s ({last}):\n{self.log()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()


def alertmanager_config(webhook: Webhook) -> Dict[str, Any]:
    """The shipped route, with the receivers' URLs on the local webhook and short group waits."""
    config = yaml.safe_load(ALERTMANAGER_CONFIG.read_text(encoding="utf-8"))
    for receiver in config["receivers"]:
        for hook in receiver.get("webhook_configs") or []:
            hook["url"] = webhook.url(urllib.parse.urlparse(hook["url"]).path)
    routes = [config["route"], *config["route"].get("routes", [])]
    for route in routes:
        for key, value in (("group_wait", GROUP_WAIT), ("group_interval", GROUP_INTERVAL)):
            if key in route:
                route[key] = value
    return dict(config)


def prometheus_config(scrape_target: str, alertmanager: str) -> Dict[str, Any]:
    """The shipped Prometheus config: the same rules file, our targets, short intervals."""
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text(encoding="utf-8"))
    config["global"]["scrape_interval"] = SCRAPE_INTERVAL
    config["global"]["evaluation_interval"] = EVALUATION_INTERVAL
    config["rule_files"] = [str(ALERTS_DIR / f) for f in config["rule_files"]]
    config["alerting"]["alertmanagers"][0]["static_configs"] = [{"targets": [alertmanager]}]
    assert len(config["scrape_configs"]) == 1
    config["scrape_configs"][0]["static_configs"] = [{"targets": [scrape_target]}]
    return dict(config)


class AlertStack:
    """Webhook <- Alertmanager <- Prometheus (scraping ``scrape_target``)."""

    def __init__(self, workdir: Path, scrape_target: str, free_port: Any) -> None:
        prom, am = find_binaries()
        assert prom and am, "prometheus / prometheus-alertmanager not found"
        self.webhook = Webhook()
        self.processes: List[Process] = []
        workdir.mkdir(parents=True, exist_ok=True)
        try:
            am_port, prom_port = free_port(), free_port()
            am_conf = workdir / "alertmanager.yaml"
            am_conf.write_text(yaml.safe_dump(alertmanager_config(self.webhook)), encoding="utf-8")
            (workdir / "am-data").mkdir()
            self.alertmanager = Process("alertmanager", [
                am, f"--config.file={am_conf}", f"--storage.path={workdir / 'am-data'}",
                f"--web.listen-address=127.0.0.1:{am_port}", "--cluster.listen-address=",
                "--log.level=info"], workdir)
            self.processes.append(self.alertmanager)
            self.alertmanager_url = f"http://127.0.0.1:{am_port}"
            prom_conf = workdir / "prometheus.yaml"
            prom_conf.write_text(yaml.safe_dump(prometheus_config(scrape_target, f"127.0.0.1:{am_port}")),
                                 encoding="utf-8")
            (workdir / "prom-data").mkdir()
            self.prometheus = Process("prometheus", [
                prom, f"--config.file={prom_conf}", f"--storage.tsdb.path={workdir / 'prom-data'}",
                f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=info"], workdir)
            self.processes.append(self.prometheus)
            self.prometheus_url = f"http://127.0.0.1:{prom_port}"
            self.alertmanager.wait_http_ok(self.alertmanager_url + "/-/ready")
            self.prometheus.wait_http_ok(self.prometheus_url + "/-/ready")
        except BaseException:
            self.close()
            raise

    def query(self, promql: str) -> List[Dict[str, Any]]:
        """An instant query; fails on any error Prometheus reports (a bad dashboard query too)."""
        url = self.prometheus_url + "/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        try:
            doc = json.loads(http_get(url))
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"Prometheus refused {promql!r}: {exc.read().decode('utf-8', 'replace')}") from None
        assert doc.get("status") == "success", f"{promql!r}: {doc}"
        return list(doc["data"]["result"]) if doc["data"]["resultType"] == "vector" else [doc["data"]["result"]]

    def wait_query(self, promql: str, timeout: float) -> List[Dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while True:
            result = self.query(promql)
            if result:
                return result
            if time.monotonic() > deadline:
                raise AssertionError(f"{promql!r} stayed empty for {timeout:.0f}s\n--- prometheus ---\n"
                                     f"{self.prometheus.log()}")
            time.sleep(0.25)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name} ---\n{p.log()}" for p in self.processes)

    def close(self) -> None:
        for p in reversed(self.processes):
            p.stop()
        self.webhook.close()


def dashboard_queries(range_: str = "10m", rate_interval: str = "1m") -> List[Tuple[str, str]]:
    """(panel title, PromQL) of every target of the shipped dashboard, with Grafana's variables
    given values the way Grafana would ($job = All)."""
    doc = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    out = []
    for panel in doc["panels"]:
        for target in panel.get("targets", []):
            expr = (target["expr"].replace("$__rate_interval", rate_interval).replace("$__range", range_)
                    .replace("$job", ".*"))
            assert "$" not in expr, f"dashboard query with a variable the test does not know: {expr}"
            out.append((panel["title"], expr))
    return out
