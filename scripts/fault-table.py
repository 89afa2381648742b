#!/usr/bin/env python3
"""Fail when a shipped library's table of inline loads names padding instead of a load
(crates/ufutex/src/ffi/fault.rs, `fixup_of`).

    scripts/fault-table.py LIBRARY.so

The fault handler resumes a faulting read of caller memory at its fixup only if the faulting
instruction's address is the one the table lists. The build pads jumps off 32-byte boundaries
(.cargo/config.toml), and the assembler puts that padding before a compare fused with its
jump: had it gone between a block's label and its load, the table would name a no-op, and a
read of an unmapped word would crash the process instead of failing with EFAULT. x86-64 only:
each entry's instruction must not begin as a no-op does. Prints the number of entries; exits 1
on one that names a no-op, or when the table is missing.
"""
import struct
import subprocess
import sys


def sections(lib):
    out = subprocess.run(["readelf", "-S", "-W", lib], check=True, capture_output=True, text=True).stdout
    found = {}
    for line in out.splitlines():
        if "]" not in line or line.strip().startswith("[Nr]"):
            continue
        parts = line.split("]", 1)[1].split()
        if len(parts) >= 5:
            name, addr, off, size = parts[0], int(parts[2], 16), int(parts[3], 16), int(parts[4], 16)
            found[name] = (addr, off, size)
    return found


def is_padding(b):
    """Whether the bytes begin a no-op: `nop`, `xchg ax, ax`, `nopw`/`nopl` (0f 1f), with any
    run of 66 and 2e prefixes before them (the long forms the assembler pads with)."""
    i = 0
    while i < len(b) and b[i] in (0x66, 0x2E):
        i += 1
    rest = b[i:]
    return rest[:1] == b"\x90" or rest[:2] == b"\x0f\x1f"


def main():
    lib = sys.argv[1]
    secs = sections(lib)
    if "ufutex_fx_table" not in secs:
        print(f"{lib}: no ufutex_fx_table section")
        return 1
    data = open(lib, "rb").read()
    t_addr, t_off, t_size = secs["ufutex_fx_table"]

    def bytes_at(vaddr, n):
        for addr, off, size in secs.values():
            if addr and addr <= vaddr < addr + size:
                return data[off + vaddr - addr : off + vaddr - addr + n]
        return None

    bad = 0
    entries = 0
    for i in range(0, t_size - t_size % 8, 8):
        load, fixup = struct.unpack_from("<ii", data, t_off + i)
        at = t_addr + i + load
        if at == t_addr + i:  # the entry that names no load (`fx_table_base!`)
            continue
        entries += 1
        code = bytes_at(at, 8)
        if code is None or is_padding(code):
            print(f"{lib}: entry {i // 8} names {at:#x}, which is not a load: {code.hex() if code else 'unmapped'}")
            bad += 1
    print(f"{lib}: {entries} inline loads, {bad} naming padding")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
