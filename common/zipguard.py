"""The one zip-bomb check: member count, total inflated size, compression ratio.

Used before a parser opens an office/OpenDocument/EPUB container
(``parsers.safety``) and before a source lists an archive's members
(``sources.archive``), each with its own limits.
"""

from __future__ import annotations

import zipfile
from collections.abc import Sequence

# Files with these suffixes are ZIP archives that sources list member by member
# (sources.archive) and the format table names (parsers.formats).
ARCHIVE_EXTENSIONS = (".zip",)
# Members smaller than this compress well and are harmless whatever their ratio.
_SMALL_MEMBER = 1024 * 1024


def zip_problem(
    infos: Sequence[zipfile.ZipInfo],
    max_members: int,
    max_mb: float,
    max_ratio: float,
    ratio_floor: int = _SMALL_MEMBER,
) -> str | None:
    """Why a ZIP with these members must not be inflated, or None when it is within limits.

    The ratio counts only for members that inflate to ``ratio_floor`` bytes or more."""
    if len(infos) > max_members:
        return f"ZIP container has {len(infos)} members (limit {max_members})"
    total = sum(i.file_size for i in infos)
    if total > max_mb * 1024 * 1024:
        return (
            f"ZIP container inflates to {total / 2**20:.0f} MiB (limit {max_mb:g} MiB): "
            "possible zip bomb"
        )
    for info in infos:
        if info.file_size < ratio_floor or not info.compress_size:
            continue
        ratio = info.file_size / info.compress_size
        if ratio > max_ratio:
            return (
                f"member {info.filename} compresses {ratio:.0f}:1 (limit {max_ratio:.0f}:1): "
                "possible zip bomb"
            )
    return None
