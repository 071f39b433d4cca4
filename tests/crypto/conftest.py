"""Fixtures of the KMS and S3 key store tests: moto_server's KMS and S3 (one real process).

``s3_endpoint`` (tests/services/s3_server.py) starts ``moto_server``, which
serves every AWS service it emulates on one port, KMS included.
"""

from __future__ import annotations

import uuid
from typing import Any

import boto3
import pytest

from tests.services.s3_server import S3Endpoint


def _client(endpoint: S3Endpoint, service: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=endpoint.url,
        aws_access_key_id=endpoint.access_key_id,
        aws_secret_access_key=endpoint.secret_access_key,
        region_name=endpoint.region,
    )


@pytest.fixture
def kms(s3_endpoint: S3Endpoint) -> Any:
    """A boto3 KMS client on moto_server."""
    return _client(s3_endpoint, "kms")


@pytest.fixture
def kms_key(kms: Any) -> str:
    """A fresh symmetric KMS key's id."""
    return str(kms.create_key(Description="agentlog test KEK")["KeyMetadata"]["KeyId"])


@pytest.fixture
def s3(s3_endpoint: S3Endpoint) -> Any:
    """A boto3 S3 client on moto_server."""
    return _client(s3_endpoint, "s3")


@pytest.fixture
def key_bucket(s3: Any) -> str:
    """A fresh versioned bucket for wrapped keys (versioning is the hard case for shredding)."""
    name = f"keys-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    return name
