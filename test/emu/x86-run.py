#!/usr/bin/env python3
"""x86-run.py PROGRAM [SHIM]: run a program built for no OS on an emulated
Sapphire Rapids (Bochs, through bochscpu-python), a CPU with AVX-512 and
AVX512_BF16, so that kernels for instructions this machine lacks are run
here too.

PROGRAM is a static x86-64 ELF with no libc (test/emu/gemm.c): its
entry is emu.h's `int emu_main(char *buf, size_t cap)`, called with a
buffer for its report, which it leaves NUL-terminated.  The report goes to
stdout, and the exit status is 0 when emu_main returned 0, else 1.

SHIM: test/emu/c23.c's library, loaded first where glibc lacks the C23
scanf and strtoull that the bochscpu-python wheel (built on glibc 2.38 or
later) calls.

The machine: paging that maps every address to itself, 64-bit user mode,
SSE, AVX and AVX-512 state enabled (CR4.OSXSAVE, XCR0) as an OS does,
MXCSR and the x87 control word at their reset values, a stack, and FS's
base on a zeroed block for thread-local variables (x86-64's variant II:
the block lies below the pointer, which points at itself).  emu_main returns
to an int3, where the emulation stops (there is no IDT, so the int3 may
come as the #GP of its missing gate); any other exception is an error."""
import ctypes
import importlib.metadata
import os
import signal
import struct
import sys

PAGE = 4096
STACK_TOP = 0x7FFF0000
STACK_PAGES = 256
TLS_BASE = 0x7FF00000  # FS's base: the thread block lies in the page below
TLS_PAGES = 2
OUT = 0x7FE00000  # the report's buffer
OUT_PAGES = 16
TRAMPOLINE = 0x7FD00000  # int3: where emu_main returns to
PML4 = 0x7FC00000  # the page tables, built by bochscpu from here on
LIMIT_S = 300  # seconds the emulation may take (the GEMM's take 4)
BOCHSCPU = "0.4.0"
# Bochs's sapphire_rapids in bochscpu-python 0.4.0's list of CPU models
# (cpudb.h's order; the list's names are not searchable by name there)
MODEL = 30


def fail(msg, status=1):
    """status 1: the run failed; 2: the program given is no program"""
    print("Bail out! x86-run: " + msg, flush=True)
    os._exit(status)


def load_bochscpu(shim):
    try:
        version = importlib.metadata.version("bochscpu-python")
    except importlib.metadata.PackageNotFoundError:
        version = None
    if version != BOCHSCPU:
        fail(f"bochscpu-python is {version or 'not installed'}, not {BOCHSCPU} "
             "(scripts/install-deps installs it)")
    if shim and not hasattr(ctypes.CDLL(None), "__isoc23_strtoull"):
        ctypes.CDLL(shim, mode=ctypes.RTLD_GLOBAL)
    try:
        import bochscpu
        import bochscpu.cpu
        import bochscpu.memory
    except ImportError as e:
        fail(f"bochscpu-python: {e}" + (" (the SHIM gives it)" if "isoc23" in str(e) else ""))
    # The CPU model is a Bochs parameter that bochscpu-python does not
    # expose: set it through the library's own symbols, before the CPU
    # is made.
    lib = ctypes.CDLL(bochscpu._bochscpu.__file__)
    lib.sim_get_param_enum.restype = ctypes.c_void_p
    param = lib.sim_get_param_enum(b"cpu.model")
    if not param:
        fail("bochscpu has no cpu.model parameter")
    lib._ZN15bx_param_enum_c3setEl(ctypes.c_void_p(param), ctypes.c_long(MODEL))
    return bochscpu


def segments(path):
    """PT_LOAD segments (vaddr, file bytes, memory size) and the entry."""
    try:
        with open(path, "rb") as f:
            elf = f.read()
    except OSError as e:
        fail(f"{path}: {e.strerror}", 2)
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        fail(f"{path}: not a little-endian ELF64 file", 2)
    entry, phoff = struct.unpack_from("<QQ", elf, 24)
    phentsize, phnum = struct.unpack_from("<HH", elf, 54)
    loads = []
    for i in range(phnum):
        kind, _, off, vaddr, _, filesz, memsz, _ = struct.unpack_from(
            "<IIQQQQQQ", elf, phoff + i * phentsize)
        if kind == 1:
            loads.append((vaddr, elf[off:off + filesz], memsz))
    return loads, entry


