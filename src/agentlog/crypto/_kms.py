"""AWS KMS as the key-encryption key, through boto3.

Each run's data key comes from ``GenerateDataKey`` (AES_256) and is unwrapped
with ``Decrypt``; both carry an encryption context naming the run and the data
key id, so KMS refuses to unwrap a wrapped key presented for another run, and
CloudTrail logs which run each unwrap was for. The KEK never leaves KMS.

The wrapped keys are kept in a :class:`~agentlog.crypto._keystore.WrappedKeyTable`
(an S3 object per run for a fleet, or a keyring file on one machine), not in
KMS: KMS cannot delete one data key, only a whole KMS key.

Before each wrap and unwrap the key's state is read with ``DescribeKey``:
real KMS refuses a disabled key with ``DisabledException`` (translated too),
but the explicit check names the state (Disabled, PendingDeletion) and makes
emulators such as moto, which do not enforce it, behave the same. It costs
one more request per run per process, since unwrapped keys are cached.
"""

from __future__ import annotations

from typing import Any

from agentlog.crypto._aws import aws_code, aws_errors, boto3_module
from agentlog.crypto._keystore import (
    DataKey,
    KeyStore,
    KeyWrapper,
    WrappedKey,
    WrappedKeyTable,
    new_data_key_id,
)
from agentlog.errors import (
    CorruptKeyringError,
    EncryptionError,
    KekDisabledError,
    KeyStoreUnavailableError,
    UnknownKekError,
)

__all__ = ["KmsKek", "KmsKeyStore"]

_DISABLED_STATES = {"Disabled": "disabled", "PendingDeletion": "pending deletion"}


def _context(run_id: str, data_key_id: str) -> dict[str, str]:
    return {"agentlog:run_id": run_id, "agentlog:data_key_id": data_key_id}


class KmsKek(KeyWrapper):
    """A KMS key (id, ARN or alias) wrapping every data key."""

    def __init__(
        self,
        key_id: str,
        client: Any = None,
        *,
        region_name: str | None = None,
        endpoint_url: str | None = None,
    ) -> None:
        """Use the KMS key ``key_id``; ``client`` defaults to a boto3 KMS client."""
        if client is None:
            client = boto3_module().client(
                "kms", region_name=region_name, endpoint_url=endpoint_url
            )
        self.key_id, self.client = key_id, client

    @property
    def description(self) -> str:
        """``KMS key ID``."""
        return f"KMS key {self.key_id}"

    def _call(self, key_id: str, doing: str, method: str, **params: Any) -> Any:
        try:
            return getattr(self.client, method)(**params)
        except aws_errors() as exc:
            raise self._translate(exc, key_id, doing) from exc

    def _translate(self, exc: Exception, key_id: str, doing: str) -> EncryptionError:
        code = aws_code(exc)
        if code == "NotFoundException":
            return UnknownKekError(key_id, "KMS")
        if code == "DisabledException":
            return KekDisabledError(key_id, "disabled")
        if code == "KMSInvalidStateException":
            return KekDisabledError(key_id, "not usable (pending deletion or pending import)")
        if code == "InvalidCiphertextException":
            return CorruptKeyringError(
                self.description, f"cannot {doing}: KMS rejects the wrapped key ({exc})"
            )
        return KeyStoreUnavailableError(
            f"{self.description}: cannot {doing} ({code or type(exc).__name__}: {exc}); check "
            "the region, the endpoint, the credentials and the key policy, then retry"
        )

    def _require_enabled(self, key_id: str, doing: str) -> None:
        meta = self._call(key_id, doing, "describe_key", KeyId=key_id)["KeyMetadata"]
        state = str(meta.get("KeyState", "Enabled"))
        if state != "Enabled":
            raise KekDisabledError(key_id, _DISABLED_STATES.get(state, state))

    def new_data_key(self, run_id: str) -> tuple[DataKey, WrappedKey]:
        """``GenerateDataKey`` bound to the run; the KEK id is the key's ARN."""
        doing = f"make the data key of run {run_id!r}"
        self._require_enabled(self.key_id, doing)
        data_key_id = new_data_key_id()
        made = self._call(
            self.key_id,
            doing,
            "generate_data_key",
            KeyId=self.key_id,
            KeySpec="AES_256",
            EncryptionContext=_context(run_id, data_key_id),
        )
        kek_id = str(made["KeyId"])
        return (
            DataKey(run_id, data_key_id, kek_id, bytes(made["Plaintext"])),
            WrappedKey(run_id, data_key_id, kek_id, bytes(made["CiphertextBlob"])),
        )

    def unwrap(self, wrapped: WrappedKey) -> DataKey:
        """``Decrypt`` with the run's encryption context, pinned to the wrapping key."""
        doing = f"unwrap the data key of run {wrapped.run_id!r}"
        self._require_enabled(wrapped.kek_id, doing)
        opened = self._call(
            wrapped.kek_id,
            doing,
            "decrypt",
            CiphertextBlob=wrapped.wrapped,
            KeyId=wrapped.kek_id,
            EncryptionContext=_context(wrapped.run_id, wrapped.data_key_id),
        )
        return DataKey(wrapped.run_id, wrapped.data_key_id, wrapped.kek_id, opened["Plaintext"])

    def rotate(self) -> str:
        """``RotateKeyOnDemand``: KMS makes new key material current for the same key.

        The key id stays; KMS keeps the older material, so every wrapped key
        still unwraps. To move to another KMS key, build a store on it; keys
        wrapped by the old one keep naming it and still unwrap while it exists.
        """
        self._call(self.key_id, "rotate it", "rotate_key_on_demand", KeyId=self.key_id)
        return self.key_id


class KmsKeyStore(KeyStore):
    """Data keys from AWS KMS, wrapped keys in ``table``."""

    def __init__(
        self,
        key_id: str,
        table: WrappedKeyTable,
        *,
        client: Any = None,
        region_name: str | None = None,
        endpoint_url: str | None = None,
    ) -> None:
        """Use KMS key ``key_id``, keeping the wrapped keys in ``table``.

        Args:
            key_id: A KMS key id, ARN or alias (``alias/agentlog``).
            table: Where wrapped keys live: ``S3KeyTable(bucket)`` for a fleet,
                ``FileKeyTable(path)`` on one machine.
            client: A boto3 KMS client; by default one from the environment.
            region_name: The region, when ``client`` is not given.
            endpoint_url: A KMS endpoint (a VPC endpoint, or an emulator).
        """
        super().__init__(
            KmsKek(key_id, client, region_name=region_name, endpoint_url=endpoint_url), table
        )
