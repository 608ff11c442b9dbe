#!/usr/bin/env python3
"""What dlt-ckpt exports, read by Python (test/t3000-ckpt.sh runs it).

  st-check.py compare FILE.safetensors CKPT.dlt [--weights-only]
      loads the safetensors file with the `safetensors` package if it is
      importable, else with torch (header by json, data by torch.frombuffer),
      else with plain Python; reads CKPT.dlt with the plain reader below,
      which shares no code with dlt; checks that the names, shapes and
      every value's bits agree and that __metadata__ holds only strings.
      Prints the loader used, then per tensor its shape and exact sum.
  st-check.py npy DIR CKPT.dlt [--weights-only]
      the same for DIR/NAME.npy (numpy.load, else a plain parser).
  st-check.py write-half OUT.safetensors
      writes F16, BF16 and F32 tensors of known values with plain Python.
  st-check.py check-half FILE.safetensors
      checks that FILE (an F32 export of the import of write-half's file)
      holds those values exactly.
"""
import json
import math
import os
import struct
import subprocess
import sys

DLT_DTYPES = {1: ('f32', 4, 'f'), 2: ('f16', 2, 'e'), 3: ('bf16', 2, 'H'),
              4: ('i32', 4, 'i'), 5: ('i64', 8, 'q'), 6: ('u8', 1, 'B')}


def fail(msg):
    print('st-check: ' + msg, file=sys.stderr)
    sys.exit(1)


def unzstd(data):
    return subprocess.run(['zstd', '-dcq'], input=data, stdout=subprocess.PIPE,
                          check=True).stdout


def read_dlt(path):
    """{name: (dtype name, shape, raw bytes)} in file order, from the layout
    of lib/archive/archive.h."""
    with open(path, 'rb') as f:
        d = f.read()
    if d[:8] != b'\x89DLT\r\n\x1a\n' or d[-8:] != b'DLTEND\0\0':
        fail(path + ': not a dlt archive')
    ix = struct.unpack_from('<Q', d, len(d) - 32)[0]
    if d[ix:ix + 4] != b'INDX':
        fail(path + ': no index')
    count = struct.unpack_from('<Q', d, ix + 8)[0]
    out = {}
    for i in range(count):
        off = struct.unpack_from('<Q', d, ix + 16 + 8 * i)[0]
        tag, hsize, dtype, codec, ndim, _, nlen, stored, raw = struct.unpack_from(
            '<4sIBBBBIQQ', d, off)
        if tag != b'TENS':
            continue
        dims = list(struct.unpack_from('<%dQ' % ndim, d, off + 40))
        name = d[off + 40 + 8 * ndim:off + 40 + 8 * ndim + nlen].decode()
        data = d[off + hsize:off + hsize + stored]
        size = DLT_DTYPES[dtype][1]
        n = raw // size
        if codec in (1, 2):
            data = unzstd(data)
        if codec == 3:
            # plane sizes, then each plane as it is or one zstd frame
            sizes = struct.unpack_from('<%dQ' % size, data)
            p, planes = 8 * size, []
            for s in sizes:
                planes.append(data[p:p + s] if s == n else unzstd(data[p:p + s]))
                p += s
            data = b''.join(planes)
        if codec in (2, 3):
            data = bytes(data[k * n + j] for j in range(n) for k in range(size))
        if len(data) != raw:
            fail('%s: tensor %s: %d bytes, not %d' % (path, name, len(data), raw))
        out[name] = (DLT_DTYPES[dtype][0], dims, data)
    return out


def load_safetensors(path):
    """(loader, {name: (dtype, shape, little-endian bytes)}, metadata)"""
    with open(path, 'rb') as f:
        blob = f.read()
    n = struct.unpack_from('<Q', blob)[0]
    header = json.loads(blob[8:8 + n])
    meta = header.pop('__metadata__', {})
    try:
        from safetensors import safe_open
        import numpy
        out = {}
        with safe_open(path, framework='numpy') as f:
            for name in f.keys():
                a = f.get_tensor(name)
                out[name] = (header[name]['dtype'], list(a.shape),
                             numpy.ascontiguousarray(a).astype('<' + a.dtype.str[1:]).tobytes())
            meta = f.metadata() or {}
        return 'safetensors', out, meta
    except ImportError:
        pass
    base = 8 + n
    try:
        import torch
        kinds = {'F32': torch.float32, 'F16': torch.float16, 'BF16': torch.bfloat16,
                 'I32': torch.int32, 'I64': torch.int64, 'U8': torch.uint8}
        out = {}
        for name, e in header.items():
            b, end = e['data_offsets']
            buf = bytearray(blob[base + b:base + end])
            t = torch.frombuffer(buf, dtype=kinds[e['dtype']]) if buf else \
                torch.empty(0, dtype=kinds[e['dtype']])
            t = t.reshape(e['shape'])
            raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b''
            out[name] = (e['dtype'], list(t.shape), raw)
        return 'torch ' + torch.__version__, out, meta
    except ImportError:
        pass
    out = {}
    for name, e in header.items():
        b, end = e['data_offsets']
        out[name] = (e['dtype'], list(e['shape']), blob[base + b:base + end])
    return 'plain Python', out, meta


