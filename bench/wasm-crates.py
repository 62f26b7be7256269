#!/usr/bin/env python3
# Code bytes of a wasm module by crate, from its name section (what `twiggy top` shows, grouped
# by the first path segment of each function name; generic code counts for the crate of its
# outer path, e.g. `core::ptr::drop_in_place<jsonschema::…>` for core). Needs a build that
# keeps names: the release profile keeps them for wasm-opt, and THINK_WASM_KEEP_NAMES=1 makes
# wasm-opt write them out (--debuginfo) instead of dropping them, which is
#   THINK_WASM_KEEP_NAMES=1 bash scripts/wasm-build.sh . && python3 bench/wasm-crates.py build/index_bg.wasm
# (then `THINK_FORCE_BUILD=1 bash scripts/build.sh` for the shipped build without names). The
# first line is the module without its name section, which is what the shipped build is.
# Usage: python3 bench/wasm-crates.py <file.wasm>
import sys, re, gzip, collections, zlib
b = open(sys.argv[1], 'rb').read()
def leb(i):
    r = s = 0
    while True:
        x = b[i]; i += 1; r |= (x & 0x7f) << s; s += 7
        if x < 0x80: return r, i
i = 8; imports = 0; bodies = []; names = {}; data = 0; data_gz = 0; nameless = bytearray(b[:8])
while i < len(b):
    start = i; sid = b[i]; i += 1
    n, i = leb(i); end = i + n
    if sid != 0 or b[i + 1:i + 5] != b'name' or b[i] != 4:
        nameless += b[start:end]
    if sid == 2:
        cnt, j = leb(i)
        for _ in range(cnt):
            l, j = leb(j); j += l; l, j = leb(j); j += l
            kind = b[j]; j += 1
            if kind == 0: imports += 1; _, j = leb(j)
            elif kind == 1: j += 1; fl, j = leb(j); _, j = leb(j); j = leb(j)[1] if fl & 1 else j
            elif kind == 2: fl, j = leb(j); _, j = leb(j); j = leb(j)[1] if fl & 1 else j
            elif kind == 3: j += 2
            elif kind == 4: j += 1; _, j = leb(j)
    elif sid == 10:
        cnt, j = leb(i)
        for _ in range(cnt):
            sz, j2 = leb(j); bodies.append((j2, sz)); j = j2 + sz
    elif sid == 11:
        data = n; data_gz = len(zlib.compress(b[i:end], 9))
    elif sid == 0:
        l, j = leb(i); nm = b[j:j + l].decode(); j += l
        if nm == 'name':
            while j < end:
                sub = b[j]; j += 1; sl, j = leb(j); se = j + sl
                if sub == 1:
                    cnt, k = leb(j)
                    for _ in range(cnt):
                        idx, k = leb(k); l2, k = leb(k); names[idx] = b[k:k + l2].decode('utf8', 'replace'); k += l2
                j = se
    i = end
tot = collections.Counter(); gz = collections.Counter()
groups = collections.defaultdict(bytearray)
for n, (off, sz) in enumerate(bodies):
    name = names.get(imports + n, '?')
    m = re.match(r'^[<&\s]*(?:mut |dyn |impl )?([A-Za-z_][A-Za-z0-9_]*)(?:\[[0-9a-f]+\])?::', name)
    crate = m.group(1) if m else ('(wasm-bindgen shims)' if name.startswith('__wbg') or 'externref' in name else name.split('::')[0][:30] or '?')
    tot[crate] += sz; groups[crate] += b[off:off + sz]
for c in tot: gz[c] = len(zlib.compress(bytes(groups[c]), 9))
print(f"module without names: {len(nameless)} B raw, {len(gzip.compress(bytes(nameless), 9))} B gzip -9")
code = b''.join(b[o:o + s] for o, s in bodies)
print(f"code section: {len(code)} B ({len(zlib.compress(code, 9))} B deflate) in {len(bodies)} functions; data section {data} B ({data_gz} B deflate)")
for c, s in tot.most_common(30):
    print(f"{c:40} {s:9} B raw  {gz[c]:8} B deflate (alone)")
