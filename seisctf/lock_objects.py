"""Where a writer lock's objects live, and the conditional writes each kind of storage offers.

A lock object sits beside its output, `<parent>/.<name>.seisctf-lock` (`seisctf.locks` says
why). On a local disk an object is created with `O_CREAT|O_EXCL`, and replaced or removed under
a guard file (also made with `O_EXCL`) after checking that its content, its version, is still
the one read. On S3 it is created with `If-None-Match: *`, and replaced or removed with
`If-Match` on the ETag read (AWS S3 and SeaweedFS honour both). Other fsspec file systems get
the same writes without a condition.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Iterator
from typing import Any, Protocol

from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation

LOCK_SUFFIX = ".seisctf-lock"
SHARE_SUFFIX = ".seisctf-share."
GUARD_SUFFIX = ".guard"
GUARD_STALE_S = 10.0  # a local guard file older than this was left by a crash: removed


class Objects(Protocol):
    """Small objects with conditional writes; a version is what a conditional write compares."""

    def create(self, path: str, data: bytes) -> str | None:
        """Write `data` at `path` if nothing is there: its version, or None if something is."""

    def read(self, path: str) -> tuple[bytes, str] | None:
        """(data, version) of the object at `path`, or None if there is none."""

    def replace(self, path: str, data: bytes, version: str) -> str | None:
        """Replace the object at `path` if it still has `version`: the new version, or None."""

    def delete(self, path: str, version: str) -> bool:
        """Remove the object at `path` if it still has `version`."""

    def names(self, prefix: str) -> list[str]:
        """The paths of the objects whose path starts with `prefix`."""


class LocalObjects:
    """Files on a local disk: created with O_EXCL; replaced and removed under a guard file
    (also made with O_EXCL), after checking their content (their version) is unchanged."""

    def create(self, path: str, data: bytes) -> str | None:
        try:
            handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return None
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        return data.decode()

    def read(self, path: str) -> tuple[bytes, str] | None:
        for _ in range(20):  # a lease just created by O_EXCL is empty for a moment
            try:
                with open(path, "rb") as file:
                    data = file.read()
            except FileNotFoundError:
                return None
            if data:
                return data, data.decode(errors="replace")
            time.sleep(0.01)
        return data, ""

    def replace(self, path: str, data: bytes, version: str) -> str | None:
        with self._guard(path):
            found = self.read(path)
            if found is None or found[1] != version:
                return None
            partial = f"{path}.{secrets.token_hex(4)}.partial"
            with open(partial, "wb") as file:
                file.write(data)
            os.replace(partial, path)
        return data.decode()

    def delete(self, path: str, version: str) -> bool:
        with self._guard(path):
            found = self.read(path)
            if found is None or found[1] != version:
                return False
            os.unlink(path)
        return True

    def names(self, prefix: str) -> list[str]:
        folder, start = os.path.split(prefix)
        try:
            found = os.listdir(folder or ".")
        except FileNotFoundError:
            return []
        return [
            os.path.join(folder, name)
            for name in sorted(found)
            if name.startswith(start) and not name.endswith((GUARD_SUFFIX, ".partial"))
        ]

    @contextlib.contextmanager
    def _guard(self, path: str, wait_s: float = 5.0) -> Iterator[None]:
        guard = path + GUARD_SUFFIX
        deadline = time.monotonic() + wait_s
        while True:
            try:
                os.close(os.open(guard, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
                break
            except FileExistsError:
                with contextlib.suppress(FileNotFoundError):
                    if time.time() - os.stat(guard).st_mtime > GUARD_STALE_S:
                        os.unlink(guard)  # left by a process that died holding it
                if time.monotonic() > deadline:
                    raise InvalidInput(guard, "a writer lock's guard file stays in place") from None
                time.sleep(0.01)
        try:
            yield
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(guard)


class S3Objects:
    """S3 objects: created with `If-None-Match: *`, replaced and removed with `If-Match` on the
    ETag read (AWS S3 and SeaweedFS honour both)."""

    def __init__(self, fs: Any) -> None:
        self.fs = fs

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        bucket, key, _ = self.fs.split_path(path)
        return self.fs.call_s3(method, Bucket=bucket, Key=key, **kwargs)

    def create(self, path: str, data: bytes) -> str | None:
        try:
            return self._call("put_object", path, Body=data, IfNoneMatch="*")["ETag"]
        except OSError as error:
            if _condition_failed(error):
                return None
            raise

    def read(self, path: str) -> tuple[bytes, str] | None:
        from fsspec.asyn import sync

        bucket, key, _ = self.fs.split_path(path)

        async def get() -> tuple[bytes, str]:
            response = await self.fs._call_s3("get_object", Bucket=bucket, Key=key)
            async with response["Body"] as body:
                return await body.read(), response["ETag"]

        try:
            return sync(self.fs.loop, get)  # the data and its ETag from one GET
        except FileNotFoundError:
            return None

    def replace(self, path: str, data: bytes, version: str) -> str | None:
        try:
            return self._call("put_object", path, Body=data, IfMatch=version)["ETag"]
        except (OSError, FileNotFoundError) as error:
            if _condition_failed(error) or isinstance(error, FileNotFoundError):
                return None
            raise

    def delete(self, path: str, version: str) -> bool:
        try:
            self._call("delete_object", path, IfMatch=version)
        except (OSError, FileNotFoundError) as error:
            if _condition_failed(error) or isinstance(error, FileNotFoundError):
                return False
            raise
        return True

    def names(self, prefix: str) -> list[str]:
        bucket, key, _ = self.fs.split_path(prefix)
        listed = self.fs.call_s3("list_objects_v2", Bucket=bucket, Prefix=key)
        return [f"{bucket}/{item['Key']}" for item in listed.get("Contents", [])]


class FsspecObjects:
    """Any other fsspec file system: the same objects, written without a condition."""

    def __init__(self, fs: Any) -> None:
        self.fs = fs

    def create(self, path: str, data: bytes) -> str | None:
        if self.fs.exists(path):
            return None
        self.fs.pipe_file(path, data)
        return data.decode()

    def read(self, path: str) -> tuple[bytes, str] | None:
        try:
            data = self.fs.cat_file(path)
        except FileNotFoundError:
            return None
        return data, data.decode(errors="replace")

    def replace(self, path: str, data: bytes, version: str) -> str | None:
        found = self.read(path)
        if found is None or found[1] != version:
            return None
        self.fs.pipe_file(path, data)
        return data.decode()

    def delete(self, path: str, version: str) -> bool:
        found = self.read(path)
        if found is None or found[1] != version:
            return False
        self.fs.rm_file(path)
        return True

    def names(self, prefix: str) -> list[str]:
        folder = prefix.rsplit("/", 1)[0]
        found = self.fs.ls(folder, detail=False, refresh=True) if self.fs.exists(folder) else []
        return sorted(name for name in found if name.startswith(prefix))


def _condition_failed(error: BaseException) -> bool:
    """Whether S3 refused a conditional write: the object exists, or changed, or another
    conditional write to it is under way (412 PreconditionFailed, 409
    ConditionalRequestConflict)."""
    seen: BaseException | None = error
    while seen is not None:
        response = getattr(seen, "response", None)
        if isinstance(response, dict):
            code = response.get("Error", {}).get("Code")
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            return code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (
                409,
                412,
            )
        seen = seen.__cause__ or seen.__context__
    return False


def normalized(url: str) -> str:
    """The name an output's lock goes by: a local path made absolute with its links resolved
    (so `./x.zarr` and `/abs/x.zarr` share one lock), a URL without its trailing slashes."""
    text = str(url).rstrip("/") or str(url)
    if "://" not in text or text.startswith("file://"):
        return os.path.realpath(text.removeprefix("file://"))
    return text


def lock_location(output: StoreLocation) -> tuple[Objects, str, str, list[str]]:
    """(objects, the output's name, its lock object's path, folders made for it) of an output:
    the lock sits beside the output, `.<name>.seisctf-lock`. A local output's folder is made
    when missing (the folders made are returned, to be removed if left empty)."""
    text = normalized(output.url)
    if "://" not in text:
        folder, name = os.path.split(text)
        made = _make_folders(folder, text)
        return LocalObjects(), text, os.path.join(folder, f".{name}{LOCK_SUFFIX}"), made
    is_s3 = text.startswith(("s3://", "s3a://"))
    fs, path = output.with_url(text).filesystem()
    folder, _, name = path.rpartition("/")
    lock = f"{folder}/.{name}{LOCK_SUFFIX}" if folder else f"{path}/{LOCK_SUFFIX}"
    return (S3Objects(fs) if is_s3 else FsspecObjects(fs)), text, lock, []


def _make_folders(folder: str, output: str) -> list[str]:
    """Make `folder` and its missing parents; the ones made, deepest first."""
    missing = []
    current = folder
    while current and not os.path.exists(current):
        missing.append(current)
        current = os.path.dirname(current)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as error:
        raise InvalidInput(output, f"cannot make the folder {folder} ({error.strerror})") from None
    return missing
