"""Throwaway credentials for one embedded cluster.

Everything is made fresh per cluster and written 0600 into the cluster's
private directory: a CA, serving certificates for etcd and kube-apiserver,
client certificates (apiserver -> etcd, the admin, the controller-manager),
the ServiceAccount token signing key, and a bearer token for the same admin
(kube-apiserver's token file). ECDSA P-256 keeps generation instant.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=2)
_LOOPBACK_SANS = [
    x509.DNSName("localhost"),
    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
]


_ADMIN = "inferencepool-conformance-admin"


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


@dataclass(frozen=True)
class KeyPair:
    cert: Path
    key: Path


@dataclass(frozen=True)
class ClusterPKI:
    ca: Path
    etcd_server: KeyPair
    etcd_client: KeyPair
    apiserver: KeyPair
    admin: KeyPair
    controller_manager: KeyPair
    sa_key: Path
    sa_pub: Path
    admin_token: str
    tokens: Path  # kube-apiserver's --token-auth-file: the admin_token, for the admin's user and groups


class _CA:
    def __init__(self) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "inferencepool-conformance-ca")])
        self.name = name
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True, key_cert_sign=True, crl_sign=True,
                    content_commitment=False, key_encipherment=False, data_encipherment=False,
                    key_agreement=False, encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )
            .sign(self.key, hashes.SHA256())
        )

    def issue(self, cn: str, *, org: str | None = None, server: bool = False, client: bool = False):
        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
        if org:
            attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
        usages = []
        if server:
            usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
        if client:
            usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attrs))
            .issuer_name(self.name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        )
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName(_LOOPBACK_SANS), critical=False)
        return key, builder.sign(self.key, hashes.SHA256())


def self_signed_server(directory: Path, cn: str) -> KeyPair:
    """A self-signed serving certificate for `cn` as `tls.crt` and `tls.key` in `directory` (the names a
    kubernetes.io/tls Secret mounts), for a server whose clients do not verify it."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    pair = KeyPair(directory / "tls.crt", directory / "tls.key")
    _write_private(pair.cert, _cert_pem(cert))
    _write_private(pair.key, _key_pem(key))
    return pair


def generate(directory: Path) -> ClusterPKI:
    """Create all credentials of one cluster in `directory` (which must be private)."""
    ca = _CA()
    ca_path = directory / "ca.crt"
    _write_private(ca_path, _cert_pem(ca.cert))

    def pair(stem: str, cn: str, **kw) -> KeyPair:
        key, cert = ca.issue(cn, **kw)
        kp = KeyPair(directory / f"{stem}.crt", directory / f"{stem}.key")
        _write_private(kp.cert, _cert_pem(cert))
        _write_private(kp.key, _key_pem(key))
        return kp

    sa = ec.generate_private_key(ec.SECP256R1())
    sa_key, sa_pub = directory / "sa.key", directory / "sa.pub"
    _write_private(sa_key, _key_pem(sa))
    _write_private(
        sa_pub,
        sa.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    )
    # The admin's clients present this token rather than the certificate: kube-apiserver would check
    # the certificate's signature on every request, about 6 % of its CPU in a run.
    admin_token = secrets.token_urlsafe(32)
    tokens = directory / "tokens.csv"  # token,user,uid,"groups"
    _write_private(tokens, f'{admin_token},{_ADMIN},admin,"system:masters"\n'.encode())
    return ClusterPKI(
        ca=ca_path,
        etcd_server=pair("etcd-server", "etcd", server=True, client=True),
        etcd_client=pair("apiserver-etcd-client", "kube-apiserver-etcd-client", client=True),
        apiserver=pair("apiserver", "kube-apiserver", server=True),
        admin=pair("admin", _ADMIN, org="system:masters", client=True),
        controller_manager=pair(
            "controller-manager", "system:kube-controller-manager", org="system:masters", client=True
        ),
        sa_key=sa_key,
        sa_pub=sa_pub,
        admin_token=admin_token,
        tokens=tokens,
    )
