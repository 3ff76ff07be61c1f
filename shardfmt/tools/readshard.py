#!/usr/bin/env python3
"""Independent reader for prep shard formats 1.x and 2.x (jagged tensors),
written from FORMAT.md only.

It uses the Python standard library alone (struct, json, hashlib) and checks
every rule of FORMAT.md's validation order, then every batch. Run:

    readshard.py FILE...                 print a summary of each shard
    readshard.py --golden golden.json    check the golden shards beside it
                                         against the values listed there

Exit status 0 when every file is valid (and matches), 1 otherwise.
"""

import hashlib
import json
import os
import struct
import sys

MAGIC = b"\x89SHARD\r\n"
FOOTER_MAGIC = b"\x89SHEND\r\n"
DTYPES = {1: ("BOOL", 1), 2: ("U8", 1), 3: ("I8", 1), 4: ("U16", 2), 5: ("I16", 2),
          6: ("U32", 4), 7: ("I32", 4), 8: ("U64", 8), 9: ("I64", 8), 10: ("F16", 2),
          11: ("BF16", 2), 12: ("F32", 4), 13: ("F64", 8), 14: ("F8_E4M3", 1),
          15: ("F8_E5M2", 1)}
U64 = (1 << 64) - 1


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


class ShardError(Exception):
    pass


def align(x, a):
    return (x + a - 1) // a * a


def check(cond, what):
    if not cond:
        raise ShardError(what)


