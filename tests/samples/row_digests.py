"""Row digests of a release folder: per config and split, the number of rows and a sha256 over its rows in order
(canonical JSON: sorted keys, floats rounded to 5 decimals, so a last-bit difference of a CPU model does not count).

``tests/samples/expected_rows.json`` holds the digests of the four bundled samples (``make sample``) as built before
the corpus layer was refactored (issue 21): a refactor must leave every row as it was. One intended change since:
ShowHowTo's test split draws its tasks in a seeded hash order (docs/corpora/showhowto.md, "Test split"), so the
sample's two ``sequences`` digests were remade: the same four rows, field for field (compared with a build of the
commit before), two of them swapped between ``train`` and ``test``. And Sieve & Swap's ``default/train`` digest
was remade when the swap became row-wise (issue 36): each video's segments are embedded in an encoder call of their
own, and a transformer's last bits depend on the padded batch, so similarities moved by at most 5.4e-7 (one crossed a
5-decimal rounding boundary); kept videos, pairs, swapped steps and every other field are the same (compared field
by field with a build of the commit before).

    python -m tests.samples.row_digests DIR            # print the digests of DIR/<corpus> for the four samples
    python -m tests.samples.row_digests DIR --write    # rewrite expected_rows.json (only for an intended change)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

EXPECTED = Path(__file__).with_name("expected_rows.json")
CORPORA = ("sieve_swap", "marc", "howtostep", "showhowto")


def _canonical(v: Any) -> Any:
    if isinstance(v, float):
        return v if not math.isfinite(v) else round(v, 5) + 0.0
    if isinstance(v, dict):
        return {k: _canonical(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_canonical(x) for x in v]
    if isinstance(v, bytes):
        return hashlib.sha256(v).hexdigest()
    return v


#: fields left out of the digest: a hash of the whole build config (HowToStep's ``provenance.config_sha256``), which
#: changes with any config default and, before it was made portable, with the folder the inputs lay in
MASKED = ("config_sha256",)


def _masked(row: dict[str, Any]) -> dict[str, Any]:
    prov = row.get("provenance")
    if isinstance(prov, dict) and any(k in prov for k in MASKED):
        return {**row, "provenance": {k: v for k, v in prov.items() if k not in MASKED}}
    return row


def release_digests(release: Path) -> dict[str, dict[str, Any]]:
    """``{"<config>/<split>": {"rows": n, "sha256": ...}}`` of every Parquet shard set under ``release`` (the fields
    of :data:`MASKED` left out)."""
    out: dict[str, dict[str, Any]] = {}
    for config in sorted(p for p in release.iterdir() if p.is_dir() and any(p.glob("*.parquet"))):
        splits = sorted({f.name.split("-")[0] for f in config.glob("*-of-*.parquet")})
        for split in splits:
            h, n = hashlib.sha256(), 0
            for shard in sorted(config.glob(f"{split}-*-of-*.parquet")):
                for row in pq.read_table(shard).to_pylist():
                    h.update(json.dumps(_canonical(_masked(row)), sort_keys=True, ensure_ascii=False).encode("utf-8") + b"\n")
                    n += 1
            out[f"{config.name}/{split}"] = {"rows": n, "sha256": h.hexdigest()}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", type=Path, help="folder holding <corpus>/ releases")
    ap.add_argument("--write", action="store_true", help=f"rewrite {EXPECTED.name}")
    args = ap.parse_args(argv)
    got = {c: release_digests(args.root / c) for c in CORPORA}
    text = json.dumps(got, indent=1, sort_keys=True) + "\n"
    if args.write:
        EXPECTED.write_text(text, encoding="utf-8")
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
