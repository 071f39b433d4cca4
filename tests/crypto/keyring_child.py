"""A child process for the keyring tests: another process on the same keyring file.

``python -m tests.crypto.keyring_child wrap PATH PREFIX COUNT`` prints
``ready``, waits for ``go`` on stdin, makes COUNT run keys and prints
``{run_id: key hex}`` as JSON. ``... open PATH RUN_ID HEXBLOB SEQ`` opens one
sealed event payload and prints its plaintext, or the error's class name.
"""

from __future__ import annotations

import json
import sys

from agentlog.crypto import LocalKeyStore, PayloadCipher
from agentlog.errors import AgentlogError


def main(argv: list[str]) -> int:
    mode, path = argv[0], argv[1]
    keyring = LocalKeyStore(path)
    if mode == "wrap":
        prefix, count = argv[2], int(argv[3])
        print("ready", flush=True)
        if sys.stdin.readline() != "go\n":
            return 2
        keys = {}
        for i in range(count):
            key = keyring.wrap(f"{prefix}-{i}")
            keys[key.run_id] = key.plaintext.hex()
        print(json.dumps(keys), flush=True)
        return 0
    run_id, blob, seq = argv[2], bytes.fromhex(argv[3]), int(argv[4])
    try:
        print(PayloadCipher(keyring).open(run_id, seq, "event", blob).decode(), flush=True)
    except AgentlogError as exc:
        print(type(exc).__name__, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
