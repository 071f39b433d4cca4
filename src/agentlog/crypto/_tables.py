"""Where wrapped per-run data keys live: a keyring file, or S3 for a fleet.

- :class:`FileKeyTable`: the ``runs`` and ``shredded`` sections of a keyring
  file (:mod:`agentlog.crypto._keyfile`). One machine, any number of
  processes. Each new run rewrites the file (atomic replace), so it suits up
  to some tens of thousands of runs; beyond that, or across machines, use S3.
- :class:`S3KeyTable`: one small object per run, ``PREFIX/<run id>.json``.
  Every worker of a fleet reaches it, S3 is strongly consistent per key, a
  conditional put (``If-None-Match: *``) makes "first writer wins" atomic,
  and shredding overwrites the object with a tombstone, then deletes every
  older version (if the bucket is versioned), so no copy of the wrapped key
  survives in the table.
"""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import quote

from agentlog.crypto._aws import aws_code, aws_errors, boto3_module
from agentlog.crypto._keyfile import KeyFile, b64, unb64
from agentlog.crypto._keystore import WrappedKey, WrappedKeyTable, raise_if_shredded, utc_now
from agentlog.errors import CorruptKeyringError, KeyStoreUnavailableError

__all__ = ["FileKeyTable", "S3KeyTable"]


def _record(key: WrappedKey) -> dict[str, str | int]:
    record: dict[str, str | int] = {
        "id": key.data_key_id,
        "kek": key.kek_id,
        "wrapped": b64(key.wrapped),
    }
    if key.sealed_from is not None:
        record["from"] = key.sealed_from
    return record