def main():
    if len(sys.argv) not in (2, 3):
        print("usage: x86-run.py PROGRAM [SHIM]", file=sys.stderr)
        sys.exit(2)
    loads, entry = segments(sys.argv[1])
    bochscpu = load_bochscpu(sys.argv[2] if len(sys.argv) == 3 else None)
    mem, cpu = bochscpu.memory, bochscpu.cpu

    sess = bochscpu.Session()

    def missing_page(gpa):
        raise RuntimeError(f"the program touched {gpa:#x}, which is not mapped")

    sess.missing_page_handler = missing_page
    table = mem.PageMapLevel4Table()

    def map_range(start, end):
        for va in range(start & ~(PAGE - 1), end, PAGE):
            if table.translate(va) is None:
                mem.page_insert(va, mem.allocate_host_page())
                table.insert(va, va, 1)

    for vaddr, data, memsz in loads:
        map_range(vaddr, vaddr + memsz)
    map_range(STACK_TOP - STACK_PAGES * PAGE, STACK_TOP)
    map_range(TLS_BASE - PAGE, TLS_BASE - PAGE + TLS_PAGES * PAGE)
    map_range(OUT, OUT + OUT_PAGES * PAGE)
    map_range(TRAMPOLINE, TRAMPOLINE + PAGE)
    for hva, gpa in table.commit(PML4):
        mem.page_insert(gpa, hva)

    def write(va, data):
        if data and not mem.virt_write(PML4, va, list(data)):
            fail(f"could not write {len(data)} bytes at {va:#x}")

    # Host pages are not promised to be zero: .bss, the stack and the
    # thread block are zeroed here.
    for vaddr, data, memsz in loads:
        write(vaddr, data + bytes(memsz - len(data)))
    write(STACK_TOP - STACK_PAGES * PAGE, bytes(STACK_PAGES * PAGE))
    write(TLS_BASE - PAGE, bytes(TLS_PAGES * PAGE))
    write(TLS_BASE, struct.pack("<Q", TLS_BASE))
    write(OUT, bytes(OUT_PAGES * PAGE))
    write(TRAMPOLINE, b"\xcc")
    # emu_main's return address, where a call leaves it: the ABI's rsp + 8 is
    # a multiple of 16 at a function's entry
    rsp = STACK_TOP - 64 - 8
    write(rsp, struct.pack("<Q", TRAMPOLINE))

    state = bochscpu.State()
    cpu.set_long_mode(state)
    state.cr3 = PML4
    state.cr4 = state.cr4 | 1 << 9 | 1 << 10 | 1 << 18  # OSFXSR, OSXMMEXCPT, OSXSAVE
    state.xcr0 = 0xE7  # x87, SSE, AVX, opmask, ZMM0-15 upper halves, ZMM16-31
    state.mxcsr = 0x1F80
    state.fpcw = 0x37F
    state.rflags = 0x202
    state.rip = entry
    state.rsp = rsp
    state.rdi = OUT
    state.rsi = OUT_PAGES * PAGE
    def segment(selector, attr, base=0):
        s = bochscpu.Segment()
        s.present, s.selector, s.attr, s.base, s.limit = True, selector, attr, base, 0xFFFFFFFF
        return s

    state.cs = segment(0x33, 0x22FB)  # 64-bit code, DPL 3
    state.ds = state.es = state.ss = state.gs = segment(0x2B, 0xCF3)  # data, DPL 3
    state.fs = segment(0x2B, 0xCF3, TLS_BASE)
    sess.cpu.state = state

    stop = {}

    def exception(sess, cpu_id, vector, error_code):
        stop["vector"], stop["error"] = vector, error_code
        stop["rip"] = sess.cpu.state.rip
        sess.stop()

    hook = bochscpu.Hook()
    hook.exception = exception
    # A program that never returns is killed (SIGALRM's default action)
    # rather than left to hang the test suite.
    signal.alarm(LIMIT_S)
    sess.run([hook])
    signal.alarm(0)

    end = sess.cpu.state
    # int3 with no IDT: #BP, or the #GP of its missing gate (IDT entry 3)
    if (stop.get("vector"), stop.get("error")) not in ((3, 0), (13, 3 << 3 | 2)) or \
            stop.get("rip") != TRAMPOLINE + 1:
        fail(f"exception {stop.get('vector')} (error code {stop.get('error')}) "
             f"at or just before {stop.get('rip', 0):#x}")
    report = bytes(mem.virt_read(PML4, OUT, OUT_PAGES * PAGE)).split(b"\0", 1)[0]
    sys.stdout.write(report.decode("ascii", "replace"))
    sys.stdout.flush()
    # Out at once: bochscpu-python's objects do not survive the
    # interpreter's teardown cleanly (it reports them as leaked).
    os._exit(0 if end.rax & 0xFFFFFFFF == 0 else 1)


if __name__ == "__main__":
    main()
