"""Request traces that carry prefix-block hashes (Mooncake's FAST'25 release format, kvcache-ai/Mooncake
FAST25-release/traces): one JSON object per line with `timestamp` (ms from the start), `input_length`,
`output_length` and `hash_ids`, the remapped hashes of the prompt's blocks of BLOCK_TOKENS tokens (identical ids:
reusable prefix KV). Plain or gzip'd JSONL; bounded like every trace (simulation/workload.py's limits)."""
from __future__ import annotations

import gzip
import io
import json
import math
from dataclasses import dataclass

import numpy as np

from tokenmath.base.errors import InputError, show
from tokenmath.analyses.serving.simulation.workload import MAX_REQUESTS, MAX_TRACE_BYTES, trace_file

BLOCK_TOKENS = 512          # Mooncake's trace README: "The block size is 512 tokens"
MAX_BLOCKS = 100_000_000    # hash ids in one trace: bounds the cache analysis' memory (8 bytes each)


@dataclass(frozen=True)
class BlockTrace:
    name: str
    arrival_s: np.ndarray       # (R,) s, sorted
    input_tokens: np.ndarray    # (R,)
    output_tokens: np.ndarray   # (R,)
    offsets: np.ndarray         # (R + 1,) request r's blocks are hashes[offsets[r]:offsets[r + 1]]
    hashes: np.ndarray          # (B,) block hash ids, in prompt order per request
    block_tokens: int = BLOCK_TOKENS

    @property
    def requests(self) -> int:
        return int(self.input_tokens.size)

    @property
    def duration_s(self) -> float:
        return float(self.arrival_s[-1] - self.arrival_s[0]) if self.requests > 1 else 0.0

    def block_sizes(self) -> np.ndarray:
        """(B,) tokens in each block: BLOCK_TOKENS, the prompt's last block what remains (never past its input)."""
        r = np.repeat(np.arange(self.requests), np.diff(self.offsets))
        k = np.arange(self.hashes.size) - self.offsets[r]
        return np.clip(self.input_tokens[r] - k * self.block_tokens, 0, self.block_tokens)


def _int(row: dict, key: str, k: int, name: str, lo: int = 0) -> int:
    v = row.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v != int(v) or v < lo \
            or v > 1e12:
        raise InputError("trace", f"line {k} of {name!r}: {key} {show(v)} is not a count",
                         f"an integer >= {lo} (Mooncake's format: timestamp, input_length, output_length, hash_ids)")
    return int(v)


def read_block_trace(path, block_tokens: int = BLOCK_TOKENS) -> BlockTrace:
    """Read a hashed-block trace (.jsonl or .jsonl.gz), refusing anything else with the line at fault."""
    p = trace_file(path, "trace", "a JSONL trace with hash_ids (Mooncake format)")
    try:
        with open(p, "rb") as fh:
            raw = fh.read(MAX_TRACE_BYTES + 1)
    except OSError as e:
        raise InputError("trace", f"{p.name!r} cannot be read: {show(e.strerror or str(e))}", "a readable file") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.GzipFile(fileobj=io.BytesIO(raw)).read(MAX_TRACE_BYTES + 1)
        except (OSError, EOFError):
            raise InputError("trace", f"{p.name!r} is not a readable gzip file", "a .jsonl or .jsonl.gz") from None
    if len(raw) > MAX_TRACE_BYTES:
        raise InputError("trace", f"{p.name!r} is over {MAX_TRACE_BYTES:,} bytes", "a smaller trace")
    try:
        lines = raw.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        raise InputError("trace", f"{p.name!r} is not UTF-8 text", "JSONL text") from None
    t, inp, out, offs, hs = [], [], [], [0], []
    for k, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if len(t) >= MAX_REQUESTS:
            raise InputError("trace", f"{p.name!r} has over {MAX_REQUESTS:,} requests", "a shorter trace")
        try:
            row = json.loads(line, parse_int=lambda s: int(s) if len(s) <= 30 else float(s))
        except (ValueError, RecursionError):
            raise InputError("trace", f"line {k} of {p.name!r} is not JSON", "one JSON object per line") from None
        if not isinstance(row, dict):
            raise InputError("trace", f"line {k} of {p.name!r} is not an object", "one JSON object per line")
        t.append(_int(row, "timestamp", k, p.name) / 1e3)
        inp.append(_int(row, "input_length", k, p.name, 1))
        out.append(_int(row, "output_length", k, p.name))
        ids = row.get("hash_ids")
        if not isinstance(ids, list) or not all(isinstance(h, int) and not isinstance(h, bool) and 0 <= h < 2 ** 62
                                                for h in ids):
            raise InputError("trace", f"line {k} of {p.name!r}: hash_ids is not a list of block ids",
                             "a list of non-negative integers, one per block of the prompt")
        if len(ids) > -(-inp[-1] // block_tokens):
            raise InputError("trace", f"line {k} of {p.name!r}: {len(ids)} blocks for {inp[-1]:,} input tokens",
                             f"at most ceil(input_length / {block_tokens})")
        hs.extend(ids)
        if len(hs) > MAX_BLOCKS:
            raise InputError("trace", f"{p.name!r} has over {MAX_BLOCKS:,} blocks", "a shorter trace")
        offs.append(len(hs))
    if not t:
        raise InputError("trace", f"{p.name!r} holds no requests", "at least one line")
    order = np.argsort(np.asarray(t), kind="stable")
    offsets = np.asarray(offs, np.int64)
    lens = np.diff(offsets)[order]
    starts = offsets[:-1][order]
    hashes = np.asarray(hs, np.int64)
    idx = np.concatenate([np.arange(s, s + n) for s, n in zip(starts, lens)]) if hashes.size else hashes
    return BlockTrace(p.name, np.asarray(t, float)[order], np.asarray(inp, np.int64)[order],
                      np.asarray(out, np.int64)[order], np.concatenate([[0], np.cumsum(lens)]).astype(np.int64),
                      hashes[idx], int(block_tokens))
