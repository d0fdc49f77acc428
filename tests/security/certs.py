"""A throwaway PKI for tests: a CA, a server certificate for 127.0.0.1/localhost and client
certificates, written as PEM files (made with ``cryptography``)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass
class Pem:
    cert: Path  # the certificate (chain: leaf then CA)
    key: Path  # the private key (PKCS#8, unencrypted unless a password was given)
    combined: Path  # key followed by the chain, as ssl.keystore.location wants

    @property
    def cert_text(self) -> str:
        return self.cert.read_text()

    @property
    def key_text(self) -> str:
        return self.key.read_text()


def _name(**attrs: str) -> x509.Name:
    """A name whose RFC 2253 form lists ``attrs`` in the order given (CN first): the
    certificate stores them the other way round, most general first."""
    oids = {
        "CN": NameOID.COMMON_NAME,
        "O": NameOID.ORGANIZATION_NAME,
        "OU": NameOID.ORGANIZATIONAL_UNIT_NAME,
        "C": NameOID.COUNTRY_NAME,
    }
    return x509.Name([x509.NameAttribute(oids[k], v) for k, v in reversed(attrs.items())])


class Authority:
    def __init__(self, directory: Path, name: str = "Gregor Test CA") -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.name = _name(CN=name)
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(self.name)
            .issuer_name(self.name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False
            )
            .sign(self.key, hashes.SHA256())
        )
        self.ca_path = self.dir / f"{name.replace(' ', '-')}.pem"
        self.ca_path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(
        self, stem: str, subject: x509.Name, server: bool, password: bytes | None = None
    ) -> Pem:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self.name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                critical=False,
            )
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
        cert = builder.sign(self.key, hashes.SHA256())
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(password)
            if password
            else serialization.NoEncryption()
        )
        key_pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
        )
        chain = cert.public_bytes(serialization.Encoding.PEM) + self.cert.public_bytes(
            serialization.Encoding.PEM
        )
        pem = Pem(
            self.dir / f"{stem}.crt", self.dir / f"{stem}.key", self.dir / f"{stem}-keystore.pem"
        )
        pem.cert.write_bytes(chain)
        pem.key.write_bytes(key_pem)
        pem.combined.write_bytes(key_pem + chain)
        return pem

    def server(self, stem: str = "server", password: bytes | None = None) -> Pem:
        return self.issue(stem, _name(CN="localhost", O="Gregor"), server=True, password=password)

    def client(self, stem: str, **subject: str) -> Pem:
        return self.issue(stem, _name(**subject), server=False)


@dataclass
class Pki:
    """The session's test PKI (the ``pki`` fixture)."""

    ca: Authority
    server: Pem
    alice: Pem  # CN=alice,OU=eng,O=Gregor
    stranger: Pem  # signed by another CA the broker does not trust
    other_ca: Authority
