"""Optional mutual TLS for every gRPC connection of a job, with a certificate authority made for the cluster.

On one host the cluster network is private (loopback, namespaces, a Docker
bridge) and the job token is enough; across hosts (Swarm, real machines) the
traffic crosses networks someone else may read, so ``synclab tls init DIR``
makes a CA and one node certificate signed by it, and every process started with
``SYNCLAB_TLS_DIR=DIR`` (the files copied to every host) then speaks TLS 1.2+
both ways: servers require a client certificate from the same CA, clients check
the server's. The job token is still checked on every call.

Addresses in a cluster change (namespaces, containers, hosts), so certificates
name the cluster, not hosts: every node's certificate carries the DNS name
:data:`CLUSTER_NAME` and clients verify that name
(``grpc.ssl_target_name_override``) against the cluster's own CA. Holding a
certificate of that CA is what makes a node part of the cluster.

Prometheus metrics endpoints stay plain HTTP (they carry no parameters).
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from pathlib import Path

import grpc

from synclab.fileio import write_group

ENV = "SYNCLAB_TLS_DIR"
CLUSTER_NAME = "synclab-cluster"
FILES = {"ca": "ca.pem", "cert": "node.pem", "key": "node-key.pem"}


class TlsError(ValueError):
    """TLS files missing or unreadable."""


@dataclass(frozen=True)
class TlsFiles:
    """The PEM bytes a node needs: the cluster CA, its certificate and its private key."""

    ca: bytes
    cert: bytes
    key: bytes
    directory: Path

    @classmethod
    def load(cls, directory: str | Path) -> TlsFiles:
        d = Path(directory)
        missing = [name for name in FILES.values() if not (d / name).is_file()]
        if missing:
            raise TlsError(f"{ENV}={d}: missing {', '.join(missing)} (make them with `synclab tls init {d}`)")
        return cls(*((d / FILES[k]).read_bytes() for k in ("ca", "cert", "key")), directory=d)

    @classmethod
    def from_env(cls) -> TlsFiles | None:
        """The files under ``$SYNCLAB_TLS_DIR``; None when it is unset or empty (plain connections)."""
        d = os.environ.get(ENV, "")
        return cls.load(d) if d else None

    def channel_credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(root_certificates=self.ca, private_key=self.key, certificate_chain=self.cert)

    def server_credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials([(self.key, self.cert)], root_certificates=self.ca,
                                           require_client_auth=True)


def make_cluster_ca(directory: str | Path, *, days: int = 30) -> Path:
    """Write a new CA and a node certificate/key signed by it into ``directory`` (keys mode 0600)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    valid_from, valid_to = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{CLUSTER_NAME} CA")])
    ca_cert = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(valid_from).not_valid_after(valid_to)
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                            content_commitment=False, key_encipherment=False, data_encipherment=False,
                                            key_agreement=False, encipher_only=False, decipher_only=False),
                              critical=True)
               .sign(ca_key, hashes.SHA256()))
    node_key = ec.generate_private_key(ec.SECP256R1())
    node_cert = (x509.CertificateBuilder()
                 .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CLUSTER_NAME)]))
                 .issuer_name(ca_name).public_key(node_key.public_key()).serial_number(x509.random_serial_number())
                 .not_valid_before(valid_from).not_valid_after(valid_to)
                 .add_extension(x509.SubjectAlternativeName([x509.DNSName(CLUSTER_NAME)]), critical=False)
                 .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                 .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH,
                                                       x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                 .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    key = d / FILES["key"]
    # all three or none: a CA beside a node certificate it did not sign would refuse every connection
    write_group({d / FILES["ca"]: ca_cert.public_bytes(pem), d / FILES["cert"]: node_cert.public_bytes(pem),
                 key: node_key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())},
                modes={d / FILES["ca"]: 0o644, d / FILES["cert"]: 0o644, key: 0o600})
    # The CA's key signs nothing after this: it is not kept, so no one can add nodes to the cluster later.
    return d
