#!/usr/bin/env python3
"""Writes seed inputs for the API fuzz targets: tests/fuzz/corpus/api_<family>/gen-*.

An input is a config byte followed by ops: one byte picks the op (its index in
Driver::run's table), the bytes after it are its arguments. Arguments are drawn
mostly from small values, so that `Input::chance()` (byte % n == 0) rarely
fires and ids / lengths stay plausible, which drives requests through begin,
chunked extends, decodes and finish and fills the tree before the fuzzer
starts mutating. Deterministic (fixed seed): rerunning rewrites the same files.

  python3 tests/fuzz/gen_api_seeds.py
"""
import os
import random

# Indices into Driver::run's op table (api_fuzz_driver.cpp).
BEGIN, EXTEND, DECODE, FINISH, RETRACT, QUERY = 0, 1, 2, 3, 4, 5
MATCH, INSERT, LOCK, UNLOCK, EVICT, EVENTS, RESET = 9, 10, 11, 12, 13, 14, 15
MATCH_MAMBA, INSERT_MAMBA, INSERT_SWA = 16, 17, 18
REQ_ALLOC, REQ_FREE, REQ_WRITE, REQ_READ, REQ_BATCH, REQ_LAST = 19, 20, 21, 22, 23, 24
ALLOC, FREE, KV_EXTEND, KV_DECODE, SWA_OPS, GROUP, BACKUP, MERGE, MAMBA = 25, 26, 27, 28, 29, 30, 31, 32, 33
# The host target's table goes on (Driver::run's host_ops).
H_STATS, H_POLL, H_STREAM, H_LOAD_SET, H_WAIT_LAYER, H_MATCH, H_LOAD_BACK, H_EVICT, H_NODE_STATE, H_REQUEST = (
    34, 35, 36, 37, 38, 39, 41, 43, 44, 45)

COMMON = [BEGIN] * 6 + [EXTEND] * 6 + [DECODE] * 5 + [FINISH] * 3 + [RETRACT, QUERY, MATCH, MATCH, LOCK, UNLOCK,
                                                                      EVICT, EVENTS, REQ_ALLOC, REQ_WRITE, REQ_READ,
                                                                      REQ_BATCH, REQ_LAST]
DIRECT = [ALLOC] * 3 + [FREE, FREE, INSERT, INSERT, KV_EXTEND, KV_DECODE, GROUP, BACKUP, MERGE]
EXTRA = {"mha": [], "mla": [RESET], "swa": [SWA_OPS, SWA_OPS, INSERT_SWA, INSERT_SWA], "hybrid": [MAMBA, MAMBA, MATCH_MAMBA, INSERT_MAMBA, INSERT_MAMBA],
         # device eviction sends nodes to the host; matches and load-backs bring them back
         "host": [EVICT, EVICT, INSERT, H_MATCH, H_MATCH, H_LOAD_BACK, H_LOAD_BACK, H_LOAD_BACK, H_EVICT, H_NODE_STATE,
                  H_STATS, H_POLL, H_STREAM, H_LOAD_SET, H_WAIT_LAYER, H_REQUEST, H_REQUEST, H_REQUEST, H_REQUEST]}
# Config bytes: the targets decode them (api_fuzz_<family>.cpp); bit patterns chosen for variety.
# The host target reads two (policy/layout/page/ratio, then eviction/io/mode/mla).
CONFIGS = {"mha": [0, 1, 2, 4, 5, 9, 73, 146], "mla": [0, 1, 2, 3, 10, 20, 40],
           "swa": [0, 1, 2, 3, 7, 18, 20], "hybrid": [0, 1, 2, 3, 6, 8],
           "host": [(0, 0), (1, 1), (2, 2), (3, 5), (16, 8), (29, 16), (38, 40), (43, 147), (85, 180), (110, 33),
                    (226, 6), (127, 210)]}


def arg(rng, family=None):
    if family == "host":  # longer shared prefixes (Driver::tokens), so host hits reach the load-back threshold
        return rng.choice([1, 2, 3, 5, 7, 11, 40, 45, 47]) if rng.random() < 0.7 else rng.randrange(256)
    return rng.choice([1, 1, 2, 3, 5, 7, 11]) if rng.random() < 0.8 else rng.randrange(256)


def program(rng, family, config, length):
    ops = COMMON + EXTRA[family] + (DIRECT if rng.random() < 0.7 else [])
    out = bytearray(config if isinstance(config, tuple) else [config])
    while len(out) < length:
        out.append(rng.choice(ops))
        out.extend(arg(rng, family) for _ in range(rng.randrange(3, 10)))
    return bytes(out[:length])


def host_scenario(rng, config, steps):
    """A host-target program laid out op by op (the bytes each op reads, api_fuzz_ops_host.cpp):
    whole requests over a few long shared prefixes, device eviction, host matches and load-backs,
    host eviction; so the seeds start with nodes moving between the tiers and load-backs that
    evict. Arguments stay away from the values that make an argument wrong."""
    page = (1, 4, 16)[(config[0] // 12) % 3]
    slot_limit = (64 // page + 1) * page if page < 16 else 9 * 16

    def prompt():  # Driver::tokens: document, shared length, no tail
        return [rng.randrange(3), rng.choice([12, 16, 20, 24, 32, 40, 44, 47]), 0]

    out = bytearray(config)
    for _ in range(steps):
        kind = rng.choice(["request"] * 4 + ["evict", "evict", "match", "load_back", "load_back", "host_evict"])
        if kind == "request":  # begin, extend, extra key NULL, finish
            out += bytes([H_REQUEST] + prompt() + [2, 1])
        elif kind == "evict":  # radix_evict of n tokens
            out += bytes([EVICT, rng.randrange(slot_limit + 2), 1, 2, 1])
        elif kind == "match":  # pool, prompt, full buffer, tokens, outputs, key NULL
            out += bytes([H_MATCH, 5] + prompt() + [1, 1, 1, 2])
        elif kind == "load_back":  # pool, fresh match (prompt, key NULL), full buffer, slots and outputs given
            out += bytes([H_LOAD_BACK, 5, 5] + prompt() + [2, 1, 1, 1])
        else:  # kvhost_evict of n tokens
            limit = slot_limit * 2 + 2
            n = rng.randrange(limit)
            out += bytes([H_EVICT, 5] + ([n] if limit <= 256 else [n & 255, n >> 8]) + [1, 1])
    return bytes(out)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    rng = random.Random(20261125)
    for family, configs in CONFIGS.items():
        folder = os.path.join(here, "corpus", "api_" + family)
        os.makedirs(folder, exist_ok=True)
        for i, config in enumerate(configs):
            for j, length in enumerate((96, 320)):
                with open(os.path.join(folder, "gen-%02d-%d" % (i, j)), "wb") as f:
                    f.write(program(rng, family, config, length))
    folder = os.path.join(here, "corpus", "api_host")
    for i, config in enumerate(CONFIGS["host"]):
        with open(os.path.join(folder, "scn-%02d" % i), "wb") as f:
            f.write(host_scenario(rng, config, 40))


if __name__ == "__main__":
    main()
