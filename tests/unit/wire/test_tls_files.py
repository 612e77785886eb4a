"""The cluster CA's files: written with a private key, and a missing directory names the command that makes it.

Mutual TLS over real gRPC is tested in tests/integration/wire/test_tls.py."""

import stat

import pytest

from synclab.wire.tls import ENV, TlsError, TlsFiles, make_cluster_ca


def test_files_are_written_with_a_private_key(tmp_path):
    d = make_cluster_ca(tmp_path / "tls")
    assert stat.S_IMODE((d / "node-key.pem").stat().st_mode) == 0o600
    assert b"BEGIN CERTIFICATE" in (d / "ca.pem").read_bytes()


def test_missing_files_name_the_command(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, str(tmp_path))
    with pytest.raises(TlsError, match="synclab tls init"):
        TlsFiles.from_env()
    monkeypatch.setenv(ENV, "")
    assert TlsFiles.from_env() is None
