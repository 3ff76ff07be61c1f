#!/usr/bin/env python3
"""Independent reference implementation of prep-plan/v1 and, for packed
mixtures, prep-plan/v2 (plan/PLAN.md).

Python 3.8+ standard library only. Written from the spec, not from the Go
code: it recomputes every golden vector in plan/testdata/golden.json
(permutation images, fingerprints, derived counts, epoch digests and rank
batches) and exits non-zero on any difference.

    python3 plan_ref.py ../testdata/golden.json
    python3 plan_ref.py ../testdata/golden_pack.json   (packing, PLAN.md 12)
    python3 plan_ref.py ../testdata/golden-mixture.json   (PLAN.md section 11)
    python3 plan_ref.py ../testdata/golden-pack-mixture.json   (PLAN.md 12.1)
"""
import base64
import hashlib
import heapq
import json
import struct
import sys
from fractions import Fraction

FORMAT = "prep-plan/v1"
ALGORITHM = "feistel6-mx/v1"
ROUNDS = 6
M1 = 0x9E3779B97F4A7C15
M2 = 0x94D049BB133111EB
MASK64 = (1 << 64) - 1
PAD_BIT = 1 << 63
LEAF_SLOTS = 1 << 16


def le64(x):
    return struct.pack("<Q", x & MASK64)


def derive_keys(purpose, seed, epoch, index):
    msg = FORMAT.encode() + b"\0" + purpose.encode() + b"\0" + le64(seed) + le64(epoch) + le64(index)
    h0 = hashlib.sha256(msg + b"\0").digest()
    h1 = hashlib.sha256(msg + b"\1").digest()
    words = [struct.unpack_from("<Q", h0, 8 * i)[0] for i in range(4)]
    words += [struct.unpack_from("<Q", h1, 8 * i)[0] for i in range(2)]
    return words


def round_f(k, r):
    h = ((r ^ k) * M1) & MASK64
    h ^= h >> 29
    h = (h * M2) & MASK64
    h ^= h >> 32
    return h


class Perm:
    def __init__(self, n, purpose, seed, epoch, index):
        self.n = n
        w = max(2, (n - 1).bit_length()) if n > 1 else 2
        self.hi, self.lo = w - w // 2, w // 2
        self.keys = derive_keys(purpose, seed, epoch, index)

    def _enc(self, x):
        wl, wr = self.hi, self.lo
        l, r = x >> wr, x & ((1 << wr) - 1)
        for i in range(ROUNDS):
            l, r = r, (l ^ round_f(self.keys[i], r)) & ((1 << wl) - 1)
            wl, wr = wr, wl
        return (l << wr) | r

    def _dec(self, y):
        wl, wr = self.hi, self.lo
        l, r = y >> wr, y & ((1 << wr) - 1)
        for i in reversed(range(ROUNDS)):
            l, r = (r ^ round_f(self.keys[i], l)) & ((1 << wr) - 1), l
            wl, wr = wr, wl
        return (l << wr) | r

    def apply(self, x):
        assert 0 <= x < self.n
        while True:
            x = self._enc(x)
            if x < self.n:
                return x

    def invert(self, y):
        assert 0 <= y < self.n
        while True:
            y = self._dec(y)
            if y < self.n:
                return y


