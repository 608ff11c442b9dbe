#!/bin/sh
# dlt-prep npy: arrays that NumPy wrote (.npy and .npz, every numeric dtype,
# C and Fortran order, 1-D to 4-D) into a dataset archive, compared with
# NumPy's own values; the kinds of y; hostile files.
. "$(dirname "$0")/lib.sh"
. "$DATA/prep/lib-prep.sh"

# NumPy from the python3 the tests run, or Debian's
PY=
for py in python3 /usr/bin/python3; do
	if "$py" -c "import numpy" 2>/dev/null; then
		PY=$py
		break
	fi
done
skip="# skip: no numpy (python3-numpy)"
test_numpy() {
	if test -n "$PY"; then
		test_expect_success "$1" "$2"
	else
		test_count=$((test_count + 1))
		echo "ok $test_count $skip"
	fi
}
mkdir out

# zips.py: the zip files that np.savez does not write but other writers
# do: members with data descriptors (a stream that cannot seek), and zip64
# central directories and end records.
cat >zips.py <<'EOF'
import io, struct, zlib, zipfile
import numpy as np

def npy(a, version=None):
    b = io.BytesIO()
    if version is None:
        np.save(b, a)
    else:
        np.lib.format.write_array(b, a, version=version)
    return b.getvalue()

class Unseekable(io.RawIOBase):
    def __init__(self):
        self.buf = bytearray()
    def writable(self):
        return True
    def write(self, b):
        self.buf += b
        return len(b)

def streamed(path, compress, **arrays):
    s = Unseekable()
    z = zipfile.ZipFile(s, 'w', zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED)
    for k, v in arrays.items():
        with z.open(k + '.npy', 'w', force_zip64=True) as f:
            f.write(npy(v))
    z.close()
    open(path, 'wb').write(bytes(s.buf))

def zip64(path, deflate=False, **arrays):
    out, central = bytearray(), bytearray()
    for name, a in arrays.items():
        name, data = (name + '.npy').encode(), npy(a)
        crc, comp, method = zlib.crc32(data), data, 0
        if deflate:
            c = zlib.compressobj(6, zlib.DEFLATED, -15)
            comp, method = c.compress(data) + c.flush(), 8
        off = len(out)
        lx = struct.pack('<HHQQ', 1, 16, len(data), len(comp))
        out += struct.pack('<IHHHHHIIIHH', 0x04034b50, 45, 0, method, 0, 0x21, crc,
                           0xffffffff, 0xffffffff, len(name), len(lx)) + name + lx + comp
        cx = struct.pack('<HHQQQ', 1, 24, len(data), len(comp), off)
        central += struct.pack('<IHHHHHHIIIHHHHHII', 0x02014b50, 45, 45, 0, method, 0, 0x21,
                               crc, 0xffffffff, 0xffffffff, len(name), len(cx), 0, 0, 0, 0,
                               0xffffffff) + name + cx
    cd = len(out)
    out += central
    z64 = len(out)
    out += struct.pack('<IQHHIIQQQQ', 0x06064b50, 44, 45, 45, 0, 0, len(arrays), len(arrays),
                       len(central), cd)
    out += struct.pack('<IIQI', 0x07064b50, 0, z64, 1)
    out += struct.pack('<IHHHHIIH', 0x06054b50, 0, 0, 0xffff, 0xffff, 0xffffffff, 0xffffffff, 0)
    open(path, 'wb').write(bytes(out))

def tensor(path, name):
    """The raw bytes of a tensor of a .dlt archive, read as tensor.pl reads them"""
    d = open(path, "rb").read()
    ix = struct.unpack_from("<Q", d, len(d) - 32)[0]
    count = struct.unpack_from("<Q", d, ix + 8)[0]
    for i in range(count):
        off = struct.unpack_from("<Q", d, ix + 16 + 8 * i)[0]
        tag, hsize, dtype, codec, ndim, zero, nlen, stored = struct.unpack_from("<4sIBBBBIQ", d, off)
        if tag == b"TENS" and d[off + 40 + 8 * ndim:off + 40 + 8 * ndim + nlen] == name.encode():
            assert codec == 0, "%s: tensor %s: codec %d" % (path, name, codec)
            return d[off + hsize:off + hsize + stored]
    raise KeyError("%s: no tensor %s" % (path, name))

