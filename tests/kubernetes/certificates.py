"""The control plane's key material, made fresh for each start: a cluster CA, the API server's
serving certificate, client certificates for the components and the test's administrator, and the key
pair that signs ServiceAccount tokens. Nothing is reused between starts or written outside
the control plane's directory."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=1)
# Names a client inside the cluster uses for the API server, and its in-cluster service address.
API_SERVER_NAMES = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                    "kubernetes.default.svc.cluster.local")
API_SERVER_IPS = ("127.0.0.1", "10.96.0.1")


@dataclass(frozen=True)
class KeyPair:
    certificate: Path
    key: Path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> Path:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)
    return path


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


class CertificateAuthority:
    """The cluster's CA: it signs the serving and client certificates the API server trusts."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._key = _key()
        now = datetime.datetime.now(datetime.UTC)
        self._name = _name("icepack-test-cluster-ca")
        self._certificate = (
            x509.CertificateBuilder().subject_name(self._name).issuer_name(self._name)
            .public_key(self._key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        self.certificate = directory / "ca.crt"
        self.certificate.write_bytes(self._certificate.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str, common_name: str, organization: str | None = None,
              server: bool = False) -> KeyPair:
        """A certificate for a client (`common_name` is the user, `organization` its group) or, with
        `server`, for the API server's names and addresses."""
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder().subject_name(_name(common_name, organization))
            .issuer_name(self._name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if server:
            names: list[x509.GeneralName] = [x509.DNSName(n) for n in API_SERVER_NAMES]
            names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in API_SERVER_IPS]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        certificate = builder.sign(self._key, hashes.SHA256())
        pair = KeyPair(self.directory / f"{name}.crt", self.directory / f"{name}.key")
        pair.certificate.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        _write_key(key, pair.key)
        return pair


def service_account_signing_key(directory: Path) -> KeyPair:
    """The key pair the API server signs ServiceAccount tokens with (`certificate` holds the public
    key, which the API server and the controller manager verify tokens with)."""
    key = _key()
    public = directory / "service-account.pub"
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    return KeyPair(public, _write_key(key, directory / "service-account.key"))
