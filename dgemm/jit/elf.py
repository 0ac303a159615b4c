"""Just enough of ELF64 to read a cubin: its machine, target SM and kernel entry symbol.

Replaces a `cuobjdump` subprocess: the kernel symbol is found once at compile time from the
cubin's .symtab and stored in the cache entry header.
"""
from __future__ import annotations

import dataclasses
import struct

EM_CUDA = 190
_STT_FUNC = 2
_STB_GLOBAL, _STB_WEAK = 1, 2
_STO_CUDA_ENTRY = 0x10          # st_other bit NVIDIA sets on __global__ functions
_SHT_SYMTAB = 2
_SHN_UNDEF = 0

_ELF_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
_SECTION_HEADER = struct.Struct("<IIQQQQIIQQ")
_SYMBOL = struct.Struct("<IBBHQQ")


class ElfError(ValueError):
    """The bytes are not a readable ELF64 little-endian cubin."""


@dataclasses.dataclass(frozen=True)
class CubinInfo:
    machine: int                 # e_machine; EM_CUDA (190) for a cubin
    abi_version: int             # EI_ABIVERSION
    flags: int                   # raw e_flags
    sm: int                      # target SM from e_flags, e.g. 90 (sm_90a) or 80
    entry_symbols: tuple         # names of the __global__ functions defined in the cubin


def read_cubin(data: bytes) -> CubinInfo:
    if len(data) < _ELF_HEADER.size or data[:4] != b"\x7fELF":
        raise ElfError(f"not an ELF file: expected the magic b'\\x7fELF', got {data[:4]!r}")
    if data[4] != 2 or data[5] != 1:
        raise ElfError(f"expected ELF64 little-endian (class 2, data 1); got class {data[4]}, "
                       f"data {data[5]}")
    (ident, _type, machine, _version, _entry, _phoff, shoff, flags, _ehsize, _phentsize,
     _phnum, shentsize, shnum, _shstrndx) = _ELF_HEADER.unpack_from(data, 0)
    abi_version = ident[8]
    # ABI version 8+ (CUDA 12.8 on) keeps the SM in bits 8-15; older cubins in bits 0-7.
    sm = (flags >> 8) & 0xFF if abi_version >= 8 else flags & 0xFF
    sections = [_section(data, shoff + i * shentsize) for i in range(shnum)]
    return CubinInfo(machine=machine, abi_version=abi_version, flags=flags, sm=sm,
                     entry_symbols=tuple(_entry_symbols(data, sections)))


def kernel_symbol(data: bytes) -> str:
    """The single __global__ function a dgemm translation unit defines."""
    symbols = read_cubin(data).entry_symbols
    if len(symbols) != 1:
        raise ElfError(f"expected exactly one kernel entry symbol in the cubin; found "
                       f"{len(symbols)}: {', '.join(symbols) or 'none'}")
    return symbols[0]


def _section(data: bytes, offset: int) -> tuple:
    if offset + _SECTION_HEADER.size > len(data):
        raise ElfError(f"section header at offset {offset} lies past the end of the "
                       f"{len(data)}-byte file (truncated cubin?)")
    return _SECTION_HEADER.unpack_from(data, offset)


def _entry_symbols(data: bytes, sections: list) -> list:
    names = []
    for _name, sh_type, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
        if sh_type != _SHT_SYMTAB:
            continue
        strtab_offset, strtab_size = sections[link][4], sections[link][5]
        if offset + size > len(data) or strtab_offset + strtab_size > len(data):
            raise ElfError("symbol table lies past the end of the file (truncated cubin?)")
        for start in range(offset, offset + size, entsize or _SYMBOL.size):
            st_name, st_info, st_other, st_shndx, _value, _size = _SYMBOL.unpack_from(data, start)
            binding, kind = st_info >> 4, st_info & 0xF
            # NVRTC emits template instantiations as WEAK, NVCC as GLOBAL.
            if (kind == _STT_FUNC and binding in (_STB_GLOBAL, _STB_WEAK)
                    and st_shndx != _SHN_UNDEF and st_other & _STO_CUDA_ENTRY):
                names.append(_c_string(data, strtab_offset + st_name))
    return names


def _c_string(data: bytes, offset: int) -> str:
    end = data.index(b"\0", offset)
    return data[offset:end].decode()
