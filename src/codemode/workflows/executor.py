"""``python -m codemode.workflows.executor --workflow file.yaml``: the seeds' entry point,
the same as ``codemode workflow run file.yaml``."""

from __future__ import annotations

import sys

from .cli import run_cmd


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--workflow" in args:
        i = args.index("--workflow")
        if i + 1 >= len(args):
            raise SystemExit("--workflow needs a file")
        args = [args[i + 1], *args[:i], *args[i + 2 :]]
    run_cmd.main(args=args, prog_name="python -m codemode.workflows.executor")


if __name__ == "__main__":
    main()

__all__ = ["main"]