def floats(data):
    return struct.unpack('<%df' % (len(data) // 4), data)


def compare(got, want, what, weights_only):
    names = [k for k in want if not (weights_only and k.startswith('optim.'))]
    if sorted(got) != sorted(names):
        fail('%s: tensors %s, want %s' % (what, sorted(got), sorted(names)))
    for name in names:
        dtype, shape, data = want[name]
        gdtype, gshape, gdata = got[name]
        if gdtype.lower() != dtype:
            fail('%s: %s: dtype %s, want %s' % (what, name, gdtype, dtype))
        if gshape != shape:
            fail('%s: %s: shape %s, want %s' % (what, name, gshape, shape))
        if gdata != data:
            fail('%s: %s: the values differ' % (what, name))
        print('%s %s sum=%r' % (name, shape, math.fsum(floats(data)) if dtype == 'f32' else None))


def load_npy(path):
    try:
        import numpy
        a = numpy.load(path)
        return 'numpy ' + numpy.__version__, ({'<f4': 'f32', '<f2': 'f16', '<i4': 'i32',
                                                '<i8': 'i64', '|u1': 'u8'}[a.dtype.str],
                                               list(a.shape), a.tobytes())
    except ImportError:
        pass
    with open(path, 'rb') as f:
        d = f.read()
    if d[:8] != b'\x93NUMPY\x01\x00':
        fail(path + ': not npy 1.0')
    hlen = struct.unpack_from('<H', d, 8)[0]
    if (10 + hlen) % 64:
        fail(path + ': data not 64-byte aligned')
    h = eval(d[10:10 + hlen].decode('latin1'))  # a Python literal, by the format's definition
    dt = {'<f4': 'f32', '<f2': 'f16', '<i4': 'i32', '<i8': 'i64', '|u1': 'u8'}[h['descr']]
    if h['fortran_order']:
        fail(path + ': fortran order')
    return 'plain Python', (dt, list(h['shape']), d[10 + hlen:])


HALF = {  # name: (dtype, shape, values as stored, exact f32 values)
    'h': ('F16', [2, 3], [1.0, -2.0, 0.333251953125, 65504.0, 6.103515625e-05,
                          5.960464477539063e-08], None),
    'b': ('BF16', [4], [0x3f80, 0xc0a0, 0x4049, 0x8000], [1.0, -5.0, 3.140625, -0.0]),
    'f': ('F32', [2], [0.1, 2.0], None),
}


def write_half(path):
    header, data = {'__metadata__': {'format': 'pt', 'source': 'st-check.py'}}, b''
    for name, (dtype, shape, values, _) in HALF.items():
        code = {'F16': 'e', 'BF16': 'H', 'F32': 'f'}[dtype]
        b = struct.pack('<%d%s' % (len(values), code), *values)
        header[name] = {'dtype': dtype, 'shape': shape,
                        'data_offsets': [len(data), len(data) + len(b)]}
        data += b
    h = json.dumps(header).encode()
    h += b' ' * (-len(h) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h + data)


def check_half(path):
    loader, got, meta = load_safetensors(path)
    print('loader: ' + loader)
    for name, (dtype, shape, values, exact) in HALF.items():
        want = exact if exact is not None else \
            list(struct.unpack('<%df' % len(values), struct.pack('<%df' % len(values), *values)))
        gdtype, gshape, gdata = got[name]
        vals = list(floats(gdata))
        if gdtype != 'F32' or gshape != shape or \
                [struct.pack('<f', v) for v in vals] != [struct.pack('<f', v) for v in want]:
            fail('%s: %s %s %r, want F32 %s %r' % (name, gdtype, gshape, vals, shape, want))
        print('%s %r' % (name, vals))
    print('metadata: %s' % json.dumps(meta, sort_keys=True))


def main():
    args = [a for a in sys.argv[1:] if a != '--weights-only']
    weights_only = '--weights-only' in sys.argv
    if len(args) == 3 and args[0] == 'compare':
        loader, got, meta = load_safetensors(args[1])
        print('loader: ' + loader)
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
            fail('__metadata__ has a value that is not a string')
        if meta.get('format') != 'dlt':
            fail('__metadata__ format is %r' % meta.get('format'))
        compare(got, read_dlt(args[2]), args[1], weights_only)
        print('metadata: %s' % json.dumps(meta, sort_keys=True))
    elif len(args) == 3 and args[0] == 'npy':
        want, got, loader = read_dlt(args[2]), {}, None
        for name in want:
            f = os.path.join(args[1], name.replace('/', '__') + '.npy')
            if os.path.exists(f):
                loader, got[name] = load_npy(f)
        print('loader: %s' % loader)
        if len(os.listdir(args[1])) != len(got):
            fail('%s: files that are no tensor of %s' % (args[1], args[2]))
        compare(got, want, args[1], weights_only)
    elif len(args) == 2 and args[0] == 'write-half':
        write_half(args[1])
    elif len(args) == 2 and args[0] == 'check-half':
        check_half(args[1])
    else:
        fail('usage: see the top of ' + sys.argv[0])


main()
