"""pytest plugin: a real S3 protocol server (``moto_server``) on 127.0.0.1.

The session fixture ``s3_endpoint`` starts ``moto_server`` on a free loopback
port, creates an IAM user with an access key allowed everything, and yields an
:class:`S3Endpoint` whose ``auth_enforced()`` turns authentication on so that
wrong credentials are refused as by real S3. It stops the server at the end
of the session. It never skips: a server that does not start fails the tests
that need it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class S3Endpoint:
    """How to reach the test S3 server."""

    url: str
    """``http://127.0.0.1:PORT``."""
    access_key_id: str
    """A valid access key (authentication is enforced)."""
    secret_access_key: str
    """Its secret."""
    region: str = "us-east-1"
    """The region to sign for."""

    @contextlib.contextmanager
    def auth_enforced(self) -> Iterator[None]:
        """Make the server check credentials and signatures, as real S3 does.

        Off by default because moto's signature check rejects some valid
        requests (ListObjectsV2 with a prefix); on, it refuses wrong keys.
        """
        self._reset_auth(b"0")
        try:
            yield
        finally:
            self._reset_auth(b"inf")

    def _reset_auth(self, count: bytes) -> None:
        request = urllib.request.Request(
            f"{self.url}/moto-api/reset-auth",
            data=count,
            method="POST",
            headers={"Content-Type": "text/plain"},  # a form type would hide the body
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

    def client(self, **overrides: str) -> object:
        """A boto3 S3 client for this server."""
        import boto3

        params = {
            "endpoint_url": self.url,
            "aws_access_key_id": self.access_key_id,
            "aws_secret_access_key": self.secret_access_key,
            "region_name": self.region,
        } | overrides
        return boto3.client("s3", **params)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"moto_server exited with code {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"moto_server did not listen on 127.0.0.1:{port} in {timeout}s")


def _moto_command(port: int) -> list[str]:
    exe = shutil.which("moto_server")
    if exe:
        return [exe, "-H", "127.0.0.1", "-p", str(port)]
    return [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[S3Endpoint]:
    """A running moto_server, and valid credentials for it."""
    import boto3

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ, MOTO_PORT=str(port))
    proc = subprocess.Popen(
        _moto_command(port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    try:
        _wait_for_port(port, proc, timeout=30)
        # Authentication is off until reset-auth; create the user that signs when it is on.
        iam = boto3.client(
            "iam",
            endpoint_url=url,
            aws_access_key_id="bootstrap",
            aws_secret_access_key="bootstrap",
            region_name="us-east-1",
        )
        iam.create_user(UserName="agentlog-test")
        iam.put_user_policy(
            UserName="agentlog-test",
            PolicyName="all",
            PolicyDocument=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
                }
            ),
        )
        key = iam.create_access_key(UserName="agentlog-test")["AccessKey"]
        yield S3Endpoint(url, key["AccessKeyId"], key["SecretAccessKey"])
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
