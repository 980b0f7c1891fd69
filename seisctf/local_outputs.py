"""Local outputs: checked writable before any work, and a write that fails said in one line.

`check_writable` probes where an output will go (a file created and removed in the folder that
would receive it), so a read-only folder or mount, a path through a file, or a folder the user
may not write is refused before a cluster starts or anything is scored or recorded. A write that
fails midway all the same (a disk that fills, a mount turned read-only) is reported by
`write_failure`: the output, the bytes it takes on its device so far, for a zarr store the bytes
its arrays declare (uncompressed: an upper bound of what it needs), and the bytes free there.
Nothing here reads object stores: their buckets are checked by `seisctf.s3.check_buckets`.
"""

from __future__ import annotations

import errno
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from seisctf.errors import InvalidInput

FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
SQLITE_FULL = 13  # sqlite3.SQLITE_FULL, without importing sqlite3
NOT_WRITABLE = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})
# zarr v3 data types by their size in bytes (a string type counts as one pointer).
ITEMSIZE = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "float16": 2}
ITEMSIZE |= {"int32": 4, "uint32": 4, "float32": 4, "complex64": 8}
ITEMSIZE |= {"int64": 8, "uint64": 8, "float64": 8, "complex128": 16}


def check_writable(path: str | Path, what: str) -> None:
    """InvalidInput naming `what` unless an output at `path` (a file or a folder, existing or
    not) can be written: the folder that would receive it is a folder this process can create a
    file in (an existing folder output: that folder itself), and an existing file output is
    writable. Leaves nothing behind."""
    check_name_lengths(path, what)
    target = Path(path)
    existing = next((p for p in (target, *target.parents) if p.exists() or p.is_symlink()), None)
    folder = existing if existing is not None else Path.cwd()
    if folder == target and not target.is_dir():
        if not os.access(target, os.W_OK):
            raise InvalidInput(what, f"{target} is not writable (a file this user may not write)")
        folder = target.parent
    if not folder.is_dir():
        raise InvalidInput(what, f"{folder} is a file, not a folder: nothing can be written below")
    try:
        handle, probe = tempfile.mkstemp(prefix=".seisctf-probe-", dir=folder)
    except OSError as error:
        raise InvalidInput(what, f"cannot write in {folder}: {error.strerror}") from None
    os.close(handle)
    os.unlink(probe)


def _nearest_folder(path: Path) -> Path:
    """The nearest existing folder among `path`'s parents (absolute); a parent too long to
    stat (ENAMETOOLONG) is not one."""
    for folder in Path(os.path.abspath(path)).parents:
        try:
            if folder.is_dir():
                return folder
        except OSError:
            continue
    return Path("/")


def check_name_lengths(path: str | Path, what: str) -> None:
    """InvalidInput naming `what` when a name in `path` is longer than its file system takes
    (ENAMETOOLONG: usually 255 bytes a name, 4096 bytes a whole path), before anything stats
    it."""
    folder = _nearest_folder(Path(path))
    name_max = os.pathconf(folder, "PC_NAME_MAX")
    path_max = os.pathconf(folder, "PC_PATH_MAX")
    for name in Path(path).parts:
        length = len(os.fsencode(name))
        if length > name_max:
            raise InvalidInput(
                what,
                f"a name of {length} bytes ({name[:24]}…): the file system of {folder} takes "
                f"names of up to {name_max} bytes",
            )
    length = len(os.fsencode(os.path.abspath(path)))
    if length > path_max:
        raise InvalidInput(
            what, f"a path of {length} bytes: {folder}'s file system takes up to {path_max}"
        )


def causes(error: BaseException) -> Iterator[BaseException]:
    """`error`, its causes and contexts, each once."""
    seen: set[int] = set()
    stack: list[BaseException | None] = [error]
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        stack += [current.__cause__, current.__context__]


def _is_full(error: BaseException) -> bool:
    """An OSError of `FULL`, or SQLite's SQLITE_FULL (a database that cannot grow)."""
    if isinstance(error, OSError):
        return error.errno in FULL
    return (getattr(error, "sqlite_errorcode", None) or 0) & 0xFF == SQLITE_FULL


def write_failure(error: BaseException, outputs: Sequence[str]) -> str | None:
    """One line on a write to a local output that failed for want of space or of write access
    (`error` or one of its causes an OSError of `FULL` or `NOT_WRITABLE`, or SQLITE_FULL), or
    None. `outputs`: the command's local outputs (paths); the one named is the output holding
    the error's file, else the one on the fullest device (the error of a write rarely names its
    file)."""
    found = [e for e in causes(error) if _is_full(e)]
    found += [e for e in causes(error) if isinstance(e, OSError) and e.errno in NOT_WRITABLE]
    if not found:
        return None
    failure = found[0]
    filename = getattr(failure, "filename", None)
    holding = [o for o in outputs if filename and _inside(Path(str(filename)), Path(o))]
    if not _is_full(failure):
        if not holding:
            return None  # a file the command reads, or none named: not about an output
        return f"cannot write {filename}: {getattr(failure, 'strerror', failure)}"
    output = (holding or sorted(outputs, key=_free_bytes) or [filename or "?"])[0]
    declared = _declared_bytes(Path(output))
    needs = f", its arrays need up to {_size(declared)} uncompressed" if declared else ""
    return (
        f"no space left on device writing {output}: {_size(_bytes_under(Path(output)))} on disk "
        f"so far{needs}, {_size(_free_bytes(output))} free there; nothing unfinished was marked "
        "complete: free space and re-run the same command (an ingest resumes where it stopped)"
    )


def _inside(path: Path, output: Path) -> bool:
    path, output = Path(os.path.abspath(path)), Path(os.path.abspath(output))
    return path == output or output in path.parents


def _free_bytes(path: str | Path) -> int:
    """Free bytes on the device of `path` (its nearest existing folder)."""
    for folder in (Path(path), *Path(os.path.abspath(path)).parents):
        if folder.is_dir():
            return shutil.disk_usage(folder).free
    return 0


def _bytes_under(path: Path) -> int:
    """Bytes the file at `path`, or the files below the folder, take on their device."""
    files = [path] if path.is_file() else list(path.rglob("*")) if path.is_dir() else []
    return sum(f.lstat().st_blocks * 512 for f in files if f.is_file() and not f.is_symlink())


def _declared_bytes(store: Path) -> int:
    """Bytes the arrays of a local zarr v3 store declare (shape x item size, uncompressed),
    read from their `zarr.json` documents; 0 for anything else."""
    total = 0
    for document in store.rglob("zarr.json") if store.is_dir() else ():
        try:
            metadata = json.loads(document.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(metadata, dict) and metadata.get("node_type") == "array":
            itemsize = ITEMSIZE.get(str(metadata.get("data_type")), 8)
            total += math.prod(int(n) for n in metadata.get("shape", [])) * itemsize
    return total


def _size(n_bytes: int) -> str:
    """`345,436 bytes`; from 1 MiB on with the size in binary units: `11,264,000 bytes (10.7
    MiB)`."""
    if n_bytes < 2**20:
        return f"{n_bytes:,} bytes"
    exponent = min(int(math.log(n_bytes, 1024)), 4)
    unit = ("bytes", "KiB", "MiB", "GiB", "TiB")[exponent]
    return f"{n_bytes:,} bytes ({n_bytes / 1024**exponent:.1f} {unit})"
