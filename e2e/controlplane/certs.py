"""The throw-away PKI of one local control plane, written as PEM files.

kube-apiserver insists on TLS and, with RBAC on, on authenticated clients, so the
harness needs a small PKI. Each cluster gets a fresh one in its workdir: nothing is
shared between runs and nothing has to be revoked. One CA signs everything:

* the kube-apiserver serving cert (the in-cluster service names and 10.0.0.1, the first
  address of ``--service-cluster-ip-range``, plus loopback);
* the admin client cert (O=system:masters), used by tests, kubectl and the controllers;
* the kubelet-client cert the apiserver presents to the kubelet for ``pods/log`` and
  ``exec``;
* the kubelet's serving cert, which the apiserver verifies against the same CA;
* an RSA key pair for signing and verifying service-account tokens (RSA because that is
  what every Kubernetes version accepts for ``--service-account-key-file``).

TLS keys are ECDSA P-256: generating them is instant, where RSA costs a noticeable part
of a second per key on a loaded two-core machine. Everything is valid for a week, which
outlives any test session or demo while staying obviously temporary.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=7)
# Tolerate a slightly behind clock in another process's view of "now".
BACKDATE = datetime.timedelta(minutes=5)
APISERVER_DNS_NAMES = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
APISERVER_IPS = ("127.0.0.1", "10.0.0.1")
ADMIN_USER = "agentchain-admin"

_Key = ec.EllipticCurvePrivateKey


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key, as PEM file paths."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class Pki:
    """All PEM files a local control plane needs."""

    ca: KeyPair
    apiserver: KeyPair
    admin: KeyPair
    kubelet_client: KeyPair
    node: KeyPair
    service_account_key: Path  # RSA private key: token signing
    service_account_pub: Path  # RSA public key: token verification


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def _write_key(path: Path, key: _Key | rsa.RSAPrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _builder(subject: x509.Name, issuer: x509.Name, key: _Key) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + VALIDITY)
    )


class _Signer:
    """The CA: signs leaf certificates and writes each as a KeyPair in one directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.name = _name("agentchain-e2e-ca")
        self.cert = (
            _builder(self.name, self.name, self.key)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True, content_commitment=False, key_encipherment=False,
                    data_encipherment=False, key_agreement=False, key_cert_sign=True,
                    crl_sign=True, encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )
            .sign(self.key, hashes.SHA256())
        )  # fmt: skip
        self.pair = self._write("ca", self.cert, self.key)

    def _write(self, stem: str, cert: x509.Certificate, key: _Key) -> KeyPair:
        pair = KeyPair(self.directory / f"{stem}.crt", self.directory / f"{stem}.key")
        pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(pair.key, key)
        return pair

    def leaf(
        self,
        stem: str,
        subject: x509.Name,
        usage: x509.ObjectIdentifier,
        dns: tuple[str, ...] = (),
        ips: tuple[str, ...] = (),
    ) -> KeyPair:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            _builder(subject, self.name, key)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if dns or ips:
            names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
            names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return self._write(stem, builder.sign(self.key, hashes.SHA256()), key)


def _service_account_keys(directory: Path) -> tuple[Path, Path]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private, public = directory / "sa.key", directory / "sa.pub"
    _write_key(private, key)
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private, public


def serving(directory: Path, stem: str, extra_ips: tuple[str, ...] = ()) -> tuple[Path, KeyPair]:
    """A fresh CA (its certificate) and a serving pair it signed for loopback (localhost,
    127.0.0.1) and ``extra_ips`` (the real node's bridge address, where pods reach a
    stand-in), in ``directory``: TLS for a stand-in server that clients must verify."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = _Signer(directory)
    usage = ExtendedKeyUsageOID.SERVER_AUTH
    ips = ("127.0.0.1", *extra_ips)
    return ca.pair.cert, ca.leaf(stem, _name(stem), usage, ("localhost",), ips)


def generate(directory: Path, extra_ips: tuple[str, ...] = ()) -> Pki:
    """Create a fresh CA and every certificate and key of the cluster in ``directory``.

    ``extra_ips`` go into the API server's and the node's serving certificates: the
    address the real node's control plane binds (reachable from pods), where both serve.
    """
    directory.mkdir(parents=True, exist_ok=True)
    ca = _Signer(directory)
    server, client = ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH
    sa_key, sa_pub = _service_account_keys(directory)
    return Pki(
        ca=ca.pair,
        apiserver=ca.leaf(
            "apiserver",
            _name("kube-apiserver"),
            server,
            APISERVER_DNS_NAMES,
            (*APISERVER_IPS, *extra_ips),
        ),
        admin=ca.leaf("admin", _name(ADMIN_USER, "system:masters"), client),
        kubelet_client=ca.leaf(
            "kubelet-client", _name("kube-apiserver-kubelet-client", "system:masters"), client
        ),
        node=ca.leaf(
            "node", _name("agentchain-local"), server, ("localhost",), ("127.0.0.1", *extra_ips)
        ),
        service_account_key=sa_key,
        service_account_pub=sa_pub,
    )
