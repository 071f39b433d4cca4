"""A module whose import leaves a trace: the CVE test proves it is never imported.

Importing it writes the file named by AGENTLOG_SENTINEL_FILE, as a real
payload module would run code at import.
"""

import os
from pathlib import Path

Path(os.environ["AGENTLOG_SENTINEL_FILE"]).write_text("imported")


class Gadget:
    """What a forged checkpoint asks to construct."""

    def __init__(self, command: str) -> None:
        Path(os.environ["AGENTLOG_SENTINEL_FILE"]).write_text(f"constructed {command}")
