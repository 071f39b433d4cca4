"""``python -m agentlog``: the same as the ``agentlog`` command."""

from agentlog.cli import main

if __name__ == "__main__":
    main()
