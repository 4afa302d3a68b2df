"""``python -m builders.publish``: the CLI of ``builders.publish.cli``."""

from .cli import exit_now, main

if __name__ == "__main__":
    exit_now(main())
