"""nsqd's TLS configuration: the server context (TCP upgrade and HTTPS) and the client one.

Mirrors nsqd's ``buildTLSConfig`` and ``buildClientTLSConfig`` (nsqd/nsqd.go):

* TLS is available when ``--tls-cert`` and ``--tls-key`` are set; IDENTIFY then
  answers ``tls_v1: true`` to clients that ask, and ``--https-address`` serves
  the HTTP API over TLS.
* ``--tls-client-auth-policy``: ``require`` and ``require-verify`` make the
  server ask for a client certificate and refuse the handshake without one;
  anything else asks for none.
* ``--tls-root-ca-file`` is the CA client certificates are checked against,
  and the CA the auth client trusts.
* ``--tls-min-version`` sets the lowest protocol version.

Differences Python's :mod:`ssl` imposes (OpenSSL has no "any certificate"
mode and no per-connection verify callback):

* ``require`` verifies the client certificate like ``require-verify`` does
  (against ``--tls-root-ca-file``, else the system's CAs), where Go accepts
  any certificate without checking who signed it.
* ``tls1.0`` and ``tls1.1`` leave Python's floor (TLS 1.2) in place: OpenSSL 3
  refuses the older versions at its default security level anyway, and asking
  for them is deprecated in Python.
"""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from ..domain.options import NSQDOptions

__all__ = ["client_context", "peer_common_name", "server_context"]

#: --tls-min-version values Python lets us raise the floor to.
_MIN_VERSIONS: Final = {"tls1.2": ssl.TLSVersion.TLSv1_2, "tls1.3": ssl.TLSVersion.TLSv1_3}
#: --tls-client-auth-policy values that ask clients for a certificate.
CLIENT_CERT_POLICIES: Final = ("require", "require-verify")


class TLSConfigError(ValueError):
    """The TLS options cannot be turned into a context (nsqd exits at start)."""


def _set_min_version(context: ssl.SSLContext, version: str) -> None:
    minimum = _MIN_VERSIONS.get(version.lower())
    if minimum is not None:
        context.minimum_version = minimum


def server_context(options: NSQDOptions) -> ssl.SSLContext | None:
    """The server side of TLS, or None when no certificate is configured.

    Raises :class:`TLSConfigError` with nsqd's wording when the files cannot be
    loaded.
    """
    if not options.tls_cert and not options.tls_key:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        if not options.tls_cert or not options.tls_key:
            # Go's LoadX509KeyPair needs both files; Python would look for the key in the cert
            missing = "" if not options.tls_cert else options.tls_key
            raise FileNotFoundError(f"open {missing}: no such file or directory")
        context.load_cert_chain(options.tls_cert, options.tls_key)
        if options.tls_client_auth_policy in CLIENT_CERT_POLICIES:
            context.verify_mode = ssl.CERT_REQUIRED
            if options.tls_root_ca_file:
                context.load_verify_locations(cafile=options.tls_root_ca_file)
            else:
                context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    except (OSError, ssl.SSLError) as exc:
        raise TLSConfigError(f"failed to build TLS config - {exc}") from exc
    _set_min_version(context, options.tls_min_version)
    return context


def client_context(options: NSQDOptions) -> ssl.SSLContext:
    """What nsqd's own HTTPS requests (to auth servers) trust: the root CA file, else the system."""
    try:
        context = ssl.create_default_context(cafile=options.tls_root_ca_file or None)
    except (OSError, ssl.SSLError) as exc:
        raise TLSConfigError(f"failed to build client TLS config - {exc}") from exc
    _set_min_version(context, options.tls_min_version)
    return context


def peer_common_name(tls: Any) -> str:
    """The subject common name of the peer's (verified) certificate, or ``""``.

    ``tls`` is an :class:`ssl.SSLObject` or a :class:`trio.SSLStream`. Python
    only reports the subject of a certificate it verified, which is every
    certificate the server asked for (see the module doc).
    """
    try:
        cert = tls.getpeercert()
    except (ValueError, AttributeError):
        return ""
    for rdn in (cert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return ""
