"""The `engram` executable. `engram hook` goes straight to the hook CLI, before argparse and the
rest of the command line load: it runs on every agent hook event and must start fast."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["hook"]:
        from engram.agents.hook import main as hook_main

        return hook_main(args[1:])
    from engram.cli.main import main as cli_main

    return cli_main(args)


if __name__ == "__main__":
    sys.exit(main())
