"""Write a small OLE compound file (MS-CFB, version 3) with the streams given, as Office
stores an embedded object (``oleObjectN.bin``); olefile, which the product reads them
with, can only read such files.

Kept to what the tests need: 512-byte sectors, one FAT sector (streams up to ~60 KB in
all), and every stream at least the 4,096-byte mini-stream cutoff (shorter ones are
padded with zero bytes at the end, which the formats written here allow), so no mini
stream is needed. Streams hang off the root entry as one chain of right siblings, all
black: a valid directory tree, if not a balanced one.
"""

from __future__ import annotations

import struct

_SECTOR = 512
_FREE, _END, _FAT, _NONE = 0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFD, 0xFFFFFFFF
_CUTOFF = 4096


def _entry(name: str, kind: int, start: int, size: int, child: int, right: int) -> bytes:
    raw = name.encode("utf-16-le") + b"\0\0" if name else b""
    return struct.pack(
        "<64sHBBIII16sIQQIQ",
        raw,
        len(raw),
        kind,
        1,  # black
        _NONE,
        right,
        child,
        b"\0" * 16,
        0,
        0,
        0,
        start,
        size,
    )


def compound_file(streams: dict[str, bytes]) -> bytes:
    """The bytes of a compound file holding ``streams`` (name -> content) at its root."""
    bodies = [data.ljust(_CUTOFF, b"\0") for data in streams.values()]
    entries = 1 + len(bodies)
    dir_sectors = -(-entries * 128 // _SECTOR)
    fat = [_FAT, *range(2, 1 + dir_sectors), _END]  # sector 0: FAT; then the directory
    starts = []
    for body in bodies:
        count = -(-len(body) // _SECTOR)
        start = len(fat)
        starts.append(start)
        fat += [*range(start + 1, start + count), _END]
    if len(fat) > _SECTOR // 4:
        raise ValueError("streams too large for one FAT sector")
    fat += [_FREE] * (_SECTOR // 4 - len(fat))
    directory = _entry("Root Entry", 5, _END, 0, 1 if bodies else _NONE, _NONE)
    for i, (name, start) in enumerate(zip(streams, starts, strict=True)):
        right = i + 2 if i + 1 < len(bodies) else _NONE
        directory += _entry(name, 2, start, len(bodies[i]), _NONE, right)
    directory = directory.ljust(dir_sectors * _SECTOR, b"\0")
    # Unused entries: empty, with no siblings or child.
    for offset in range(entries * 128, len(directory), 128):
        directory = (
            directory[:offset] + _entry("", 0, 0, 0, _NONE, _NONE) + directory[offset + 128 :]
        )
    header = struct.pack(
        "<8s16sHHHHH6sIIIIIIIII",
        b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1",
        b"\0" * 16,
        0x3E,
        3,
        0xFFFE,
        9,
        6,
        b"\0" * 6,
        0,
        1,  # FAT sectors
        1,  # first directory sector
        0,
        _CUTOFF,
        _END,  # no mini FAT
        0,
        _END,  # no DIFAT sectors
        0,
    )
    header += struct.pack("<109I", 0, *[_FREE] * 108)
    data = b"".join(body.ljust(-(-len(body) // _SECTOR) * _SECTOR, b"\0") for body in bodies)
    return header + struct.pack(f"<{_SECTOR // 4}I", *fat) + directory + data


def ole10_native(label: str, data: bytes, encoding: str = "cp1252") -> bytes:
    """The ``\\x01Ole10Native`` stream of a Packager object carrying the file ``label``,
    its name in the writer's ANSI code page ``encoding``."""
    name = label.encode(encoding)
    temp = b"C:\\Users\\x\\AppData\\Local\\Temp\\" + name + b"\0"
    body = (
        struct.pack("<H", 2)
        + name
        + b"\0"
        + b"C:\\Documents\\"
        + name
        + b"\0"
        + struct.pack("<HHI", 0, 3, len(temp))
        + temp
        + struct.pack("<I", len(data))
        + data
    )
    return struct.pack("<I", len(body)) + body