def sha_hex(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def nonempty_files(files):
    return sorted([f for f in files if sum(f["row_groups"]) > 0], key=lambda f: f["path"].encode())


def source_fingerprint(files):
    text = "prep-source/v1\n"
    for f in nonempty_files(files):
        rg = ",".join(str(r) for r in f["row_groups"])
        text += "%s\t%d\t%s\t%s\n" % (f["path"], f["size"], f["footer_sha256"].lower(), rg)
    return sha_hex(text.encode())


def blocks_of(files):
    """Non-empty row groups in id order: (start, rows)."""
    out, n = [], 0
    for f in nonempty_files(files):
        for r in f["row_groups"]:
            if r > 0:
                out.append((n, r))
                n += r
    return out, n


class Plan:
    def __init__(self, files, cfg, packing=None):
        self.cfg = cfg
        self.blocks, self.n = blocks_of(files)
        if packing is not None:
            self.n = packing["rows"]  # PLAN.md 12: the samples are the packed rows
        self.g = cfg["global_batch"]
        self.r = cfg["world_size"]
        self.b = self.g // self.r
        self.mode = cfg["shuffle"]
        self.rem = cfg["remainder"]
        self.sf = source_fingerprint(files)
        c = cfg
        order = "prep-order/v1\nalgorithm=%s\nsource=%s\nseed=%d\nglobal_batch=%d\nshuffle=%s\nwindow=%d\nremainder=%s\n" % (
            ALGORITHM, self.sf, c["seed"], c["global_batch"], c["shuffle"], c.get("window", 0), c["remainder"])
        if self.mode == "partitioned":
            order += "world_size=%d\n" % c["world_size"]
        if packing is not None:
            order += packing_line(packing)
        self.order_fp = sha_hex(order.encode())
        self.fp = sha_hex(("%s\norder=%s\nepochs=%d\nworld_size=%d\nworkers=%d\n" % (
            FORMAT, self.order_fp, c["epochs"], c["world_size"], c["workers"])).encode())
        self.dropped = self.padded = 0
        self.partition_rows = []
        if self.mode != "partitioned":
            n, g = self.n, self.g
            if self.rem == "drop":
                self.steps = n // g
                self.limit = self.steps * g
                self.dropped = n - self.limit
            elif self.rem == "pad":
                self.steps = -(-n // g)
                self.limit = self.steps * g
                self.padded = self.limit - n
            else:
                self.steps = -(-n // g)
                self.limit = n
            return
        # Partitioned: blocks by rows descending, index ascending; each to the
        # rank with the fewest rows so far, then the lowest rank.
        loads = [0] * self.r
        owner = [0] * len(self.blocks)
        for bi in sorted(range(len(self.blocks)), key=lambda i: (-self.blocks[i][1], i)):
            rank = min(range(self.r), key=lambda q: (loads[q], q))
            owner[bi] = rank
            loads[rank] += self.blocks[bi][1]
        self.parts = [[bi for bi in range(len(self.blocks)) if owner[bi] == q] for q in range(self.r)]
        self.partition_rows = loads
        lo = [nr // self.b for nr in loads]
        hi = [-(-nr // self.b) for nr in loads]
        self.steps = min(lo) if self.rem == "drop" else max(hi)
        used = self.steps * self.b
        for nr in loads:
            if self.rem == "drop":
                self.dropped += nr - used
            elif self.rem == "pad":
                assert nr > 0 or self.steps == 0, "partitioned pad with an empty rank"
                self.padded += used - nr

    # --- orders: a function from position to id, per epoch (and rank) ---

    def lane(self, epoch, rank):
        """(at, n, limit) of the sequence holding rank's batches."""
        seed = self.cfg["seed"]
        if self.mode == "none":
            return (lambda q: q), self.n, self.limit
        if self.mode == "global":
            p = Perm(self.n, "global", seed, epoch, 0)
            return p.apply, self.n, self.limit
        if self.mode == "blocks":
            k = self.cfg["window"]
            nb = len(self.blocks)
            bp = Perm(nb, "blocks", seed, epoch, 0)
            seq = [self.blocks[bp.apply(q)] for q in range(nb)]
            ids = []
            for t in range(0, nb, k):
                win = []
                for start, rows in seq[t:t + k]:
                    win.extend(range(start, start + rows))
                wp = Perm(len(win), "window", seed, epoch, t // k)
                ids.extend(win[wp.apply(o)] for o in range(len(win)))
            return ids.__getitem__, self.n, self.limit
        part = []
        for bi in self.parts[rank]:
            start, rows = self.blocks[bi]
            part.extend(range(start, start + rows))
        p = Perm(len(part), "partition", seed, epoch, rank)
        limit = len(part) if self.rem == "partial" else self.steps * self.b
        return (lambda q: part[p.apply(q)]), len(part), limit

    def rank_batch(self, epoch, rank, step, cache):
        key = (epoch, rank if self.mode == "partitioned" else 0)
        if key not in cache:
            cache[key] = self.lane(epoch, rank)
        at, n, limit = cache[key]
        start = step * self.b if self.mode == "partitioned" else step * self.g + rank * self.b
        ids, pads = [], 0
        for q in range(start, min(start + self.b, limit)):
            if q < n:
                ids.append(at(q))
            else:
                ids.append(at((q - n) % n))
                pads += 1
        return ids, pads

    def epoch_digest(self, epoch, cache):
        per = max(1, LEAF_SLOTS // self.g)
        leaves = b""
        for j in range(0, self.steps, per):
            h = hashlib.sha256()
            for k in range(j, min(self.steps, j + per)):
                for r in range(self.r):
                    ids, pads = self.rank_batch(epoch, r, k, cache)
                    for i, x in enumerate(ids):
                        h.update(le64(x | PAD_BIT if i >= len(ids) - pads else x))
            leaves += h.digest()
        return sha_hex(b"prep-epoch/v1\0" + le64(self.steps) + leaves)


def check(golden):
    bad = []

    def expect(what, got, want):
        if got != want:
            bad.append("%s: got %r, want %r" % (what, got, want))

    if golden["algorithm"] != ALGORITHM or golden["format"] != FORMAT:
        bad.append("golden file is for %s/%s" % (golden["format"], golden["algorithm"]))
    for v in golden["perms"]:
        p = Perm(v["n"], v["purpose"], v["seed"], v["epoch"], v["index"])
        name = "perm n=%d %s seed=%d epoch=%d index=%d" % (v["n"], v["purpose"], v["seed"], v["epoch"], v["index"])
        expect(name + " keys", ["%016x" % k for k in p.keys], v["keys"])
        expect(name + " first", [p.apply(x) for x in range(len(v["first"]))], v["first"])
        for x, y in v["probes"]:
            expect(name + " apply(%d)" % x, p.apply(x), y)
            expect(name + " invert(%d)" % y, p.invert(y), x)
    for i, v in enumerate(golden["plans"]):
        pl = Plan(v["source"]["files"] + v["source"].get("empty_files", []), v["config"])
        name = "plan %d (%s)" % (i, v["name"])
        expect(name + " source fingerprint", pl.sf, v["source_fingerprint"])
        expect(name + " order fingerprint", pl.order_fp, v["order_fingerprint"])
        expect(name + " fingerprint", pl.fp, v["fingerprint"])
        d = v["derived"]
        expect(name + " derived", (pl.n, pl.steps, pl.dropped, pl.padded, pl.partition_rows),
               (d["samples"], d["steps_per_epoch"], d["dropped_per_epoch"], d["padded_per_epoch"], d.get("partition_rows", [])))
        cache = {}
        for e, dig in enumerate(v["epoch_digests"]):
            expect(name + " epoch %d digest" % e, pl.epoch_digest(e, cache), dig)
        for bt in v["batches"]:
            got = pl.rank_batch(bt["epoch"], bt["rank"], bt["step"], cache)
            expect(name + " batch e%d r%d s%d" % (bt["epoch"], bt["rank"], bt["step"]), list(got), [bt["ids"], bt["pads"]])
    return bad


# ---- PLAN.md 12: packing token lists into rows of L tokens -------------


def lengths_digest(lengths):
    data = b"prep-lengths/v1\0" + le64(len(lengths)) + b"".join(struct.pack("<I", n) for n in lengths)
    return sha_hex(data)


def pack(lengths, opts, seed, shuffle):
    """Returns (rows, record): rows is a list of rows, each a list of
    (doc, offset, length) pieces in order."""
    k = opts.get("window") or 8192
    d = len(lengths)
    perm = Perm(d, "pack", seed, 0, 0) if shuffle else None
    visit = [perm.apply(q) if shuffle else q for q in range(d)]
    return pack_windows(lengths, opts, [visit[lo:lo + k] for lo in range(0, d, k)])


def pack_windows(lengths, opts, windows):
    """Packs each window (a list of document ids in visiting order) in
    turn: rows never span windows."""
    L = opts["length"]
    split = opts.get("split") or "chunk"
    eod = 1 if opts.get("eod") is not None else 0
    rec = dict(documents=len(lengths), empty_documents=0, dropped_documents=0, dropped_tokens=0, tokens=0)
    rows = []
    for window in windows:
        pend = []  # (length, arrival, doc, offset)
        for doc in window:
            if lengths[doc] == 0:
                rec["empty_documents"] += 1
                continue
            n = lengths[doc] + eod
            if n > L and split == "none":
                rec["dropped_documents"] += 1
                rec["dropped_tokens"] += n
                continue
            rec["tokens"] += n
            for off in range(0, n, L):
                pend.append((min(L, n - off), len(pend), doc, off))
        pend.sort(key=lambda p: (-p[0], p[1]))
        bins, free = [], []
        for ln, _, doc, off in pend:
            best = None
            for i, f in enumerate(free):
                if f >= ln and (best is None or f < free[best]):
                    best = i
            if best is None:
                bins.append([])
                free.append(L)
                best = len(bins) - 1
            bins[best].append((doc, off, ln))
            free[best] -= ln
        rows.extend(bins)
    rec["rows"] = len(rows)
    rec["pad_slots"] = len(rows) * L - rec["tokens"]
    rec["lengths_digest"] = lengths_digest(lengths)
    data = b"prep-pack/v1\0" + le64(len(rows))
    for r in rows:
        data += le64(len(r)) + b"".join(le64(doc) + le64(off) + le64(ln) for doc, off, ln in r)
    rec["digest"] = sha_hex(data)
    return rows, rec


def packing_line(pk):
    eod = "none" if pk.get("eod") is None else str(pk["eod"])
    line = "packing=column=%d:%s,length=%d,split=%s,eod=%s,pad=%d,window=%d,rows=%d,digest=%s" % (
        len(pk["column"].encode()), pk["column"], pk["length"], pk["split"], eod, pk["pad"], pk["window"], pk["rows"], pk["digest"])
    if pk.get("scope"):  # a packed mixture, 12.1
        line += ",scope=" + pk["scope"]
        if pk.get("source_rows") is not None:
            line += ",source_rows=" + ";".join(str(r) for r in pk["source_rows"])
        if pk.get("epochs") is not None:  # packed per epoch (prep-plan/v2)
            line += ",epochs=%d" % len(pk["epochs"])
    return line + "\n"


def check_packings(golden):
    bad = []

    def expect(what, got, want):
        if got != want:
            bad.append("%s: got %r, want %r" % (what, got, want))

    for v in golden["packings"]:
        rows, rec = pack(v["lengths"], v["options"], v["seed"], v["shuffle"])
        name = "packing %s" % v["name"]
        for key, want in v["record"].items():
            if key in rec:
                expect(name + " " + key, rec[key], want)
        expect(name + " rows", [[list(p) for p in r] for r in rows], v["rows"])
    for v in golden["plans"]:
        pk = v["packing"]
        rows, rec = pack(v["lengths"], pk, v["config"]["seed"], v["config"]["shuffle"] == "global")
        name = "packed plan %s" % v["name"]
        expect(name + " digest", rec["digest"], pk["digest"])
        pl = Plan(v["source"]["files"], v["config"], packing=pk)
        expect(name + " order fingerprint", pl.order_fp, v["order_fingerprint"])
        expect(name + " fingerprint", pl.fp, v["fingerprint"])
        cache = {}
        for e, dig in enumerate(v["epoch_digests"]):
            expect(name + " epoch %d digest" % e, pl.epoch_digest(e, cache), dig)
        for bt in v["batches"]:
            got = pl.rank_batch(bt["epoch"], bt["rank"], bt["step"], cache)
            expect(name + " batch e%d r%d s%d" % (bt["epoch"], bt["rank"], bt["step"]), list(got), [bt["ids"], bt["pads"]])
    return bad


def uvarint(b, pos):
    """Unsigned LEB128 at b[pos:]: (value, next position)."""
    x, shift = 0, 0
    while True:
        c = b[pos]
        pos += 1
        x |= (c & 0x7F) << shift
        if c < 0x80:
            return x, pos
        shift += 7


# --- PLAN.md section 11: mixtures of named sources ---

MIXTURE = "prep-mixture/v1"


class Mixture:
    def __init__(self, files, cfg, mix):
        self.cfg = cfg
        self.g = cfg["global_batch"]
        self.r = cfg["world_size"]
        self.b = self.g // self.r
        self.shuffle = cfg["shuffle"] == "global"
        assert cfg["shuffle"] in ("global", "none")
        blocks, self.n_ids = blocks_of(files)
        # Source i's local rows: the ids of its files' rows, in id order.
        path_start, start = {}, 0
        for f in nonempty_files(files):
            path_start[f["path"]] = (start, sum(f["row_groups"]))
            start += sum(f["row_groups"])
        self.rows = []
        for s in mix["sources"]:
            ids = []
            for p in sorted(s["files"], key=lambda x: x.encode()):
                if p in path_start:
                    st, n = path_start[p]
                    ids.extend(range(st, st + n))
            ids = sorted(ids)
            if s.get("filter"):
                # 11.7: the selected ranges of the source's rows.
                raw = base64.b64decode(s["selection"], validate=True)
                sel, pos, end = [], 0, 0
                while pos < len(raw):
                    gap, pos = uvarint(raw, pos)
                    ln, pos = uvarint(raw, pos)
                    sel.append((end + gap, ln))
                    end += gap + ln
                s["_digest"] = "sha256:" + hashlib.sha256(b"".join(le64(a) + le64(b) for a, b in sel)).hexdigest()
                ids = [ids[k] for a, ln in sel for k in range(a, a + ln)]
            self.rows.append(ids)
        n = [len(x) for x in self.rows]
        self.t = mix.get("epoch_samples") or sum(n)
        # 11.1 quotas: exact rational weights, largest remainder.
        w = [Fraction(s["weight"]) if s.get("weight") else Fraction(n[i], sum(n)) for i, s in enumerate(mix["sources"])]
        shares = [self.t * x / sum(w) for x in w]
        self.c = [sh.numerator // sh.denominator for sh in shares]
        left = self.t - sum(self.c)
        for i in sorted(range(len(w)), key=lambda i: (-(shares[i] - self.c[i]), i))[:left]:
            self.c[i] += 1
        self.canonical = "%s\nepoch_samples=%d\n" % (MIXTURE, self.t)
        for s in mix["sources"]:
            self.canonical += "source\t%s\t%s\n" % (s["name"], s.get("weight") or "rows")
            if s.get("filter"):
                self.canonical += "filter\t%s\nselection\t%s\n" % (hashlib.sha256(s["filter"].encode()).hexdigest(), s["_digest"])
            for p in s.get("partitions") or []:
                self.canonical += "partition\t%s\t%s\n" % (p["key"], p["type"])
            for p in s["files"]:
                self.canonical += "file\t%s\n" % p
        self.compose()
        # 6 with N replaced by T
        T, g = self.t, self.g
        rem = cfg["remainder"]
        self.dropped = self.padded = 0
        if rem == "drop":
            self.steps = T // g
            self.limit = self.steps * g
            self.dropped = T - self.limit
        elif rem == "pad":
            self.steps = -(-T // g)
            self.limit = self.steps * g
            self.padded = self.limit - T
        else:
            self.steps = -(-T // g)
            self.limit = T

    def compose(self):
        """11.3: per-batch counts, full batches then the partial one."""
        T, G, m = self.t, self.g, len(self.c)
        K, gp = T // G, T % G
        flG = [G * c // T for c in self.c]
        flP = [gp * c // T for c in self.c]
        x = [self.c[i] - K * flG[i] - flP[i] for i in range(m)]
        part = [0] * m
        if gp:
            lp = gp - sum(flP)
            for i in sorted(range(m), key=lambda i: (-((gp * self.c[i]) % T), i))[:lp]:
                part[i] = 1
                x[i] -= 1
        r = list(x)
        given = [0] * m
        L = G - sum(flG)
        self.batch_counts = []
        for k in range(K):
            left = K - k
            cnt = list(flG)
            urgent = [i for i in range(m) if r[i] == left]
            for i in urgent:
                cnt[i] += 1
            cand = [i for i in range(m) if r[i] > 0 and r[i] != left]
            cand.sort(key=lambda i: (-((k + 1) * x[i] - given[i] * K), i))
            for i in urgent + cand[:L - len(urgent)]:
                if i not in urgent:
                    cnt[i] += 1
                r[i] -= 1
                given[i] += 1
            self.batch_counts.append(cnt)
        if gp:
            self.batch_counts.append([flP[i] + part[i] for i in range(m)])
        for i in range(m):
            assert sum(bc[i] for bc in self.batch_counts) == self.c[i]

    def epoch_order(self, e):
        """The T ids of epoch e's slots (11.2, 11.4)."""
        perms = {}
        out = []
        start = [0] * len(self.c)
        for cnt in self.batch_counts:
            keys = []
            for i, ci in enumerate(cnt):
                for j in range(ci):
                    keys.append((Fraction(2 * j + 1, 2 * ci), i, j))
            keys.sort()
            for _, i, j in keys:
                n = len(self.rows[i])
                p = e * self.c[i] + start[i] + j
                pas, off = divmod(p, n)
                if self.shuffle:
                    if (i, pas) not in perms:
                        perms[(i, pas)] = Perm(n, "mixture", self.cfg["seed"], pas, i)
                    off = perms[(i, pas)].apply(off)
                out.append(self.rows[i][off])
            for i in range(len(cnt)):
                start[i] += cnt[i]
        return out

    def rank_batch(self, e, rank, step, cache):
        if e not in cache:
            cache[e] = self.epoch_order(e)
        order = cache[e]
        ids, pads = [], 0
        q0 = step * self.g + rank * self.b
        for q in range(q0, min(q0 + self.b, self.limit)):
            if q < self.t:
                ids.append(order[q])
            else:
                ids.append(order[(q - self.t) % self.t])
                pads += 1
        return ids, pads

    # Section 8's epoch digest over this mixture's batches: the same
    # construction as a plan of one pool (g, r, steps and rank_batch).
    epoch_digest = Plan.epoch_digest


def check_mixture(golden):
    bad = []

    def expect(what, got, want):
        if got != want:
            bad.append("%s: got %r, want %r" % (what, got, want))

    for v in golden["plans"]:
        files = v["source"]["files"] + v["source"].get("empty_files", [])
        name = "mixture plan %s" % v["name"]
        base = Plan(files, v["config"])  # fingerprints of section 8
        mx = Mixture(files, v["config"], v["mixture"])
        expect(name + " source fingerprint", base.sf, v["source_fingerprint"])
        c = v["config"]
        order = "prep-order/v1\nalgorithm=%s\nsource=%s\nseed=%d\nglobal_batch=%d\nshuffle=%s\nwindow=%d\nremainder=%s\n" % (
            ALGORITHM, base.sf, c["seed"], c["global_batch"], c["shuffle"], c.get("window", 0), c["remainder"])
        order += "mixture=%s\n" % sha_hex(mx.canonical.encode())
        order_fp = sha_hex(order.encode())
        expect(name + " order fingerprint", order_fp, v["order_fingerprint"])
        fp = sha_hex(("%s\norder=%s\nepochs=%d\nworld_size=%d\nworkers=%d\n" % (
            FORMAT, order_fp, c["epochs"], c["world_size"], c["workers"])).encode())
        expect(name + " fingerprint", fp, v["fingerprint"])
        res = v["resolved"]
        expect(name + " epoch samples", mx.t, res["epoch_samples"])
        expect(name + " quotas", mx.c, [s["samples_per_epoch"] for s in res["sources"]])
        expect(name + " rows", [len(x) for x in mx.rows], [s["rows"] for s in res["sources"]])
        expect(name + " selection digests", [s.get("_digest", "") for s in v["mixture"]["sources"]],
               [s.get("selection_digest", "") for s in res["sources"]])
        d = v["derived"]
        expect(name + " derived", (mx.n_ids, mx.steps, mx.dropped, mx.padded),
               (d["samples"], d["steps_per_epoch"], d["dropped_per_epoch"], d["padded_per_epoch"]))
        cache = {}
        for e, dig in enumerate(v["epoch_digests"]):
            expect(name + " epoch %d digest" % e, mx.epoch_digest(e, cache), dig)
        for bt in v["batches"]:
            got = mx.rank_batch(bt["epoch"], bt["rank"], bt["step"], cache)
            expect(name + " batch e%d r%d s%d" % (bt["epoch"], bt["rank"], bt["step"]), list(got), [bt["ids"], bt["pads"]])
    return bad


# --- PLAN.md 12.1: packing the documents each epoch of a mixture draws ---

FORMAT_PACKED_MIXTURE = "prep-plan/v2"


def pack_mixture(mx, lengths, opts, epoch):
    """12.1: epoch e packs its own draws: source i's draw d < c_i is its
    stream position e*c_i + d (11.2); across: all draws merged by the key
    (2j+1)/(2 c_i), ties to the lower source, in windows of K; per_source:
    each source's draws in order, in windows of their own."""
    k = opts.get("window") or 8192
    seed = mx.cfg["seed"]

    def draw(i, d):
        n = len(mx.rows[i])
        pas, off = divmod(epoch * mx.c[i] + d, n)
        if mx.shuffle:
            off = Perm(n, "mixture", seed, pas, i).apply(off)
        return mx.rows[i][off]

    if opts["scope"] == "per_source":
        rows, rec, source_rows = [], None, []
        windows = []
        for i, c in enumerate(mx.c):
            seq = [draw(i, d) for d in range(c)]
            windows.append([seq[lo:lo + k] for lo in range(0, c, k)])
        # Pack all windows in one run (the counts accumulate), noting each
        # source's rows.
        flat = [w for ws in windows for w in ws]
        rows, rec = pack_windows(lengths, opts, flat)
        at = 0
        for ws in windows:
            r, _ = pack_windows(lengths, opts, ws)
            source_rows.append(len(r))
            at += len(r)
        assert at == len(rows)
        rec["source_rows"] = source_rows
        return rows, rec
    keys = []
    for i, c in enumerate(mx.c):
        for j in range(c):
            keys.append((Fraction(2 * j + 1, 2 * c), i, j))
    keys.sort()
    seq = [draw(i, j) for _, i, j in keys]
    return pack_windows(lengths, opts, [seq[lo:lo + k] for lo in range(0, len(seq), k)])


def epochs_digest(eps):
    """12.1: the packing digest of a packed mixture, over its epochs."""
    data = b"prep-pack-epochs/v1\0" + le64(len(eps))
    for ep in eps:
        assert ep["digest"].startswith("sha256:")
        data += bytes.fromhex(ep["digest"][7:])
        sr = ep.get("source_rows") or []
        data += le64(len(sr)) + b"".join(le64(r) for r in sr)
    return sha_hex(data)


class PackedMixturePlan(Plan):
    """Sections 5-8 over the packed rows of every epoch (12.1): epoch e
    holds its own P_e rows, ids O_e ... O_e+P_e-1, and every epoch has the
    same steps S."""

    def __init__(self, files, cfg, packing, prows):
        Plan.__init__(self, files, cfg, packing=packing)
        self.prows = prows
        self.base = [sum(prows[:e]) for e in range(len(prows) + 1)]
        g, lo, hi = self.g, min(prows), max(prows)
        self.dropped = self.padded = 0
        if self.rem == "drop":
            self.steps = lo // g
            self.dropped = hi - self.steps * g
        else:
            self.steps = -(-hi // g)
            if self.rem == "pad":
                self.padded = self.steps * g - lo
                assert lo > 0 or self.steps == 0, "pad with an epoch of no rows"

    def lane(self, epoch, rank):
        n, base = self.prows[epoch], self.base[epoch]
        limit = n if self.rem == "partial" else self.steps * self.g
        if self.mode == "none":
            return (lambda q: base + q), n, limit
        p = Perm(n, "global", self.cfg["seed"], epoch, 0)
        return (lambda q: base + p.apply(q)), n, limit


def check_packed_mixture(golden):
    bad = []

    def expect(what, got, want):
        if got != want:
            bad.append("%s: got %r, want %r" % (what, got, want))

    if golden["format"] != FORMAT_PACKED_MIXTURE or golden["algorithm"] != ALGORITHM:
        bad.append("golden file is for %s/%s" % (golden["format"], golden["algorithm"]))
    for v in golden["plans"]:
        files = v["source"]["files"] + v["source"].get("empty_files", [])
        name = "packed mixture %s" % v["name"]
        c = v["config"]
        mx = Mixture(files, c, v["mixture"])
        expect(name + " quotas", mx.c, [s["samples_per_epoch"] for s in v["resolved"]["sources"]])
        opts = dict(v["options"])
        pk = v["packing"]
        eps = []
        total = dict(rows=0, tokens=0, pad_slots=0, empty_documents=0, dropped_documents=0, dropped_tokens=0)
        for e in range(c["epochs"]):
            rows, rec = pack_mixture(mx, v["lengths"], opts, e)
            expect(name + " documents", rec["documents"], pk["documents"])
            expect(name + " lengths digest", rec["lengths_digest"], pk["lengths_digest"])
            ep = {key: rec[key] for key in ("rows", "tokens", "pad_slots", "empty_documents", "dropped_documents", "dropped_tokens")}
            if "source_rows" in rec:
                ep["source_rows"] = rec["source_rows"]
            ep["digest"] = rec["digest"]
            eps.append(ep)
            for key in total:
                total[key] += rec[key]
        expect(name + " epochs", eps, pk["epochs"])
        for key, got in total.items():
            expect(name + " " + key, got, pk[key])
        expect(name + " digest", epochs_digest(eps), pk["digest"])
        expect(name + " source_rows", None, pk.get("source_rows"))
        pk = dict(pk)
        pl = PackedMixturePlan(files, c, pk, [ep["rows"] for ep in eps])
        order = "prep-order/v1\nalgorithm=%s\nsource=%s\nseed=%d\nglobal_batch=%d\nshuffle=%s\nwindow=%d\nremainder=%s\n" % (
            ALGORITHM, pl.sf, c["seed"], c["global_batch"], c["shuffle"], c.get("window", 0), c["remainder"])
        order += packing_line(pk)
        order += "mixture=%s\n" % sha_hex(mx.canonical.encode())
        order_fp = sha_hex(order.encode())
        expect(name + " order fingerprint", order_fp, v["order_fingerprint"])
        fp = sha_hex(("%s\norder=%s\nepochs=%d\nworld_size=%d\nworkers=%d\n" % (
            FORMAT_PACKED_MIXTURE, order_fp, c["epochs"], c["world_size"], c["workers"])).encode())
        expect(name + " fingerprint", fp, v["fingerprint"])
        d = v["derived"]
        expect(name + " derived", (pl.n, len(pl.blocks), pl.steps, pl.dropped, pl.padded),
               (d["samples"], d["blocks"], d["steps_per_epoch"], d["dropped_per_epoch"], d["padded_per_epoch"]))
        cache = {}
        for e, dig in enumerate(v["epoch_digests"]):
            expect(name + " epoch %d digest" % e, pl.epoch_digest(e, cache), dig)
        for bt in v["batches"]:
            got = pl.rank_batch(bt["epoch"], bt["rank"], bt["step"], cache)
            expect(name + " batch e%d r%d s%d" % (bt["epoch"], bt["rank"], bt["step"]), list(got), [bt["ids"], bt["pads"]])
    return bad


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        golden = json.load(f)
    if "packed_mixture" in golden:
        bad = check_packed_mixture(golden)
        n = len(golden["plans"])
        what = "packed mixtures"
    elif "packings" in golden:
        bad = check_packings(golden)
        n = len(golden["packings"]) + len(golden["plans"])
        what = "golden groups"
    elif "mixture" in golden:
        bad = check_mixture(golden)
        n = len(golden["plans"])
        what = "mixture plans"
    else:
        bad = check(golden)
        n = len(golden["perms"]) + len(golden["plans"])
        what = "golden groups"
    for b in bad[:50]:
        print(b)
    print("%d %s, %d mismatches" % (n, what, len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