def read_shard(data):
    """Validate a shard image (bytes) and return a dict describing it."""
    size = len(data)
    check(size >= 256 + 64, "size: shorter than header + footer")
    check(data[0:8] == MAGIC, "magic")
    check(struct.unpack_from("<I", data, 12)[0] == 0x01020304, "byte order")
    major, minor = struct.unpack_from("<HH", data, 8)
    check(major in (1, 2), "version: major %d (format %d.%d)" % (major, major, minor))
    v2 = major == 2
    header_len, tel, bel, ntensors = struct.unpack_from("<IIII", data, 16)
    check(256 <= header_len <= 65536 and header_len % 8 == 0 and header_len <= size - 64, "header length")
    check(crc32c(data[:header_len - 4]) == struct.unpack_from("<I", data, header_len - 4)[0], "header checksum")
    (file_len, b, n, tt_off, tt_len, meta_off, meta_len, data_off, block_size,
     bt_off, bt_len, ids_off, ids_len, footer_off) = struct.unpack_from("<14Q", data, 32)
    tt_crc, meta_crc, bt_crc, ids_crc = struct.unpack_from("<4I", data, 144)
    header_crc = struct.unpack_from("<I", data, header_len - 4)[0]
    check(file_len == size, "size: expected size %d bytes, actual size %d bytes" % (file_len, size))
    # Layout: every offset where the lengths before it put it (Python ints
    # do not overflow, so compare against the u64 range explicitly).
    check(tel >= 128 and tel % 8 == 0 and tel <= 4096, "tensor entry length")
    check(bel >= (32 if v2 else 16) and bel % 8 == 0 and bel <= 4096, "batch entry length")
    check(1 <= ntensors <= 4096, "tensor count")
    check(1 <= b <= 2**32 - 1, "batch size")
    check(tt_off == header_len, "tensor table offset")
    check(tt_len >= ntensors * tel and tt_len % 8 == 0 and tt_off + tt_len <= file_len, "tensor table length")
    check(meta_off == tt_off + tt_len and meta_len <= 1 << 20, "metadata")
    check(block_size > 0 and block_size % 4096 == 0, "block size")
    check(n * b * 8 <= U64 and ids_len == n * b * 8, "sample ids length")
    if v2:
        # 2.0: sample ids after the metadata, blocks of varying size.
        check(ids_off == meta_off + meta_len, "sample ids offset")
        check(data_off == align(ids_off + ids_len, 4096) and data_off <= file_len, "data offset")
        data_len = bt_off - data_off
        check(bt_off >= data_off and data_len % 4096 == 0 and n * 4096 <= data_len <= n * block_size, "batch table offset")
        check(bt_len == n * bel and footer_off == bt_off + bt_len, "batch table length")
        check(file_len == footer_off + 64, "footer offset")
    else:
        check(data_off == align(meta_off + meta_len, 4096), "data offset")
        check(data_off + n * block_size <= U64 and bt_off == data_off + n * block_size, "batch table offset")
        check(bt_len == n * bel and ids_off == bt_off + bt_len, "batch table length")
        check(footer_off == ids_off + ids_len and file_len == footer_off + 64, "footer offset")
    # Footer.
    f = data[footer_off:footer_off + 64]
    check(f[0:8] == FOOTER_MAGIC, "footer magic")
    check(crc32c(f[:60]) == struct.unpack_from("<I", f, 60)[0], "footer checksum")
    check(struct.unpack_from("<QQQIIIII", f, 8) ==
          (file_len, n, data_off, tt_crc, meta_crc, bt_crc, ids_crc, header_crc), "footer fields")
    # Tensor table.
    tt = data[tt_off:tt_off + tt_len]
    check(crc32c(tt) == tt_crc, "tensor table checksum")
    tensors, seen, prev_end = [], set(), 0
    for i in range(ntensors):
        e = i * tel
        code, rank, name_len, name_off = struct.unpack_from("<HHIQ", tt, e)
        dims = struct.unpack_from("<8Q", tt, e + 16)
        sample_bytes, slab_off, slab_size = struct.unpack_from("<3Q", tt, e + 80)
        kind = struct.unpack_from("<H", tt, e + 104)[0] if v2 else 0
        check(kind in (0, 1), "tensor %d kind %d" % (i, kind))
        jagged = kind == 1
        check(code in DTYPES, "tensor %d dtype %d" % (i, code))
        check(rank <= 8 and all(d == 0 for d in dims[rank:]) and all(d >= 1 for d in dims[:rank]), "tensor %d shape" % i)
        check(1 <= name_len <= 4096 and name_off >= ntensors * tel and name_off + name_len <= tt_len, "tensor %d name" % i)
        name = tt[name_off:name_off + name_len].decode("utf-8")  # raises on invalid UTF-8
        check("\x00" not in name, "tensor %d name contains a NUL byte" % i)
        check(name not in seen, "duplicate tensor name")
        seen.add(name)
        want = DTYPES[code][1]
        for d in dims[:rank]:
            want *= d
        check(want <= U64 and sample_bytes == want, "tensor %d sample bytes" % i)
        check(slab_size == ((b + 1) * 8 if jagged else b * sample_bytes), "tensor %d slab size" % i)
        check(slab_off % 256 == 0 and slab_off >= prev_end and slab_off + slab_size <= block_size, "tensor %d slab" % i)
        prev_end = slab_off + slab_size
        tensors.append({"name": name, "dtype": DTYPES[code][0], "shape": list(dims[:rank]),
                        "sample_bytes": sample_bytes, "slab_offset": slab_off, "jagged": jagged})
    jagged_tensors = [t for t in tensors if t["jagged"]]
    check(bel >= 32 + 8 * len(jagged_tensors) or not v2, "batch entry length for the jagged tensors")
    fixed_end = prev_end
    # Metadata and padding.
    meta = data[meta_off:meta_off + meta_len]
    check(crc32c(meta) == meta_crc, "metadata checksum")
    provenance = json.loads(meta.decode("utf-8"))
    gap = ids_off + ids_len if v2 else meta_off + meta_len
    check(all(x == 0 for x in data[gap:data_off]), "padding before data")
    # Batch table.
    bt = data[bt_off:bt_off + bt_len]
    check(crc32c(bt) == bt_crc, "batch table checksum")
    batches = []
    pos, largest = data_off, 0
    for k in range(n):
        count, pads, block_crc, id_crc = struct.unpack_from("<4I", bt, k * bel)
        check(count <= b and pads <= count, "batch %d count/pads" % k)
        off, bsize, values = data_off + k * block_size, block_size, {}
        if v2:
            off, bsize = struct.unpack_from("<QQ", bt, k * bel + 16)
            counts = struct.unpack_from("<%dQ" % len(jagged_tensors), bt, k * bel + 32)
            end = fixed_end
            for t, nv in zip(jagged_tensors, counts):
                start = align(end, 256)
                end = start + nv * t["sample_bytes"]
                values[t["name"]] = (start, nv)
            check(off == pos, "batch %d block offset" % k)
            check(bsize == align(end, 4096) and bsize <= block_size, "batch %d block size" % k)
            pos, largest = off + bsize, max(largest, bsize)
            check(pos <= bt_off, "batch %d block past the data" % k)
        block = data[off:off + bsize]
        check(crc32c(block) == block_crc, "batch %d block checksum" % k)
        # Zero everywhere but the used slab prefixes, offsets and values.
        used = bytearray(bsize)
        for t in tensors:
            s = t["slab_offset"]
            u = (b + 1) * 8 if t["jagged"] else count * t["sample_bytes"]
            used[s:s + u] = b"\x01" * u
            if t["jagged"]:
                start, nv = values[t["name"]]
                used[start:start + nv * t["sample_bytes"]] = b"\x01" * (nv * t["sample_bytes"])
        check(all(block[j] == 0 for j in range(bsize) if not used[j]), "batch %d padding" % k)
        offsets = {}
        for t in jagged_tensors:
            offs = struct.unpack_from("<%dq" % (b + 1), block, t["slab_offset"])
            nv = values[t["name"]][1]
            check(offs[0] == 0 and all(offs[j] <= offs[j + 1] for j in range(b)), "batch %d offsets of %s" % (k, t["name"]))
            check(all(o == nv for o in offs[count:]), "batch %d offsets of %s end at %d" % (k, t["name"], nv))
            offsets[t["name"]] = list(offs[:count + 1])
        raw_ids = data[ids_off + k * b * 8:ids_off + (k + 1) * b * 8]
        check(crc32c(raw_ids) == id_crc, "batch %d sample ids checksum" % k)
        ids = list(struct.unpack_from("<%dQ" % b, raw_ids))
        check(all(x == U64 for x in ids[count:]), "batch %d unused id slots" % k)
        slabs = []
        for t in tensors:
            start, nv = values[t["name"]] if t["jagged"] else (t["slab_offset"], count)
            slabs.append(block[start:start + nv * t["sample_bytes"]].hex())
        entry = {"count": count, "pads": pads, "crc32c": "%08x" % block_crc,
                 "sample_ids": ids[:count], "slabs": slabs}
        if offsets:
            entry["offsets"] = offsets
        batches.append(entry)
    if v2:
        check(pos == bt_off, "blocks end at the batch table")
        check(block_size == (largest if n else align(fixed_end, 4096)), "largest block bsize")
    check(crc32c(data[ids_off:ids_off + ids_len]) == ids_crc, "sample ids checksum")
    digest = hashlib.sha256(data[:data_off] + data[bt_off:file_len]).hexdigest()
    return {"size": size, "digest": "sha256:" + digest, "batch_size": b, "version": "%d.%d" % (major, minor),
            "tensors": [dict({"name": t["name"], "dtype": t["dtype"], "shape": t["shape"]}, **({"jagged": True} if t["jagged"] else {}))
                        for t in tensors],
            "provenance": provenance, "batches": batches}


def main(argv):
    if len(argv) == 3 and argv[1] == "--golden":
        base = os.path.dirname(argv[2])
        with open(argv[2], "rb") as fh:
            golden = json.load(fh)
        bad = 0
        for g in golden:
            before = bad
            with open(os.path.join(base, g["file"]), "rb") as fh:
                got = read_shard(fh.read())
            for key in ("size", "digest", "batch_size", "tensors", "provenance", "batches"):
                if got[key] != g[key]:
                    print("%s: %s differs: %r != %r" % (g["file"], key, got[key], g[key]))
                    bad += 1
            if bad == before:
                print("%s: ok, %d batches" % (g["file"], len(got["batches"])))
        return 1 if bad else 0
    status = 0
    for path in argv[1:]:
        try:
            with open(path, "rb") as fh:
                d = read_shard(fh.read())
            print("%s: v%s, %d batches of %d, %s, %s" % (path, d["version"], len(d["batches"]),
                  d["batch_size"], ", ".join("%s %s%s" % (t["name"], t["dtype"], t["shape"]) for t in d["tensors"]), d["digest"]))
        except (ShardError, ValueError, struct.error) as e:
            print("%s: invalid: %s" % (path, e))
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
