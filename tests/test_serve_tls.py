"""serve's safe defaults and transport security: listens on localhost unless told otherwise; TLS
(certificate + key) and mutual TLS (client CA) on both doors, and a bearer token, the way the
Collector's configtls and bearertokenauth do it; no version banner. Certificates are made by the
test with the openssl command line."""
from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import grpc
import pytest

from test_serve_receiver import Serve, json_episode, json_request

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
BODY = json.dumps(json_request(json_episode(0, [("search", None)]))).encode()


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: Any) -> Dict[str, Path]:
    """A CA, a server certificate for localhost / 127.0.0.1, a client certificate from the same CA
    and one from another CA."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")
    d = tmp_path_factory.mktemp("pki")
    p = {k: d / f"{k}.pem" for k in ("ca", "ca_key", "server", "server_key", "client", "client_key",
                                     "other_ca", "other_ca_key", "intruder", "intruder_key")}
    for ca, key, cn in (("ca", "ca_key", "test CA"), ("other_ca", "other_ca_key", "other CA")):
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={cn}",
                 "-keyout", str(p[key]), "-out", str(p[ca]))
    ext = d / "server.ext"
    ext.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    cext = d / "client.ext"
    cext.write_text("extendedKeyUsage=clientAuth\n")
    for name, key, ca, ca_key, e, cn in (("server", "server_key", "ca", "ca_key", ext, "localhost"),
                                         ("client", "client_key", "ca", "ca_key", cext, "agent"),
                                         ("intruder", "intruder_key", "other_ca", "other_ca_key", cext, "intruder")):
        csr = d / f"{name}.csr"
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={cn}", "-keyout", str(p[key]), "-out", str(csr))
        _openssl("x509", "-req", "-in", str(csr), "-CA", str(p[ca]), "-CAkey", str(p[ca_key]), "-CAcreateserial",
                 "-days", "2", "-extfile", str(e), "-out", str(p[name]))
    return p


def _client_context(pki: Dict[str, Path], cert: Optional[str] = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki["ca"]))
    if cert:
        ctx.load_cert_chain(str(pki[cert]), str(pki[cert + "_key"]))
    return ctx


def _post(url: str, *, context: Optional[ssl.SSLContext] = None, token: Optional[str] = None) -> Tuple[int, Dict[str, str]]:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=BODY, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10, context=context) as resp:
            return resp.status, dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers)


def _grpc_export(target: str, creds: Optional[grpc.ChannelCredentials], token: Optional[str] = None) -> grpc.StatusCode:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    channel = grpc.secure_channel(target, creds) if creds is not None else grpc.insecure_channel(target)
    with channel:
        export = channel.unary_unary(EXPORT)
        md = (("authorization", f"Bearer {token}"),) if token is not None else None
        try:
            export(ExportTraceServiceRequest().SerializeToString(), timeout=10, metadata=md)
            return grpc.StatusCode.OK
        except grpc.RpcError as err:
            return err.code()


def _grpc_creds(pki: Dict[str, Path], cert: Optional[str] = None) -> grpc.ChannelCredentials:
    key = pki[cert + "_key"].read_bytes() if cert else None
    chain = pki[cert].read_bytes() if cert else None
    return grpc.ssl_channel_credentials(root_certificates=pki["ca"].read_bytes(), private_key=key,
                                        certificate_chain=chain)


def _localhost(addr: str) -> str:
    return "localhost:" + addr.rsplit(":", 1)[1]


def test_default_endpoints_are_localhost_and_help_says_so() -> None:
    out = subprocess.run([sys.executable, "-m", "spanassert.cli", "serve", "--help"], capture_output=True, text=True,
                         timeout=60).stdout
    flat = " ".join(out.split())
    assert "default localhost:4317" in flat and "default localhost:4318" in flat
    assert "0.0.0.0:4317" in flat  # how to listen on every interface is said too
    from spanassert.serve.protocol import DEFAULT_GRPC_ENDPOINT, DEFAULT_HTTP_ENDPOINT

    assert (DEFAULT_GRPC_ENDPOINT, DEFAULT_HTTP_ENDPOINT) == ("localhost:4317", "localhost:4318")


def test_server_header_carries_no_version(tmp_path: Path) -> None:
    s = Serve(tmp_path)
    try:
        status, headers = _post(s.url + "/v1/traces")
    finally:
        s.kill()
    assert status == 200
    assert headers["Server"] == "spanassert"


def test_tls_on_both_doors_and_plaintext_is_refused(tmp_path: Path, pki: Dict[str, Path]) -> None:
    s = Serve(tmp_path, "--tls-cert", str(pki["server"]), "--tls-key", str(pki["server_key"]))
    try:
        https = f"https://{_localhost(s.http)}/v1/traces"
        assert _post(https, context=_client_context(pki))[0] == 200
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            _post(s.url + "/v1/traces")  # plain HTTP to the TLS port
        assert _grpc_export(_localhost(s.grpc), _grpc_creds(pki)) is grpc.StatusCode.OK
        assert _grpc_export(s.grpc, None) is grpc.StatusCode.UNAVAILABLE
        code, _, report = s.stop()
    finally:
        s.kill()
    assert code == 0 and len(report["episodes"]) == 1
    assert "Traceback" not in s.stderr()


def test_mutual_tls_refuses_clients_without_a_certificate_from_the_client_ca(tmp_path: Path, pki: Dict[str, Path]) -> None:
    s = Serve(tmp_path, "--tls-cert", str(pki["server"]), "--tls-key", str(pki["server_key"]),
              "--tls-client-ca", str(pki["ca"]))
    try:
        https = f"https://{_localhost(s.http)}/v1/traces"
        assert _post(https, context=_client_context(pki, "client"))[0] == 200
        for cert in (None, "intruder"):
            with pytest.raises((urllib.error.URLError, ConnectionError, OSError, ssl.SSLError)):
                _post(https, context=_client_context(pki, cert))
        target = _localhost(s.grpc)
        assert _grpc_export(target, _grpc_creds(pki, "client")) is grpc.StatusCode.OK
        assert _grpc_export(target, _grpc_creds(pki)) is grpc.StatusCode.UNAVAILABLE
        assert _grpc_export(target, _grpc_creds(pki, "intruder")) is grpc.StatusCode.UNAVAILABLE
        code, _, _ = s.stop()
    finally:
        s.kill()
    assert code == 0
    assert "Traceback" not in s.stderr()


def test_bearer_token_is_required_on_both_doors(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token\n")
    (tmp_path / "s").mkdir()
    s = Serve(tmp_path / "s", "--bearer-token-file", str(token_file))
    try:
        url = s.url + "/v1/traces"
        assert _post(url)[0] == 401
        status, headers = _post(url, token="wrong")
        assert status == 401 and headers.get("WWW-Authenticate", "").startswith("Bearer")
        assert _post(url, token="s3cret-token")[0] == 200
        assert _grpc_export(s.grpc, None) is grpc.StatusCode.UNAUTHENTICATED
        assert _grpc_export(s.grpc, None, token="wrong") is grpc.StatusCode.UNAUTHENTICATED
        assert _grpc_export(s.grpc, None, token="s3cret-token") is grpc.StatusCode.OK
        code, _, report = s.stop()
    finally:
        s.kill()
    assert code == 0 and len(report["episodes"]) == 1
    assert "s3cret-token" not in s.stderr()


def test_unusable_tls_options_exit_2_naming_the_option(tmp_path: Path, pki: Dict[str, Path]) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("version: 1\ntests:\n  - id: t\n    assertions:\n      - {type: trace_must_not_call_tool, tool: x}\n")
    cases = {
        ("--tls-cert", str(pki["server"])): "--tls-cert and --tls-key go together",
        ("--tls-cert", str(pki["server"]), "--tls-key", str(pki["client_key"])): "not a matching",
        ("--tls-cert", str(tmp_path / "missing.pem"), "--tls-key", str(pki["server_key"])): "cannot read",
        ("--tls-client-ca", str(pki["ca"])): "needs --tls-cert",
        ("--bearer-token-file", str(tmp_path / "missing")): "--bearer-token-file",
    }
    for args, expected in cases.items():
        proc = subprocess.run([sys.executable, "-m", "spanassert.cli", "serve", "--config", str(rules),
                               "--grpc-endpoint", "127.0.0.1:0", "--http-endpoint", "127.0.0.1:0", *args],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, (args, proc.stderr)
        assert expected in proc.stderr, (args, proc.stderr)
