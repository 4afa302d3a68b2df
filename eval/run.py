"""``python eval/run.py <task> --pred preds.json``: score a model on a benchmark.

No evaluation task is implemented in this version of the toolkit (the evaluation CLI and its metrics come with the
evaluation issue): every call says so and exits with status 2.
"""

from __future__ import annotations

import sys

def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    task = args[0] if args else "<task>"
    print(f"error: evaluation task {task!r} is not implemented yet in this version of the toolkit "
          "(no evaluation task is available)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