def want(path, a):
    """What dlt-prep should store: u8 as it is, the rest as f32, C order"""
    a = np.asarray(a)
    a = a.astype('u1') if a.dtype == np.uint8 else a.astype('<f4')
    open(path, 'wb').write(np.ascontiguousarray(a).tobytes())
EOF

# x.npy for each dtype, order and rank, with what the archive must hold
test_numpy 'npy: every dtype, C and Fortran order, 1-D to 4-D: the values NumPy casts to' '
	mkdir dtypes &&
	"$PY" - <<-\EOF &&
	import json, numpy as np, sys
	sys.path.insert(0, ".")
	from zips import want
	rng = np.random.default_rng(7)
	shapes = [(5,), (5, 3), (4, 3, 2), (3, 2, 3, 2)]
	def values(dt, shape):
	    k = dt.kind
	    if k == "b":
	        return rng.integers(0, 2, shape).astype(dt)
	    if k in "iu":
	        info = np.iinfo(dt)
	        v = rng.integers(info.min, info.max, shape, dtype=dt.newbyteorder("="), endpoint=True)
	        v.flat[0] = info.max
	        v.flat[1] = info.min
	        return v.astype(dt)
	    v = rng.standard_normal(shape) * (100 if dt.itemsize == 2 else 1e3)
	    v.flat[0] = 2.0 ** -20	# a subnormal of f16, exact in f32
	    v.flat[1] = 0.1		# rounded from f64 to f32
	    return v.astype(dt)
	dtypes = ["|b1", "|i1", "|u1"] + [e + k + s for k in "iu" for s in "248" for e in "<>"] + \
	         [e + "f" + s for s in "248" for e in "<>"]
	for d in dtypes:
	    dt = np.dtype(d)
	    for shape in shapes:
	        for order in "CF":
	            a = values(dt, shape)
	            if order == "F":
	                a = np.asfortranarray(a)
	            name = "dtypes/%s-%dd-%s" % (d[1:] + ("be" if d[0] == ">" else ""), len(shape), order)
	            np.save(name + ".npy", a)
	            if order == "F" and len(shape) > 1:
	                assert b"True" in open(name + ".npy", "rb").read(128)
	EOF
	test $(ls dtypes/*.npy | wc -l) = 168 &&
	for f in dtypes/*.npy; do
		dlt-prep npy -q "$f" -o "${f%.npy}.dlt" &&
		dlt-prep info --json "${f%.npy}.dlt" >"${f%.npy}.json" || exit 1
	done &&
	"$PY" - <<-\EOF
	import glob, json, numpy as np, sys
	sys.path.insert(0, ".")
	from zips import tensor
	for f in sorted(glob.glob("dtypes/*.npy")):
	    a, b = np.load(f), f[:-4]
	    u8 = a.dtype == np.uint8
	    want = np.ascontiguousarray(a.astype("u1" if u8 else "<f4")).tobytes()
	    assert tensor(b + ".dlt", "x") == want, f
	    x = json.load(open(b + ".json"))["tensors"][0]
	    assert x["shape"] == (list(a.shape) if a.ndim > 1 else [a.shape[0], 1]), f
	    assert x["dtype"] == ("u8" if u8 else "f32"), f
	EOF
'

test_numpy 'npy: u8 x keeps its bytes and scale 1/255, as IDX images do; others scale 1' '
	test "$(jget meta.scale <dtypes/u1-3d-C.json)" = 0.00392156862745098 &&
	test "$(jget meta.scale <dtypes/f4-3d-C.json)" = 1 &&
	test "$(jget meta.source <dtypes/f4-3d-C.json)" = "\"npy\"" &&
	test "$(jget meta.shape <dtypes/f4-4d-F.json)" = "[2,3,2]" &&
	test "$(jget meta.n <dtypes/f4-4d-F.json)" = 3 &&
	test "$(jget tensors.1 <dtypes/f4-4d-F.json)" = null &&
	dlt-prep info dtypes/f4-2d-C.dlt >info.txt &&
	grep -q "^labels: none$" info.txt
'

test_numpy 'npy: .npy format 2.0 and 3.0 read as 1.0' '
	"$PY" -c "
import numpy as np, sys
sys.path.insert(0, \".\")
from zips import npy
a = np.arange(12, dtype=\"<f4\").reshape(4, 3)
np.save(\"v1.npy\", a)
for v in (2, 3):
    open(\"v%d.npy\" % v, \"wb\").write(npy(a, (v, 0)))
" &&
	dlt-prep npy v1.npy -o v1.dlt && dlt-prep npy v2.npy -o v2.dlt && dlt-prep npy v3.npy -o v3.dlt &&
	test_cmp v1.dlt v2.dlt && test_cmp v1.dlt v3.dlt
'

# y of each kind, with x: a classification, a regression, a multi-label set
test_numpy 'npy: integer y is class ids: i32 [N], num_classes, counts' '
	"$PY" -c "
import numpy as np
np.save(\"x.npy\", np.arange(10, dtype=np.float32).reshape(5, 2))
np.save(\"ycls.npy\", np.array([3, 0, 3, 1, 0], dtype=\">u2\"))
np.save(\"ybool.npy\", np.array([True, False, True, True, False]))
np.save(\"yi8.npy\", np.array([3, 0, 3, 1, 0], dtype=np.int64))
" &&
	dlt-prep npy x.npy ycls.npy -o cls.dlt &&
	dlt-prep info --json cls.dlt >info.json &&
	test "$(jget tensors.1.dtype <info.json)" = "\"i32\"" &&
	test "$(jget tensors.1.shape <info.json)" = "[5]" &&
	test "$(jget meta.num_classes <info.json)" = 4 &&
	test "$(jget counts <info.json)" = "[2,1,0,2]" &&
	tensor_bytes cls.dlt y >y.bin &&
	perl -e "print pack(q(l<*), 3, 0, 3, 1, 0)" >want.bin &&
	test_cmp want.bin y.bin &&
	dlt-prep npy x.npy yi8.npy -o i8.dlt &&
	test_cmp cls.dlt i8.dlt &&
	dlt-prep npy x.npy ybool.npy -o bool.dlt &&
	test "$(dlt-prep info --json bool.dlt | jget counts)" = "[2,3]"
'

test_numpy 'npy: float y is targets: [N] gives f32 [N,1], [N,K] gives f32 [N,K], with their stats' '
	"$PY" -c "
import numpy as np, sys
sys.path.insert(0, \".\")
from zips import want
t1 = np.array([0.5, 1.5, 2.5, 3.5, 4.5])
t2 = np.asfortranarray(np.array([[1, 10], [2, 20], [3, 30], [4, 40], [5, 50]], dtype=\">f2\"))
np.save(\"t1.npy\", t1); want(\"t1.want\", t1)
np.save(\"t2.npy\", t2); want(\"t2.want\", t2)
" &&
	dlt-prep npy x.npy t1.npy -o t1.dlt &&
	dlt-prep info --json t1.dlt >info.json &&
	test "$(jget tensors.1.dtype <info.json)" = "\"f32\"" &&
	test "$(jget tensors.1.shape <info.json)" = "[5,1]" &&
	test "$(jget meta.target_mean <info.json)" = "[2.5]" &&
	approx "$(jget meta.target_std.0 <info.json)" 1.4142135623730951 &&
	test "$(jget meta.num_classes <info.json)" = null &&
	test "$(jget target_min <info.json)" = "[0.5]" &&
	test "$(jget target_max <info.json)" = "[4.5]" &&
	tensor_bytes t1.dlt y >y.bin && test_cmp t1.want y.bin &&
	dlt-prep npy x.npy t2.npy -o t2.dlt &&
	dlt-prep info --json t2.dlt >info.json &&
	test "$(jget tensors.1.shape <info.json)" = "[5,2]" &&
	test "$(jget meta.target_mean <info.json)" = "[3,30]" &&
	tensor_bytes t2.dlt y >y.bin && test_cmp t2.want y.bin &&
	dlt-prep info t2.dlt >info.txt &&
	grep -q "^targets:$" info.txt &&
	grep -q "^      1            30       14.1421            10            50$" info.txt
'

test_numpy 'npy: integer or bool y of [N,K] 0/1 is multi-hot labels: u8 [N,K], positives' '
	"$PY" -c "
import numpy as np
m = np.array([[1, 0, 1], [0, 0, 1], [1, 1, 1], [0, 0, 0], [1, 0, 1]])
np.save(\"mh.npy\", np.asfortranarray(m.astype(\">i4\")))
np.save(\"mhb.npy\", m.astype(bool))
open(\"mh.want\", \"wb\").write(m.astype(\"u1\").tobytes())
" &&
	dlt-prep npy x.npy mh.npy -o mh.dlt &&
	dlt-prep info --json mh.dlt >info.json &&
	test "$(jget tensors.1.dtype <info.json)" = "\"u8\"" &&
	test "$(jget tensors.1.shape <info.json)" = "[5,3]" &&
	test "$(jget positives <info.json)" = "[3,1,4]" &&
	tensor_bytes mh.dlt y >y.bin && test_cmp mh.want y.bin &&
	dlt-prep npy x.npy mhb.npy -o mhb.dlt &&
	test_cmp mh.dlt mhb.dlt &&
	dlt-prep info mh.dlt >info.txt &&
	grep -q "^labels:$" info.txt &&
	grep -q "^      2           4$" info.txt
'

test_numpy 'npz: np.savez and np.savez_compressed give the archives the .npy files give' '
	"$PY" -c "
import numpy as np
x, y = np.load(\"x.npy\"), np.load(\"ycls.npy\")
np.savez(\"d.npz\", x=x, y=y)
np.savez_compressed(\"dz.npz\", x=x, y=y)
np.savez(\"pos.npz\", x, y)
np.savez(\"pos1.npz\", x)
np.savez(\"named.npz\", feats=x, lab=y, other=np.zeros(3))
np.savez(\"xonly.npz\", x=x)
" &&
	dlt-prep npy d.npz -o d.dlt && test_cmp cls.dlt d.dlt &&
	dlt-prep npy dz.npz -o dz.dlt && test_cmp cls.dlt dz.dlt &&
	dlt-prep npy pos.npz -o pos.dlt && test_cmp cls.dlt pos.dlt &&
	dlt-prep npy named.npz --x feats --y lab -o named.dlt && test_cmp cls.dlt named.dlt &&
	dlt-prep npy xonly.npz -o xonly.dlt &&
	dlt-prep npy x.npy -o xnpy.dlt && test_cmp xnpy.dlt xonly.dlt &&
	dlt-prep npy pos1.npz -o pos1.dlt && test_cmp xnpy.dlt pos1.dlt &&
	dlt-prep npy xonly.npz ycls.npy -o xy.dlt && test_cmp cls.dlt xy.dlt
'

test_numpy 'npz: members with data descriptors, and zip64 directories, stored or deflated' '
	"$PY" -c "
import numpy as np, sys
sys.path.insert(0, \".\")
import zips
x, y = np.load(\"x.npy\"), np.load(\"ycls.npy\")
zips.streamed(\"s.npz\", False, x=x, y=y)
zips.streamed(\"sz.npz\", True, x=x, y=y)
zips.zip64(\"z.npz\", x=x, y=y)
zips.zip64(\"zz.npz\", True, x=x, y=y)
for f in (\"s.npz\", \"sz.npz\", \"z.npz\", \"zz.npz\"):
    assert (np.load(f)[\"x\"] == x).all()
" &&
	for f in s sz z zz; do
		dlt-prep npy $f.npz -o $f.dlt && test_cmp cls.dlt $f.dlt || exit 1
	done
'

test_numpy 'npy: standard input, shuffle and split like the other inputs' '
	dlt-prep npy - ycls.npy -o stdin.dlt <x.npy && test_cmp cls.dlt stdin.dlt &&
	dlt-prep npy - -o dstdin.dlt <d.npz && test_cmp cls.dlt dstdin.dlt &&
	dlt-prep npy x.npy t2.npy --shuffle --seed 2 --split 0.6 -o p1.dlt -o p2.dlt &&
	test "$(dlt-prep info --json p1.dlt | jget tensors.1.shape)" = "[3,2]" &&
	test "$(dlt-prep info --json p2.dlt | jget tensors.1.shape)" = "[2,2]"
'

# Hostile files, made by hand: python3 without numpy
cat >bad.py <<'EOF'
import struct, sys
def npy(path, header, data=b"", version=1):
    h = header.encode()
    h += b" " * ((64 - (len(h) + 11) % 64) % 64) + b"\n"
    n = struct.pack("<H", len(h)) if version == 1 else struct.pack("<I", len(h))
    open(path, "wb").write(b"\x93NUMPY" + bytes([version, 0]) + n + h + data)
def f4(shape):
    return "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }" % shape
npy("big.npy", f4("(4294967296, 4294967296, 4294967296)"))
npy("huge.npy", f4("(99999999999999999999999, 2)"))
npy("c8.npy", "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", bytes(16))
npy("str.npy", "{'descr': '<U3', 'fortran_order': False, 'shape': (2,), }", bytes(24))
npy("obj.npy", "{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", bytes(16))
npy("rec.npy", "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", bytes(8))
npy("trunc.npy", f4("(100, 3)"), bytes(12))
npy("long.npy", f4("(2,)"), bytes(12))
npy("dict.npy", "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }", bytes(4))
npy("nokey.npy", "{'descr': '<f4', 'shape': (1,), }", bytes(4))
npy("extra.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", bytes(4))
npy("scalar.npy", f4("()"), bytes(4))
npy("zero.npy", f4("(0, 3)"))
npy("v9.npy", f4("(1,)"), bytes(4), version=9)
npy("nan.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }",
    struct.pack("<dd", 1, float("nan")))
npy("f64big.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }",
    struct.pack("<dd", 1, 1e300))
npy("x3.npy", f4("(3, 1)"), bytes(12))
npy("y2.npy", "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", bytes(8))
npy("neg.npy", "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }",
    struct.pack("<3i", 0, -1, 2))
npy("bigcls.npy", "{'descr': '<u8', 'fortran_order': False, 'shape': (3,), }",
    struct.pack("<3Q", 0, 2**64 - 1, 2))
npy("mh2.npy", "{'descr': '<i4', 'fortran_order': False, 'shape': (3, 2), }",
    struct.pack("<6i", 0, 1, 1, 2, 0, 0))
npy("y3d.npy", f4("(3, 1, 1)"), bytes(12))
open("magic.npy", "wb").write(b"PNG\r\n\x1a\n" + bytes(40))
open("short.npy", "wb").write(b"\x93NUMPY\x01\x00\xff\xff{'descr'")
open("empty.npy", "wb").write(b"")
EOF

test_expect_success 'hostile .npy headers: exit 2, one line naming the file, nothing written' '
	python3 bad.py &&
	test_must_fail 2 "dlt-prep: big.npy: shape (4294967296, 4294967296, 4294967296) is too large" \
		dlt-prep npy big.npy -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: huge.npy: shape overflow: a dimension of 2^64 or more" \
		dlt-prep npy huge.npy -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: c8.npy: unsupported dtype '"'"'<c8'"'"'" \
		dlt-prep npy c8.npy -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: str.npy: unsupported dtype '"'"'<U3'"'"'" \
		dlt-prep npy str.npy -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: obj.npy: object arrays (dtype '"'"'|O'"'"') are not supported" \
		dlt-prep npy obj.npy -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: rec.npy: structured dtypes are not supported" \
		dlt-prep npy rec.npy -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: trunc.npy: truncated: shape (100, 3) of 4-byte elements is 1200 bytes of data, the file holds 12" \
		dlt-prep npy trunc.npy -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: long.npy: trailing data after the 8 bytes that shape (2,) holds" \
		dlt-prep npy long.npy -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: dict.npy: bad .npy header: fortran_order is not True or False" \
		dlt-prep npy dict.npy -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: nokey.npy: bad .npy header: no '"'"'fortran_order'"'"'" \
		dlt-prep npy nokey.npy -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: extra.npy: bad .npy header: unknown key '"'"'x'"'"'" \
		dlt-prep npy extra.npy -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: scalar.npy: a scalar, not an array of samples" \
		dlt-prep npy scalar.npy -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: zero.npy: an empty array, of shape (0, 3)" \
		dlt-prep npy zero.npy -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: v9.npy: unsupported .npy version 9.0" \
		dlt-prep npy v9.npy -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: magic.npy: not a .npy or .npz file (bad magic)" \
		dlt-prep npy magic.npy -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: short.npy: header of 65535 bytes, but the file has 8 after its length" \
		dlt-prep npy short.npy -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: empty.npy: empty file" dlt-prep npy empty.npy -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: nosuch.npy: No such file or directory" \
		dlt-prep npy nosuch.npy -o out/d.dlt &&
	is_empty out
'

test_expect_success 'hostile values: nan, beyond f32, a y of another length, bad classes and labels' '
	test_must_fail 2 "dlt-prep: nan.npy: sample 1 holds a value that is not a finite f32 number" \
		dlt-prep npy nan.npy -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: f64big.npy: sample 1 holds a value that is not a finite f32" \
		dlt-prep npy f64big.npy -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: y2.npy: 2 rows, but x3.npy has 3 samples" \
		dlt-prep npy x3.npy y2.npy -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: neg.npy: sample 1: class id -1 is negative" \
		dlt-prep npy x3.npy neg.npy -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: bigcls.npy: sample 1: class id 18446744073709551615 too large: at most 1048576 classes" \
		dlt-prep npy x3.npy bigcls.npy -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: mh2.npy: sample 1: label 1 is 2, not 0 or 1" \
		dlt-prep npy x3.npy mh2.npy -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: y3d.npy: y of 3 dimensions" \
		dlt-prep npy x3.npy y3d.npy -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: x3.npy: not an .npz file, so it has no array '"'"'feats'"'"'" \
		dlt-prep npy x3.npy --x feats -o out/d.dlt &&
	is_empty out
'

test_numpy 'hostile .npz: missing array, bad crc, cut short, sizes that lie, a zip bomb' '
	"$PY" -c "
import io, struct, numpy as np
np.savez(\"d2.npz\", x=np.zeros((4, 4)), y=np.arange(4))
z = bytearray(open(\"d2.npz\", \"rb\").read())
open(\"cut.npz\", \"wb\").write(z[:len(z) // 2])
i = z.find(b\"PK\\x01\\x02\")
crc = bytearray(z); crc[i + 16] ^= 1; open(\"crc.npz\", \"wb\").write(crc)
off = bytearray(z); off[i + 42:i + 46] = struct.pack(\"<I\", 0x7ffffff0); open(\"off.npz\", \"wb\").write(off)
np.savez_compressed(\"c2.npz\", x=np.zeros((64, 64)))
z = bytearray(open(\"c2.npz\", \"rb\").read())
i = z.find(b\"PK\\x01\\x02\")
z[i + 24:i + 28] = struct.pack(\"<I\", 0x7fffffff); open(\"bomb.npz\", \"wb\").write(z)
" &&
	test_must_fail 2 "dlt-prep: d2.npz: no array '"'"'z'"'"' (it holds: x, y)" \
		dlt-prep npy d2.npz --y z -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: d2.npz: no array '"'"'feats'"'"' (it holds: x, y)" \
		dlt-prep npy d2.npz --x feats -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: cut.npz: not a zip file (no end of central directory)" \
		dlt-prep npy cut.npz -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: crc.npz: x.npy: crc mismatch" dlt-prep npy crc.npz -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: off.npz: x.npy: bad local header offset 2147483632" \
		dlt-prep npy off.npz -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: bomb.npz: x.npy: impossible size 2147483647 for" \
		dlt-prep npy bomb.npz -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: ycls.npy: not an .npz file, so it has no array '"'"'lab'"'"'" \
		dlt-prep npy d2.npz ycls.npy --y lab -o out/d.dlt &&
	is_empty out
'

test_expect_success 'npy usage: operands and options of other commands' '
	test_must_fail 2 "npy takes X and perhaps Y, got 0 operands" dlt-prep npy -o out/d.dlt &&
	test_must_fail 2 "npy takes X and perhaps Y, got 3 operands" \
		dlt-prep npy a.npy b.npy c.npy -o out/d.dlt &&
	test_must_fail 2 "--x and --y apply to npy only" \
		dlt-prep csv d.csv -l 0 --x a -o out/d.dlt &&
	test_must_fail 2 "--label, --header and --no-header apply to csv only" \
		dlt-prep npy x3.npy -l 0 -o out/d.dlt &&
	test_must_fail 2 "--target, --labels and --classes apply to csv only" \
		dlt-prep npy x3.npy --target 0 -o out/d.dlt &&
	test_must_fail 2 "info takes only --json and FILE" dlt-prep info --y a x.dlt &&
	is_empty out
'
test_done
