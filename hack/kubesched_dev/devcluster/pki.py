"""Certificates and keys for a local control plane, made with the openssl CLI (no Python dependency)."""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

# Names and addresses the serving certificate answers to: loopback for us, the in-cluster names
# and the first service IP for completeness (a pod would use them in a real cluster).
SERVING_SANS = (
    "IP:127.0.0.1",
    "DNS:localhost",
    "DNS:kubernetes",
    "DNS:kubernetes.default",
    "DNS:kubernetes.default.svc",
    "DNS:kubernetes.default.svc.cluster.local",
)

ADMIN_USER = "kubesched-admin"


@dataclass(frozen=True, slots=True)
class Pki:
    """Paths of everything kube-apiserver needs to serve TLS, authenticate and sign tokens."""

    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    sa_key: Path
    sa_pub: Path
    token_file: Path
    admin_token: str

    @classmethod
    def at(cls, directory: Path) -> Pki:
        """The layout inside `directory` (files may or may not exist yet)."""
        token_file = directory / "tokens.csv"
        token = token_file.read_text().split(",", 1)[0] if token_file.exists() else ""
        return cls(
            ca_cert=directory / "ca.crt",
            ca_key=directory / "ca.key",
            serving_cert=directory / "apiserver.crt",
            serving_key=directory / "apiserver.key",
            sa_key=directory / "sa.key",
            sa_pub=directory / "sa.pub",
            token_file=token_file,
            admin_token=token,
        )


def make_pki(directory: Path, service_ip: str) -> Pki:
    """Create a CA, a serving cert for 127.0.0.1/localhost, a service-account key pair and a token file."""
    directory.mkdir(parents=True, exist_ok=True)
    pki = Pki.at(directory)
    # EC keys: generating them is instant, where 2048-bit RSA costs up to a second on a small machine.
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

    ca_conf = directory / "ca.cnf"
    ca_conf.write_text(
        "[req]\ndistinguished_name = dn\nprompt = no\nx509_extensions = v3_ca\n"
        "[dn]\nCN = kubesched-dev-ca\n"
        "[v3_ca]\nbasicConstraints = critical,CA:TRUE\n"
        "keyUsage = critical,keyCertSign,cRLSign,digitalSignature\nsubjectKeyIdentifier = hash\n"
    )
    _openssl(
        "req", "-x509", *ec, "-config", ca_conf, "-days", "3650", "-keyout", pki.ca_key, "-out", pki.ca_cert
    )

    csr = directory / "apiserver.csr"
    _openssl("req", "-new", *ec, "-subj", "/CN=kube-apiserver", "-keyout", pki.serving_key, "-out", csr)
    ext = directory / "apiserver.ext"
    # Authority and subject key identifiers: Python 3.13's default verification (X509_STRICT) needs them.
    ext.write_text(
        "basicConstraints = critical,CA:FALSE\nkeyUsage = critical,digitalSignature\n"
        "extendedKeyUsage = serverAuth\nsubjectKeyIdentifier = hash\nauthorityKeyIdentifier = keyid,issuer\n"
        f"subjectAltName = {','.join((*SERVING_SANS, f'IP:{service_ip}'))}\n"
    )
    _openssl(
        "x509",
        "-req",
        "-in",
        csr,
        "-CA",
        pki.ca_cert,
        "-CAkey",
        pki.ca_key,
        "-CAcreateserial",
        "-days",
        "3650",
        "-extfile",
        ext,
        "-out",
        pki.serving_cert,
    )

    # Service-account tokens are signed with RSA, as kubeadm does: every client library verifies RS256.
    _openssl("genrsa", "-out", pki.sa_key, "2048")
    _openssl("rsa", "-in", pki.sa_key, "-pubout", "-out", pki.sa_pub)

    token = secrets.token_hex(24)
    pki.token_file.write_text(f'{token},{ADMIN_USER},{ADMIN_USER},"system:masters"\n')
    for key in (pki.ca_key, pki.serving_key, pki.sa_key, pki.token_file):
        key.chmod(0o600)
    return Pki.at(directory)


def _openssl(*args: str | Path) -> None:
    result = subprocess.run(["openssl", *map(str, args)], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {result.stderr.strip()}")
