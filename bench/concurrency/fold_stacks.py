#!/usr/bin/env python3
"""Folds `perf script` stacks under the outermost frame matching ROOT_REGEX: inclusive shares of
the frames below it, DEPTH levels deep (inlined frames skipped). Issue 12, server7."""
import sys, re, collections
# usage: perf script -i X | python3 fold.py ROOT_REGEX [depth]
root = re.compile(sys.argv[1]); depth = int(sys.argv[2]) if len(sys.argv) > 2 else 3
stacks = []; cur = []
for line in sys.stdin:
    line = line.rstrip()
    if not line:
        if cur: stacks.append(cur)
        cur = []; continue
    if line.startswith((' ', '\t')):
        parts = line.strip().split(None, 1)
        if len(parts) == 2:
            sym = re.sub(r'\+0x[0-9a-f]+$', '', parts[1].rsplit(' (', 1)[0])
            cur.append(sym)
if cur: stacks.append(cur)
total = len(stacks)
inc = collections.Counter(); under = 0
for s in stacks:  # s[0] = leaf
    idx = [i for i, f in enumerate(s) if root.search(f)]
    if not idx: continue
    under += 1
    i = idx[-1]  # outermost match
    # frames below root (callees), skipping inlined duplicates
    seen = set()
    path = s[:i][::-1]
    key = tuple(f for f in path if 'inlined' not in f)[:depth]
    for d in range(1, len(key) + 1):
        inc[key[:d]] += 1
print("samples %d, under root %d (%.1f%%)" % (total, under, 100.0 * under / total))
for k, v in sorted(inc.items(), key=lambda kv: (kv[0][:-1], -kv[1])):
    if v * 200 >= total:
        print("%5.1f%% %s%s" % (100.0 * v / total, "  " * (len(k) - 1), k[-1][:150]))
