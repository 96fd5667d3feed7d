"""The dev cluster's certificates and kubeconfigs, as kubeadm lays them out.

One CA signs the API server's serving certificate and every client certificate; each
component authenticates with its own client certificate, named as upstream's
authorizers expect: `system:kube-controller-manager`, `system:kube-scheduler`,
`system:node:<name>` in group `system:nodes` (the Node authorizer and NodeRestriction
admit a kubelet by this name), and the admin in `system:masters`. A separate key signs
ServiceAccount tokens. ECDSA P-256 keys: as strong as RSA-2048 for this and about a
hundred times quicker to make, which matters for a cluster started per test run.
"""

from __future__ import annotations

import datetime
import ipaddress
import pathlib
from dataclasses import dataclass

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# The first address of the Service range is the `kubernetes` Service's ClusterIP.
SERVICE_CIDR = "10.96.0.0/16"
API_SERVICE_IP = "10.96.0.1"
VALIDITY = datetime.timedelta(days=2)  # a test cluster lives minutes; never years


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(common: str, org: str | None = None) -> x509.Name:
    parts = [x509.NameAttribute(NameOID.COMMON_NAME, common)]
    if org:
        parts.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(parts)


@dataclass
class Pair:
    cert: pathlib.Path
    key: pathlib.Path


class Authority:
    """A CA in `folder` (ca.crt, ca.key) that issues server and client certificates."""

    def __init__(self, folder: pathlib.Path):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self._key = _key()
        now = datetime.datetime.now(datetime.UTC)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(_name("ddpjob-dev-cluster-ca"))
            .issuer_name(_name("ddpjob-dev-cluster-ca"))
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._key, hashes.SHA256())
        )
        self.cert = folder / "ca.crt"
        self.cert.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))
        self._write_private(folder / "ca.key", _pem_key(self._key))

    @staticmethod
    def _write_private(path: pathlib.Path, data: bytes) -> None:
        path.touch(mode=0o600)
        path.write_bytes(data)

    def issue(
        self, name: str, common: str, *, org: str | None = None, server: bool = False, hosts: tuple[str, ...] = ()
    ) -> Pair:
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common, org))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if hosts:
            sans: list[x509.GeneralName] = []
            for host in hosts:
                try:
                    sans.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    sans.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        pair = Pair(self.folder / f"{name}.crt", self.folder / f"{name}.key")
        pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        self._write_private(pair.key, _pem_key(key))
        return pair

    def service_account_keys(self) -> Pair:
        """The key pair that signs (key) and verifies (cert: here the public key) tokens."""
        key = _key()
        pair = Pair(self.folder / "sa.pub", self.folder / "sa.key")
        self._write_private(pair.key, _pem_key(key))
        pair.cert.write_bytes(
            key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        )
        return pair


def api_server_hosts() -> tuple[str, ...]:
    """Every name a client in or out of the cluster may use for the API server."""
    return (
        "127.0.0.1",
        "localhost",
        API_SERVICE_IP,
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    )


def write_kubeconfig(
    path: pathlib.Path,
    server: str,
    ca: pathlib.Path,
    *,
    user: str,
    client: Pair | None = None,
    token: str | None = None,
    namespace: str = "default",
) -> pathlib.Path:
    """A kubeconfig for one identity (a client certificate or a bearer token)."""
    credentials: dict[str, str] = {}
    if client is not None:
        credentials.update({"client-certificate": str(client.cert), "client-key": str(client.key)})
    if token is not None:
        credentials["token"] = token
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": user,
        "clusters": [{"name": "ddpjob-dev", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": user, "context": {"cluster": "ddpjob-dev", "user": user, "namespace": namespace}}],
    }
    path.touch(mode=0o600)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path
