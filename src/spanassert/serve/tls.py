"""Transport security for both doors, the way the Collector's ``configtls`` and ``bearertokenauth``
do it: a certificate and key (TLS), optionally a client CA (mutual TLS: clients without a
certificate signed by it are refused in the handshake), and optionally a bearer token that every
request must carry (``Authorization: Bearer <token>``; gRPC metadata ``authorization``)."""
from __future__ import annotations

import hmac
import os
import ssl
from typing import Any, Optional

BEARER_TOKEN_ENV = "SPANASSERT_SERVE_BEARER_TOKEN"


class TLSConfigError(ValueError):
    """A TLS or token option that cannot be used, with how to fix it."""


class Security:
    """What the doors enforce: TLS material (PEM bytes) and the expected bearer token."""

    __slots__ = ("files", "cert", "key", "client_ca", "token")

    def __init__(self, files: Optional[TLSFiles] = None, cert: Optional[bytes] = None, key: Optional[bytes] = None,
                 client_ca: Optional[bytes] = None, token: Optional[str] = None) -> None:
        self.files = files or TLSFiles()
        self.cert = cert
        self.key = key
        self.client_ca = client_ca
        self.token = token

    @property
    def tls(self) -> bool:
        return self.cert is not None

    def http_context(self) -> ssl.SSLContext:
        f = self.files
        assert f.cert_file and f.key_file
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(f.cert_file, f.key_file)
        if f.client_ca_file:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(cafile=f.client_ca_file)
        return ctx

    def grpc_credentials(self) -> Any:
        import grpc

        assert self.cert is not None and self.key is not None
        return grpc.ssl_server_credentials([(self.key, self.cert)], root_certificates=self.client_ca,
                                           require_client_auth=self.client_ca is not None)

    def authorized(self, header: Optional[str]) -> bool:
        """Whether an ``Authorization`` value carries the token (always True without a token)."""
        if self.token is None:
            return True
        if not header:
            return False
        scheme, _, value = header.strip().partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(value.strip().encode("utf-8", "replace"), self.token.encode("utf-8"))


def _read(path: str, option: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise TLSConfigError(f"{option} {path}: cannot read it ({exc.strerror or exc})") from None


class TLSFiles:
    """The TLS options as given (file paths), checked and loaded by :func:`load_security`."""

    __slots__ = ("cert_file", "key_file", "client_ca_file", "token_file")

    def __init__(self, cert_file: Optional[str] = None, key_file: Optional[str] = None,
                 client_ca_file: Optional[str] = None, token_file: Optional[str] = None) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self.client_ca_file = client_ca_file
        self.token_file = token_file


def load_security(files: TLSFiles) -> Security:
    """Read and check the TLS and token options; raises :class:`TLSConfigError` naming the option."""
    if bool(files.cert_file) != bool(files.key_file):
        raise TLSConfigError("--tls-cert and --tls-key go together: pass both (PEM files) or neither")
    if files.client_ca_file and not files.cert_file:
        raise TLSConfigError("--tls-client-ca needs --tls-cert and --tls-key (mutual TLS is TLS first)")
    sec = Security(files)
    if files.cert_file and files.key_file:
        sec.cert = _read(files.cert_file, "--tls-cert")
        sec.key = _read(files.key_file, "--tls-key")
        if files.client_ca_file:
            sec.client_ca = _read(files.client_ca_file, "--tls-client-ca")
        try:
            sec.http_context()
        except (ssl.SSLError, ValueError, OSError) as exc:
            raise TLSConfigError(f"--tls-cert {files.cert_file} / --tls-key {files.key_file} / --tls-client-ca "
                                 f"{files.client_ca_file or '-'}: not a matching PEM certificate and private key, or "
                                 f"not PEM CA certificates ({exc})") from None
    token: Optional[str] = None
    if files.token_file:
        token = _read(files.token_file, "--bearer-token-file").decode("utf-8", "replace").strip()
        if not token:
            raise TLSConfigError(f"--bearer-token-file {files.token_file}: the file is empty")
    elif os.environ.get(BEARER_TOKEN_ENV, "").strip():
        token = os.environ[BEARER_TOKEN_ENV].strip()
    if token is not None and (any(c.isspace() for c in token) or not token.isprintable()):
        raise TLSConfigError("the bearer token holds whitespace or control characters; use a plain token")
    sec.token = token
    return sec


__all__ = ["BEARER_TOKEN_ENV", "Security", "TLSConfigError", "TLSFiles", "load_security"]
