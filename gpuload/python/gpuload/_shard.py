"""A shard file read in pure Python and NumPy over a memory map (the host
read path: no native library, no Go runtime, so it works in any process,
forked or not).

Written from shardfmt/FORMAT.md: at open the file is checked in the
format's validation order (sizes, magic, byte order, version, header CRC,
every section offset, footer, tensor table, metadata, batch table, and for
format 2.0 every block's offset and length); a jagged tensor's offsets are
checked before its batch is handed out. The table CRCs are computed in pure
Python (about 0.1 µs per byte: a 16-byte batch table entry costs ~1.6 µs,
once per open). Block checksums (``block_crc``) and
sample-id checksums are not computed here: they are the native loader's
``verify_checksums=True``.

The file is mapped copy-on-write (``MAP_PRIVATE``): arrays over it are
writable, a write changes only this process's copy of the page, never the
file. Every array holds the mapping (NumPy's ``base``), so its bytes stay
valid as long as it lives, whatever happens to the reader or the file.
"""

import copy
import json
import mmap
import os
import struct

import numpy as np

from ._errors import GL_ERR_CORRUPT, GL_ERR_IO, GL_ERR_PLAN_MISMATCH, GpuloadError

# Shard dtype codes (FORMAT.md, "dtype codes") -> NumPy dtypes. BF16 and FP8
# have no NumPy dtype: raw unsigned integers of the same width.
NP_DTYPES = {
    1: np.dtype(np.bool_), 2: np.dtype("<u1"), 3: np.dtype("<i1"), 4: np.dtype("<u2"),
    5: np.dtype("<i2"), 6: np.dtype("<u4"), 7: np.dtype("<i4"), 8: np.dtype("<u8"),
    9: np.dtype("<i8"), 10: np.dtype("<f2"), 11: np.dtype("<u2"), 12: np.dtype("<f4"),
    13: np.dtype("<f8"), 14: np.dtype("<u1"), 15: np.dtype("<u1"),
}

MAGIC = b"\x89SHARD\r\n"
FOOTER_MAGIC = b"\x89SHEND\r\n"
_HEADER = struct.Struct("<8sHHIIIII14Q4I")  # the header's first 160 bytes
_FOOTER = struct.Struct("<8s3Q5I8xI")
_ENTRY = struct.Struct("<HHIQ8QQQQH")  # tensor table entry, bytes [0, 106)
_U64_MAX = (1 << 64) - 1


def _crc32c_table():
    poly, tab = 0x82F63B78, []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        tab.append(c)
    return tab


_CRC_TABLE = _crc32c_table()