def _from_record(run_id: str, record: Any, where: str) -> WrappedKey:
    try:
        sealed_from = record.get("from")  # absent in entries written before it existed
        if sealed_from is not None and (
            not isinstance(sealed_from, int) or isinstance(sealed_from, bool)
        ):
            raise TypeError("from")
        return WrappedKey(
            run_id, record["id"], record["kek"], unb64(record["wrapped"]), sealed_from
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CorruptKeyringError(where, f"the entry of run {run_id!r} is malformed") from exc


class FileKeyTable(WrappedKeyTable):
    """Wrapped keys and tombstones in a keyring file."""

    def __init__(self, key_file: KeyFile | str | os.PathLike[str]) -> None:
        """Use the keyring file (a :class:`KeyFile` or a path); created on first write."""
        self.file = key_file if isinstance(key_file, KeyFile) else KeyFile(key_file)

    @property
    def description(self) -> str:
        """``keyring file PATH``."""
        return f"keyring file {self.file.path}"

    def get(self, run_id: str) -> WrappedKey | None:
        """The run's wrapped key or None; ShreddedError if shredded."""
        return self._get(self.file.read(), run_id)

    def _get(self, doc: dict[str, Any], run_id: str) -> WrappedKey | None:
        raise_if_shredded(run_id, doc.get("shredded", {}).get(run_id), self.description)
        record = doc.get("runs", {}).get(run_id)
        return None if record is None else _from_record(run_id, record, str(self.file.path))

    def put_if_absent(self, key: WrappedKey) -> WrappedKey:
        """Store ``key`` unless the run has one (under the file lock)."""

        def change(doc: dict[str, Any]) -> tuple[WrappedKey, bool]:
            stored = self._get(doc, key.run_id)
            if stored is not None:
                return stored, False
            doc.setdefault("runs", {})[key.run_id] = _record(key)
            return key, True

        return self.file.update(change)

    def destroy(self, run_id: str) -> str:
        """Remove the wrapped key and write a tombstone, in one atomic replace."""

        def change(doc: dict[str, Any]) -> tuple[str, bool]:
            had_key = doc.setdefault("runs", {}).pop(run_id, None) is not None
            shredded = doc.setdefault("shredded", {})
            is_new = run_id not in shredded
            return str(shredded.setdefault(run_id, utc_now())), had_key or is_new

        return self.file.update(change)

    def shredded_at(self, run_id: str) -> str | None:
        """When the run was shredded, or None."""
        value = self.file.read().get("shredded", {}).get(run_id)
        return None if value is None else str(value)


class S3KeyTable(WrappedKeyTable):
    """Wrapped keys and tombstones as one S3 object per run (for a fleet)."""

    def __init__(self, bucket: str, prefix: str = "agentlog-keys/", client: Any = None) -> None:
        """Use ``s3://bucket/prefix``.

        Args:
            bucket: An existing bucket. Keep it apart from the archive's, with
                its own access policy: whoever reads it and the KEK reads
                every run.
            prefix: The folder of the per-run objects.
            client: A boto3 S3 client; by default one from the environment.
        """
        if client is None:
            client = boto3_module().client("s3")
        self.bucket, self.prefix, self.client = bucket, prefix, client

    @property
    def description(self) -> str:
        """``s3://bucket/prefix``."""
        return f"s3://{self.bucket}/{self.prefix}"

    def _key(self, run_id: str) -> str:
        return f"{self.prefix}{quote(run_id, safe='')}.json"

    def _read(self, run_id: str) -> dict[str, Any] | None:
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=self._key(run_id))["Body"]
            data = body.read()
        except aws_errors() as exc:
            if aws_code(exc) in ("NoSuchKey", "404"):
                return None
            raise self._unavailable(exc, f"read the key of run {run_id!r}") from exc
        try:
            doc = json.loads(data)
        except ValueError as exc:
            raise CorruptKeyringError(self.description, f"run {run_id!r}: not JSON") from exc
        return doc if isinstance(doc, dict) else {}

    def get(self, run_id: str) -> WrappedKey | None:
        """The run's wrapped key or None; ShreddedError if shredded."""
        doc = self._read(run_id)
        if doc is None:
            return None
        raise_if_shredded(run_id, doc.get("shredded_at"), self.description)
        return _from_record(run_id, doc, self.description)

    def put_if_absent(self, key: WrappedKey) -> WrappedKey:
        """Store ``key`` with ``If-None-Match: *``; on a lost race, return the winner."""
        body = json.dumps(_record(key)).encode()
        try:
            self.client.put_object(
                Bucket=self.bucket, Key=self._key(key.run_id), Body=body, IfNoneMatch="*"
            )
            return key
        except aws_errors() as exc:
            if aws_code(exc) not in ("PreconditionFailed", "412", "ConditionalRequestConflict"):
                raise self._unavailable(exc, f"store the key of run {key.run_id!r}") from exc
        stored = self.get(key.run_id)  # tombstones are never removed: there is one now
        if stored is None:
            raise KeyStoreUnavailableError(
                f"{self.description}: run {key.run_id!r}'s key object vanished during a "
                "conditional put; retry"
            )
        return stored

    def destroy(self, run_id: str) -> str:
        """Overwrite the key with a tombstone, then delete every older version."""
        doc = self._read(run_id)
        if doc is not None and doc.get("shredded_at"):
            return str(doc["shredded_at"])
        when = utc_now()
        key = self._key(run_id)
        try:
            put = self.client.put_object(
                Bucket=self.bucket, Key=key, Body=json.dumps({"shredded_at": when}).encode()
            )
            keep = put.get("VersionId")
            if keep:  # a versioned bucket would otherwise keep the wrapped key
                listing = self.client.list_object_versions(Bucket=self.bucket, Prefix=key)
                for entry in listing.get("Versions", []) + listing.get("DeleteMarkers", []):
                    if entry["Key"] == key and entry["VersionId"] != keep:
                        self.client.delete_object(
                            Bucket=self.bucket, Key=key, VersionId=entry["VersionId"]
                        )
        except aws_errors() as exc:
            raise self._unavailable(exc, f"shred run {run_id!r}") from exc
        return when

    def shredded_at(self, run_id: str) -> str | None:
        """When the run was shredded, or None."""
        doc = self._read(run_id)
        value = None if doc is None else doc.get("shredded_at")
        return None if value is None else str(value)

    def _unavailable(self, exc: Exception, doing: str) -> KeyStoreUnavailableError:
        return KeyStoreUnavailableError(
            f"{self.description}: cannot {doing} ({aws_code(exc) or type(exc).__name__}: {exc}); "
            "check the bucket, the endpoint and the credentials, then retry"
        )
