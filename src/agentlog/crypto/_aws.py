"""boto3 and botocore, imported only when an AWS-backed key store is used."""

from __future__ import annotations

from typing import Any

from agentlog.errors import ConfigError

__all__ = ["aws_code", "aws_errors", "boto3_module"]


def aws_code(exc: Exception) -> str:
    """The AWS error code of a botocore ClientError ("" for a transport error)."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""


def aws_errors() -> tuple[type[Exception], ...]:
    """The botocore errors an AWS call raises (client errors and transport errors)."""
    from botocore.exceptions import BotoCoreError, ClientError

    return (BotoCoreError, ClientError)


def boto3_module() -> Any:
    """boto3, or a ConfigError that says how to install it."""
    try:
        import boto3
    except ImportError as exc:  # pragma: no cover - boto3 ships with the s3 extra
        raise ConfigError(
            "the S3 key table and KMS need boto3: pip install 'agentlog[s3]'"
        ) from exc
    return boto3