def crc32c(data):
    """CRC-32C (Castagnoli, RFC 3720; FORMAT.md "Conventions") of a bytes-like
    object, in pure Python: for the small sections checked at open."""
    c, tab = 0xFFFFFFFF, _CRC_TABLE
    for b in bytes(data):
        c = tab[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def _align(x, a):
    return (x + a - 1) // a * a


class Tensor:
    """One tensor table entry: name, dtype (NumPy), code, shape (per sample,
    or per value for a jagged tensor), sample_bytes, slab_offset, jagged."""

    __slots__ = ("name", "code", "dtype", "shape", "sample_bytes", "slab_offset", "slab_size", "jagged", "strides")

    def __init__(self, name, code, shape, sample_bytes, slab_offset, slab_size, jagged):
        self.name, self.code, self.dtype = name, code, NP_DTYPES[code]
        self.shape, self.sample_bytes = shape, sample_bytes
        self.slab_offset, self.slab_size, self.jagged = slab_offset, slab_size, jagged
        # C-order strides of one sample (or value), in bytes
        st, s = [], self.dtype.itemsize
        for d in reversed(shape):
            st.append(s)
            s *= d
        self.strides = tuple(reversed(st))


class MappedShard:
    """A shard file, validated and mapped. ``path``, ``major``,
    ``batch_size``, ``num_batches``, ``tensors`` (list of Tensor, table
    order), ``meta`` (the metadata object), ``file_id`` ((st_dev, st_ino,
    size) of the mapped file).

    Raises GpuloadError: GL_ERR_IO (cannot open or map; a symbolic link is
    never followed), GL_ERR_CORRUPT (any format rule broken, naming the
    section and offset), GL_ERR_PLAN_MISMATCH (``expect`` keys such as
    plan_fingerprint, epoch, rank differ from the metadata)."""

    def __init__(self, path, expect=None, size=None):
        self.path = os.fspath(path)
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError as e:
            raise GpuloadError(GL_ERR_IO, f"gpuload: opening shard: {self.path}: {e.strerror}"
                               + (" (a symbolic link, never followed)" if os.path.islink(self.path) else "")) from None
        try:
            st = os.fstat(fd)
            n = st.st_size
            if size is not None and n != size:
                self._bad("manifest", 0, f"expected size {size} bytes (manifest.json), actual size {n} bytes")
            if n < 320:
                self._bad("header", 0, f"file of {n} bytes is shorter than a header and a footer (320)")
            head = os.pread(fd, 256, 0)
            self._header(head, n)
            if self.header_len > 256:
                head = os.pread(fd, self.header_len, 0)
            if crc32c(head[:self.header_len - 4]) != struct.unpack_from("<I", head, self.header_len - 4)[0]:
                self._bad("header", self.header_len - 4, "header CRC mismatch")
            self.mm = mmap.mmap(fd, n, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        self.file_id = (st.st_dev, st.st_ino, n)
        self.mtime_ns = st.st_mtime_ns
        self.buf = memoryview(self.mm)
        self._footer(head)
        self._tensor_table()
        self._metadata(expect)
        self._batch_table()
        self._views()

    def remap(self):
        """A copy of this reader over a fresh private mapping of the same
        file, without validating it again (an open of a 1 MB-batch shard
        costs ~1 ms here, mostly the table CRCs; this ~30 µs): arrays over
        the copy never see writes made through this reader's arrays.
        Returns None when the path no longer holds the file validated (other
        device, inode, size or modification time): open it anew. Raises
        GpuloadError (GL_ERR_IO) when it cannot be opened or mapped."""
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError as e:
            raise GpuloadError(GL_ERR_IO, f"gpuload: opening shard: {self.path}: {e.strerror}") from None
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) != self.file_id + (self.mtime_ns,):
                return None
            mm = mmap.mmap(fd, st.st_size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        new = copy.copy(self)
        new.mm = mm
        new.buf = memoryview(mm)
        new._views()
        return new

    def _bad(self, section, off, msg, code=GL_ERR_CORRUPT):
        raise GpuloadError(code, f"gpuload: {self.path}: corrupt shard: {section} at offset {off}: {msg}")

    def _header(self, h, n):
        (magic, major, minor, order, hlen, tlen, blen, nt, flen, b, nb, tt_off, tt_len, meta_off, meta_len, data_off,
         bsz, bt_off, bt_len, ids_off, ids_len, f_off, self.tt_crc, self.meta_crc, self.bt_crc, _) = _HEADER.unpack_from(h)
        if magic != MAGIC:
            self._bad("header", 0, "bad magic: not a shard file")
        if order != 0x01020304:
            self._bad("header", 12, f"byte-order marker {order:#x}, want 0x01020304")
        if major not in (1, 2):
            self._bad("header", 8, f"unsupported version {major}.{minor} (this reader reads 1.x and 2.x)")
        if hlen < 256 or hlen % 8 or hlen > 65536 or hlen > n:
            self._bad("header", 16, f"header_len {hlen}")
        self.header_len, self.major, self.minor = hlen, major, minor
        if flen != n:
            self._bad("header", 32, f"expected size {flen} bytes, actual size {n} bytes")
        if not (tlen >= 128 and tlen % 8 == 0 and tlen <= 4096) or not (blen >= 16 and blen % 8 == 0 and blen <= 4096):
            self._bad("header", 20, f"entry lengths {tlen}, {blen}")
        if not 1 <= nt <= 4096 or not 1 <= b < 1 << 32:
            self._bad("header", 28, f"num_tensors {nt}, batch_size {b}")
        ok = (tt_off == hlen and tt_len >= nt * tlen and tt_len % 8 == 0 and meta_off == tt_off + tt_len
              and meta_len <= 1 << 20 and bsz > 0 and bsz % 4096 == 0 and data_off % 4096 == 0
              and bt_len == nb * blen and ids_len == nb * b * 8)
        if major == 1:
            ok = ok and (data_off == _align(meta_off + meta_len, 4096) and bt_off == data_off + nb * bsz
                         and ids_off == bt_off + bt_len and f_off == ids_off + ids_len)
        else:
            ok = ok and (ids_off == meta_off + meta_len and data_off == _align(ids_off + ids_len, 4096)
                         and data_off + nb * 4096 <= bt_off <= data_off + nb * bsz and (bt_off - data_off) % 4096 == 0
                         and f_off == bt_off + bt_len)
        if not ok or f_off + 64 != n or f_off > _U64_MAX:
            self._bad("header", 56, "section offsets and lengths do not follow the format's layout")
        self.tensor_entry_len, self.batch_entry_len, self.num_tensors = tlen, blen, nt
        self.batch_size, self.num_batches = b, nb
        self.tt_off, self.tt_len, self.meta_off, self.meta_len = tt_off, tt_len, meta_off, meta_len
        self.data_off, self.block_size, self.bt_off, self.bt_len = data_off, bsz, bt_off, bt_len
        self.ids_off, self.ids_len, self.footer_off = ids_off, ids_len, f_off

    def _footer(self, head):
        m = self.buf
        fo = self.footer_off
        magic, flen, nb, doff, c1, c2, c3, c4, hcrc, fcrc = _FOOTER.unpack_from(m, fo)
        if magic != FOOTER_MAGIC:
            self._bad("footer", fo, "bad footer magic: the file was not committed")
        if crc32c(m[fo:fo + 60]) != fcrc:
            self._bad("footer", fo + 60, "footer CRC mismatch")
        hc = struct.unpack_from("<I", head, self.header_len - 4)[0]
        if (flen, nb, doff, c1, c2, c3, hcrc) != (self.footer_off + 64, self.num_batches, self.data_off, self.tt_crc,
                                                  self.meta_crc, self.bt_crc, hc):
            self._bad("footer", fo, "footer fields differ from the header's")

    def _tensor_table(self):
        m, off = self.buf, self.tt_off
        if crc32c(m[off:off + self.tt_len]) != self.tt_crc:
            self._bad("tensor table", off, "tensor table CRC mismatch")
        self.tensors, names, end = [], set(), 0
        b = self.batch_size
        for i in range(self.num_tensors):
            eo = off + i * self.tensor_entry_len
            f = _ENTRY.unpack_from(m, eo)
            code, rank, nlen, noff = f[:4]
            shape = tuple(f[4:4 + rank])
            sbytes, soff, ssize, kind = f[12:16]
            if self.major == 1:
                kind = 0
            if code not in NP_DTYPES or rank > 8 or any(d < 1 for d in shape) or any(f[4 + rank:12]) or kind > 1:
                self._bad("tensor table", eo, f"entry {i}: dtype {code}, rank {rank}, shape {list(f[4:12])}, kind {kind}")
            if not (1 <= nlen <= 4096 and noff >= self.num_tensors * self.tensor_entry_len and noff + nlen <= self.tt_len):
                self._bad("tensor table", eo, f"entry {i}: name outside the name pool")
            try:
                name = bytes(m[off + noff:off + noff + nlen]).decode("utf-8")
            except UnicodeDecodeError:
                self._bad("tensor table", eo, f"entry {i}: name is not UTF-8")
            per = NP_DTYPES[code].itemsize
            for d in shape:
                per *= d
            want = (b + 1) * 8 if kind == 1 else b * sbytes
            if name in names or "\0" in name or sbytes != per or ssize != want or soff % 256 or soff < end \
                    or soff + ssize > self.block_size:
                self._bad("tensor table", eo, f"entry {i} ({name!r}): name, sample_bytes, slab offset or size")
            names.add(name)
            end = soff + ssize
            self.tensors.append(Tensor(name, code, shape, sbytes, soff, ssize, kind == 1))
        self.fixed_end = end
        self.jagged = [t for t in self.tensors if t.jagged]

    def _metadata(self, expect):
        m, off = self.buf, self.meta_off
        raw = m[off:off + self.meta_len]
        if crc32c(raw) != self.meta_crc:
            self._bad("metadata", off, "metadata CRC mismatch")
        try:
            self.meta = json.loads(bytes(raw).decode("utf-8"))
        except ValueError as e:
            self._bad("metadata", off, f"not JSON: {e}")
        pad_from = (self.ids_off + self.ids_len) if self.major == 2 else off + self.meta_len
        if any(m[pad_from:self.data_off]):
            self._bad("metadata", pad_from, "padding before the data is not zero")
        for k, v in (expect or {}).items():
            if self.meta.get(k) != v:
                raise GpuloadError(GL_ERR_PLAN_MISMATCH, f"gpuload: {self.path}: shard does not match the plan: "
                                   f"metadata {k} {self.meta.get(k)!r}, want {v!r}")

    def _batch_table(self):
        m, off, nb = self.buf, self.bt_off, self.num_batches
        if crc32c(m[off:off + self.bt_len]) != self.bt_crc:
            self._bad("batch table", off, "batch table CRC mismatch")
        el, b = self.batch_entry_len, self.batch_size
        tab = np.ndarray((nb, el // 4), "<u4", buffer=self.mm, offset=off).copy()
        self.counts = tab[:, 0].astype(np.int64)
        self.pads = tab[:, 1].astype(np.int64)
        if nb and (self.counts.max() > b or (self.pads > self.counts).any()):
            k = int(np.nonzero((self.counts > b) | (self.pads > self.counts))[0][0])
            self._bad("batch table", off + k * el, f"batch {k}: count {self.counts[k]}, pads {self.pads[k]}, batch size {b}")
        if self.major == 1:
            return
        J = len(self.jagged)
        if el < 32 + 8 * J:
            self._bad("header", 24, f"batch_entry_len {el} too short for {J} jagged tensors")
        q = np.ndarray((nb, el // 8), "<u8", buffer=self.mm, offset=off).copy()
        self.block_off = q[:, 2].astype(np.int64) if nb else np.zeros(0, np.int64)
        self.block_len = q[:, 3]
        self.values = q[:, 4:4 + J]
        # Canonical block layout (FORMAT.md "Block layout (2.0)"); value_off
        # is relative to the block.
        self.value_off = np.zeros((nb, J), np.int64)
        at = self.data_off
        for k in range(nb):
            end = self.fixed_end
            for j, t in enumerate(self.jagged):
                v = _align(end, 256)
                self.value_off[k, j] = v
                end = v + int(self.values[k, j]) * t.sample_bytes
            if int(self.block_off[k]) != at or int(self.block_len[k]) != _align(end, 4096) \
                    or self.block_len[k] > self.block_size:
                self._bad("batch table", off + k * el, f"batch {k}: block offset {self.block_off[k]} or length "
                          f"{self.block_len[k]} is not the canonical layout")
            at += int(self.block_len[k])
        if at != self.bt_off:
            self._bad("batch table", off, "blocks do not end at the batch table")

    def _views(self):
        """Prebuilt strided views over every batch, reused for each one:
        ids[k] is batch k's b sample ids; for format 1.0, full[i][k] is
        tensor i's slab of batch k ([b, shape...])."""
        nb, b, mm = self.num_batches, self.batch_size, self.mm
        self.base_addr = np.frombuffer(mm, np.uint8, count=1).ctypes.data  # address of file offset 0
        self.ids = np.ndarray((nb, b), "<u8", buffer=mm, offset=self.ids_off)
        self.full = None
        if self.major == 1:
            self.full = [np.ndarray((nb, b) + t.shape, t.dtype, buffer=mm, offset=self.data_off + t.slab_offset,
                                    strides=(self.block_size, t.sample_bytes) + t.strides) for t in self.tensors]

    def pad_flags(self, k):
        """Batch k's pad flags, bool [count]: the last ``pads`` are pads."""
        c, p = int(self.counts[k]), int(self.pads[k])
        f = np.zeros(c, np.bool_)
        if p:
            f[c - p:] = True
        return f

    def arrays(self, k):
        """Batch k's tensors in table order: a [count, shape...] array view
        of a fixed tensor, a (values [N, shape...], offsets int64 [count+1])
        pair of views of a jagged one (offsets checked first: GL_ERR_CORRUPT
        naming the entry)."""
        c = int(self.counts[k])
        if self.full is not None:
            return [f[k] if c == self.batch_size else f[k, :c] for f in self.full]
        out, j, bo, mm = [], 0, int(self.block_off[k]), self.mm
        for t in self.tensors:
            if not t.jagged:
                out.append(np.ndarray((c,) + t.shape, t.dtype, buffer=mm, offset=bo + t.slab_offset,
                                      strides=(t.sample_bytes,) + t.strides))
                continue
            n = int(self.values[k, j])
            offs = np.ndarray((self.batch_size + 1,), "<i8", buffer=mm, offset=bo + t.slab_offset)
            bad = offs[0] != 0 or (offs[1:] < offs[:-1]).any() or (offs[c:] != n).any()
            if bad:
                self._bad("block", bo + t.slab_offset, f"batch {k}: tensor {t.name!r}: offsets are not 0, "
                          f"non-decreasing, then {n} (the values count) from sample {c}")
            vals = np.ndarray((n,) + t.shape, t.dtype, buffer=mm, offset=bo + int(self.value_off[k, j]),
                              strides=(t.sample_bytes,) + t.strides)
            out.append((vals, offs[:c + 1]))
            j += 1
        return out

    def will_need(self, k):
        """Asks the kernel to read batch k's block ahead (madvise WILLNEED):
        the mapped path's prefetch. A no-op where unsupported."""
        if not 0 <= k < self.num_batches or not hasattr(self.mm, "madvise"):
            return
        if self.major == 1:
            off, n = self.data_off + k * self.block_size, self.block_size
        else:
            off, n = int(self.block_off[k]), int(self.block_len[k])
        try:
            self.mm.madvise(mmap.MADV_WILLNEED, off, n)
        except (OSError, ValueError):
            pass
