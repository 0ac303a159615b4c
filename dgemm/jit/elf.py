"""Just enough of ELF64 to read a cubin: its machine, target SM, kernel entry symbol, and the
facts the compiler recorded about each kernel (.nv.info: threads per block from
`__launch_bounds__`, the size of every parameter).

Replaces a `cuobjdump` subprocess: the kernel symbol is found once at compile time from the
cubin's .symtab and stored in the cache entry header. The .nv.info facts let CPU tests compare
what Python launches with (threads, argument layout) against the compiled kernel.
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


# .nv.info records: u8 format, u8 attribute, then a u16 value (EIFMT_HVAL) or a u16 length and
# that many bytes (EIFMT_SVAL); EIFMT_NVAL and EIFMT_BVAL carry their byte in the same 4 bytes.
_EIFMT_NVAL, _EIFMT_BVAL, _EIFMT_HVAL, _EIFMT_SVAL = 1, 2, 3, 4
_EIATTR_MAX_THREADS = 0x05          # u32 x, y, z: __launch_bounds__ / maxntid
_EIATTR_KPARAM_INFO = 0x17          # one parameter: u32 index, u16 ordinal, u16 offset, u32 flags
_EIATTR_CBANK_PARAM_SIZE = 0x19     # total bytes of the parameters
_NV_INFO = ".nv.info."


@dataclasses.dataclass(frozen=True)
class KernelInfo:
    """What the compiler recorded about one kernel of a cubin."""
    symbol: str
    max_threads: tuple           # (x, y, z) from __launch_bounds__; () when unbounded
    param_sizes: tuple           # bytes of each parameter, in declaration order
    param_bytes: int             # the whole parameter block


def kernel_info(data: bytes, symbol: str = None) -> KernelInfo:
    """The .nv.info facts of `symbol` (default: the cubin's single kernel)."""
    symbol = symbol or kernel_symbol(data)
    ident, sections, names = _sections_with_names(data)
    for section, name in zip(sections, names):
        if name == _NV_INFO + symbol:
            return _parse_nv_info(data, section, symbol)
    raise ElfError(f"the cubin has no {_NV_INFO}{symbol} section")


def _sections_with_names(data: bytes) -> tuple:
    read_cubin(data)             # validates the header
    header = _ELF_HEADER.unpack_from(data, 0)
    shoff, shentsize, shnum, shstrndx = header[6], header[11], header[12], header[13]
    sections = [_section(data, shoff + i * shentsize) for i in range(shnum)]
    strtab = sections[shstrndx][4]
    return header[0], sections, [_c_string(data, strtab + s[0]) for s in sections]


def _parse_nv_info(data: bytes, section: tuple, symbol: str) -> KernelInfo:
    offset, size = section[4], section[5]
    end = offset + size
    if end > len(data):
        raise ElfError(f"{_NV_INFO}{symbol} lies past the end of the file (truncated cubin?)")
    max_threads, params, param_bytes = (), {}, 0
    position = offset
    while position + 4 <= end:
        fmt, attribute = data[position], data[position + 1]
        if fmt == _EIFMT_SVAL:
            (length,) = struct.unpack_from("<H", data, position + 2)
            value = data[position + 4:position + 4 + length]
            position += 4 + length
        else:
            (value,) = struct.unpack_from("<H", data, position + 2)
            position += 4
        if attribute == _EIATTR_MAX_THREADS and fmt == _EIFMT_SVAL:
            max_threads = struct.unpack_from("<3I", value)
        elif attribute == _EIATTR_KPARAM_INFO and fmt == _EIFMT_SVAL:
            _index, ordinal, _offset, flags = struct.unpack_from("<IHHI", value)
            params[ordinal] = flags >> 18          # the size sits in the top 14 bits
        elif attribute == _EIATTR_CBANK_PARAM_SIZE and fmt == _EIFMT_HVAL:
            param_bytes = value
    return KernelInfo(symbol=symbol, max_threads=tuple(max_threads),
                      param_sizes=tuple(params[i] for i in sorted(params)),
                      param_bytes=param_bytes)


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
