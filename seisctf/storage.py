"""Where stores live: local paths or any fsspec URL, with storage options; safe, repeatable writes.

Every store seisctf writes is a zarr v3 group. Arrays are written first, on chunk boundaries;
the group's attrs, the completion marker `seisctf_complete` and the consolidated metadata are
written last, so a reader never takes an interrupted write for a whole store. Writing the same
data twice gives the same bytes (mode "w" replaces the store; chunking depends on shapes only).
"""

from __future__ import annotations

import json
import math
import os
import sys
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import dask.array as da
import fsspec
import xarray as xr
import zarr

from seisctf import conventions
from seisctf.cluster import compute
from seisctf.errors import InvalidInput

StorageOptions = dict[str, Any]

# seisctf writes consolidated metadata on purpose (one read opens a store over object storage).
warnings.filterwarnings("ignore", message="Consolidated metadata is currently not part")


def parse_storage_options(pairs: Sequence[str] | None) -> StorageOptions:
    """`["endpoint_url=http://127.0.0.1:8333", "anon=false"]` -> fsspec storage options.

    Values are parsed as JSON where they can be (numbers, booleans, objects), else kept as text.
    A dotted key (`client_kwargs.region_name=x`) builds a nested dict.
    """
    options: StorageOptions = {}
    for pair in pairs or ():
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise InvalidInput(f"`storage_options` {pair!r}", "expected KEY=VALUE")
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        target = options
        *parents, leaf = key.split(".")
        for parent in parents:
            target = target.setdefault(parent, {})
        target[leaf] = value
    return options


def is_remote(url: str) -> bool:
    return "://" in str(url) and not str(url).startswith("file://")


# S3 requests that fail for want of a server (connection refused or reset, timeouts, 5xx,
# throttling) are retried by botocore ("standard" mode: up to this many retries after the first
# attempt, waiting random(0, min(2**(n-1), 20)) s before the n-th). The environment variable is read
# where the store is opened (the command's process and each worker); a storage option
# `config_kwargs.retries.max_attempts=N` (botocore's meaning: N retries after the first attempt;
# `total_max_attempts` counts the first) overrides it and travels with the tasks.
S3_RETRIES_ENV = "SEISCTF_S3_RETRIES"
DEFAULT_S3_RETRIES = 10


def s3_retries() -> int:
    """Retries of a failed S3 request: `$SEISCTF_S3_RETRIES` (0 or more), else 10."""
    text = os.environ.get(S3_RETRIES_ENV, "").strip()
    if not text:
        return DEFAULT_S3_RETRIES
    try:
        retries = int(text)
    except ValueError:
        retries = -1
    if retries < 0:
        raise InvalidInput(S3_RETRIES_ENV, f"expected a whole number of retries >= 0, got {text!r}")
    return retries


def _with_defaults(defaults: Mapping[str, Any], given: Mapping[str, Any]) -> StorageOptions:
    """`given` over `defaults`, nested dicts merged key by key."""
    merged = dict(defaults)
    for key, value in given.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _with_defaults(merged[key], value)
        else:
            merged[key] = value
    return merged


def options_for(url: str, storage_options: StorageOptions | None) -> StorageOptions | None:
    """Storage options apply to fsspec URLs only; zarr refuses them for local paths. S3 URLs get
    seisctf's retry defaults under the given options."""
    if not is_remote(url):
        return None
    if str(url).startswith(("s3://", "s3a://")):
        retries = {"max_attempts": s3_retries(), "mode": "standard"}
        return _with_defaults({"config_kwargs": {"retries": retries}}, storage_options or {})
    return storage_options or None


def is_storage_outage(error: BaseException) -> bool:
    """Whether `error` says the storage did not answer (no connection, a connection lost, a
    timeout) rather than anything about the data: a run that fails so can be re-run as it is."""
    kinds: list[type] = [ConnectionError, TimeoutError]
    try:
        from botocore.exceptions import ConnectionError as BotoConnectionError
        from botocore.exceptions import HTTPClientError

        kinds += [BotoConnectionError, HTTPClientError]
    except ImportError:  # pragma: no cover - s3fs is a dependency
        pass
    try:
        from aiohttp import ClientConnectionError

        kinds.append(ClientConnectionError)
    except ImportError:  # pragma: no cover
        pass
    return isinstance(error, tuple(kinds))


def _causes(error: BaseException) -> Iterator[BaseException]:
    """`error`, its causes and contexts, and the errors botocore and aiohttp wrap in theirs
    (`kwargs["error"]`, `os_error`), each once."""
    seen: set[int] = set()
    stack: list[Any] = [error]
    while stack:
        current = stack.pop()
        if not isinstance(current, BaseException) or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        wrapped = getattr(current, "kwargs", None)
        wrapped = wrapped.get("error") if isinstance(wrapped, dict) else None
        stack += [
            current.__cause__,
            current.__context__,
            getattr(current, "os_error", None),
            wrapped,
        ]


def _outage_reason(error: BaseException) -> str:
    """A few words on why a request got no answer: "connection refused", "timeout", ..."""
    causes = list(_causes(error))
    if any(isinstance(cause, ConnectionRefusedError) for cause in causes):
        return "connection refused"
    if any(
        isinstance(cause, TimeoutError) or "Timeout" in type(cause).__name__ for cause in causes
    ):
        return "timeout"
    return type(error).__name__


def _endpoint(url: str) -> str:
    parts = urlsplit(str(url))
    return f"{parts.scheme}://{parts.netloc}"


# --- S3 requests that get no answer: say so while retrying -----------------------------------
# botocore retries a request that got no answer silently (up to about two minutes with the
# default retries). Each S3 client seisctf's filesystem makes gets `_watch_retries` on botocore's
# `needs-retry` event, which fires after every attempt of every request with its outcome. The
# hook runs where the request runs; only the command's own process (one that runs no Dask worker)
# prints or gives up early. The command opens or creates its stores there before any task starts,
# so a wrong endpoint, the common mistake, shows there on the first request. A worker's retries
# during an outage mid-run stay silent (its process has no terminal of the user's), and they keep
# every attempt: a server that comes back in time is ridden through.
FIRST_CONTACT_ATTEMPTS = 4  # attempts, the first included, of a refused first contact
_answered: set[str] = set()  # endpoints that gave this process any response
_announced: set[str] = set()  # endpoints whose retrying this process has reported


def _in_command_process() -> bool:
    """True unless this process runs a Dask worker (then its requests are tasks' requests)."""
    worker = sys.modules.get("distributed.worker")
    return worker is None or not worker.Worker._instances


def _retry_waits_s(attempts: int) -> int:
    """The longest botocore's standard mode waits in all before `attempts` attempts: a random
    wait of up to min(2**(n-1), 20) s before the n-th retry."""
    return sum(min(2 ** (n - 1), 20) for n in range(1, attempts))


def _watch_retries(
    response: Any = None,
    caught_exception: BaseException | None = None,
    attempts: int = 1,
    request_dict: Mapping[str, Any] | None = None,
    **_: Any,
) -> None:
    """botocore `needs-retry` hook: remember endpoints that answered; for a request that got no
    answer, in the command's process, say once per endpoint what is retried and for how long.

    A connection refused by an endpoint that never answered this process (a wrong port or host,
    or no server) is retried `FIRST_CONTACT_ATTEMPTS` times in all, not the full count: a server
    being started is up within seconds, and a wrong address should not cost minutes. Raising the
    caught error here is how botocore lets a hook end the retries. Returns None: botocore's own
    retry handler decides the waits."""
    endpoint = _endpoint((request_dict or {}).get("url", ""))
    if response is not None:
        _answered.add(endpoint)
        return None
    if caught_exception is None or not is_storage_outage(caught_exception):
        return None
    if not _in_command_process():
        return None
    config = (request_dict or {}).get("context", {}).get("client_config")
    retries = getattr(config, "retries", None) or {}
    total = int(retries.get("total_max_attempts") or retries.get("max_attempts", 4) + 1)
    reason = _outage_reason(caught_exception)
    first_contact = endpoint not in _answered and reason == "connection refused"
    limit = min(total, FIRST_CONTACT_ATTEMPTS) if first_contact else total
    if attempts >= limit:
        if attempts < total:
            raise caught_exception
        return None
    if endpoint not in _announced:
        _announced.add(endpoint)
        hint = "; nothing answered there yet: is endpoint_url right?" if first_contact else ""
        print(
            f"seisctf: storage at {endpoint} does not answer ({reason}); retrying for up to "
            f"{limit} attempts (at most {_retry_waits_s(limit)} s of waits){hint}",
            file=sys.stderr,
            flush=True,
        )
    return None


def never_answered(error: BaseException) -> str | None:
    """For an outage error: the endpoint it names if nothing there ever answered this process
    (a wrong address rather than a server that went away), else None."""
    for cause in _causes(error):
        url = (getattr(cause, "kwargs", None) or {}).get("endpoint_url")
        if isinstance(url, str) and "://" in url:
            endpoint = _endpoint(url)
            return endpoint if endpoint not in _answered else None
    return None


def __getattr__(name: str) -> Any:
    """`WatchedS3FileSystem`, built on first use: importing s3fs costs about a second, which
    commands that never touch S3 do not pay. Pickles by reference like any module class."""
    if name != "WatchedS3FileSystem":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    built = globals().get(name)
    if built is not None:  # called directly after the first use: the one class, or pickle fails
        return built
    import s3fs

    class WatchedS3FileSystem(s3fs.S3FileSystem):
        """s3fs, with `_watch_retries` on every S3 client it makes."""

        async def set_session(self, refresh: bool = False, kwargs: dict | None = None) -> Any:
            client = await super().set_session(refresh=refresh, kwargs=kwargs or {})
            client.meta.events.register(
                "needs-retry.s3", _watch_retries, unique_id="seisctf-watch-retries"
            )
            return client

    # Named as a module attribute, so that pickle (Dask sends stores to workers) finds it.
    WatchedS3FileSystem.__module__ = __name__
    WatchedS3FileSystem.__qualname__ = name
    globals()[name] = WatchedS3FileSystem
    return WatchedS3FileSystem


# s3:// and s3a:// URLs opened in a process that imported seisctf.storage use it (fsspec imports
# the class when the first such URL is opened).
for _protocol in ("s3", "s3a"):
    if _protocol in fsspec.registry:  # s3fs already in use here: nothing to defer
        fsspec.register_implementation(_protocol, __getattr__("WatchedS3FileSystem"), clobber=True)
    else:
        fsspec.register_implementation(_protocol, f"{__name__}.WatchedS3FileSystem", clobber=True)


# --- S3 mistakes as bad input -------------------------------------------------------------------
CREDENTIALS_HELP = (
    "give `storage_options` key=KEY and `storage_options` secret=SECRET, or set "
    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or an AWS profile), or `storage_options` "
    "anon=true for a public bucket"
)
_REFUSED_CREDENTIALS = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken"}


def _bucket_of(url: str) -> str:
    return str(url).split("://", 1)[-1].split("/", 1)[0]


def _endpoint_name(storage_options: StorageOptions | None) -> str:
    return (storage_options or {}).get("endpoint_url") or "the AWS default endpoint"


def _no_bucket(bucket: str, storage_options: StorageOptions | None) -> str:
    """What to say of a bucket that does not exist."""
    endpoint = _endpoint_name(storage_options)
    return (
        f"bucket {bucket} does not exist at {endpoint}; create it first "
        f"(e.g. `aws s3 mb s3://{bucket} --endpoint-url {endpoint}`)"
    )


def _head_bucket(bucket: str, storage_options: StorageOptions | None) -> None:
    """One HeadBucket request, no retries (raises what s3fs raises)."""
    options = _with_defaults(
        options_for(f"s3://{bucket}", storage_options) or {},
        {"config_kwargs": {"retries": {"max_attempts": 0}}, "skip_instance_cache": True},
    )
    __getattr__("WatchedS3FileSystem")(**options).call_s3("head_bucket", Bucket=bucket)


def _bucket_exists(bucket: str, storage_options: StorageOptions | None) -> bool | None:
    """Whether S3 has `bucket` (one HeadBucket, no retries); None if it cannot tell (denied,
    or no answer)."""
    try:
        _head_bucket(bucket, storage_options)
    except FileNotFoundError:
        return False
    except Exception:  # noqa: BLE001 - denied or unreachable: the original error stands
        return None
    return True


def check_buckets(urls: Sequence[str], storage_options: StorageOptions | None) -> None:
    """Before any work: the bucket of every S3 URL in `urls` exists and the credentials reach it
    (one HeadBucket each, no retries), else InvalidInput naming the URL (`storage_mistake`'s
    texts). An endpoint that does not answer is left to the command, whose retries say so."""
    checked: set[str] = set()
    for url in urls:
        bucket = _bucket_of(url)
        if not str(url).startswith(("s3://", "s3a://")) or bucket in checked:
            continue
        checked.add(bucket)
        try:
            _head_bucket(bucket, storage_options)
        except FileNotFoundError:
            raise InvalidInput(str(url), _no_bucket(bucket, storage_options)) from None
        except Exception as error:  # noqa: BLE001 - judged by storage_mistake, else left
            mistake = storage_mistake(error, [str(url)], storage_options)
            if mistake is not None:
                raise mistake from None


def storage_mistake(
    error: BaseException, urls: Sequence[str], storage_options: StorageOptions | None
) -> InvalidInput | None:
    """The S3 mistake behind `error` as bad input naming the URL, or None if it is none of them:
    no credentials, credentials the endpoint refuses, a bucket that does not exist (SeaweedFS
    refuses a write to it as AccessDenied, so a refusal is checked with one HeadBucket), or
    access denied. `urls`: the command's URLs (the S3 ones name the store when the error does
    not); `storage_options` as given (`endpoint_url` names the endpoint)."""
    s3_urls = [str(url) for url in urls if str(url).startswith(("s3://", "s3a://"))]
    if not s3_urls:
        return None
    from botocore.exceptions import ClientError, NoCredentialsError, PartialCredentialsError

    endpoint = _endpoint_name(storage_options)
    causes = list(_causes(error))
    if any(isinstance(cause, NoCredentialsError | PartialCredentialsError) for cause in causes):
        return InvalidInput(s3_urls[0], f"no S3 credentials for {endpoint}: {CREDENTIALS_HELP}")
    refusals = [cause for cause in causes if isinstance(cause, ClientError)]
    detail = refusals[0].response.get("Error", {}) if refusals else {}
    code = str(detail.get("Code", ""))
    # s3fs turns S3's refusals into these OS errors, without a file name; a worker's arrive
    # without their cause. One with a file name is about a local file.
    from_s3 = isinstance(error, PermissionError | FileNotFoundError) and error.filename is None
    if not (refusals or from_s3):
        return None
    url = next((u for u in s3_urls if _bucket_of(u) == detail.get("BucketName")), s3_urls[0])
    bucket = detail.get("BucketName") or _bucket_of(url)
    if code == "NoSuchBucket" or _bucket_exists(bucket, storage_options) is False:
        return InvalidInput(url, _no_bucket(bucket, storage_options))
    if code in _REFUSED_CREDENTIALS:
        return InvalidInput(url, f"{endpoint} refuses the credentials ({code}): {CREDENTIALS_HELP}")
    if code == "AccessDenied" or (from_s3 and isinstance(error, PermissionError)):
        operation = getattr(refusals[0], "operation_name", "") if refusals else ""
        return InvalidInput(
            url,
            f"access denied by {endpoint}{f' to {operation}' if operation else ''}: check that "
            f"the credentials may use bucket {bucket} ({CREDENTIALS_HELP})",
        )
    return None


def join(url: str, *parts: str) -> str:
    return "/".join([str(url).rstrip("/"), *parts])


def open_group(
    url: str, storage_options: StorageOptions | None = None, mode: str = "r"
) -> zarr.Group:
    """Open a zarr v3 group; a missing store is bad input naming the URL."""
    try:
        return zarr.open_group(
            str(url),
            mode=mode,
            storage_options=options_for(url, storage_options),
            zarr_format=3 if mode != "r" else None,
        )
    except (FileNotFoundError, zarr.errors.GroupNotFoundError) as error:
        bucket = _bucket_of(url)
        s3 = str(url).startswith(("s3://", "s3a://"))
        if s3 and _bucket_exists(bucket, storage_options) is False:
            raise InvalidInput(str(url), _no_bucket(bucket, storage_options)) from None
        raise InvalidInput(str(url), f"no zarr group found there ({error})") from None


def finish_group(
    url: str, attrs: Mapping[str, Any], storage_options: StorageOptions | None
) -> None:
    """Consolidate a group's metadata, then write its attrs and mark it complete: always last.

    The attrs and the marker go in by one write of the group's `zarr.json` that also holds the
    consolidated metadata (one object: atomic on object stores; on local disks zarr writes a
    temporary file and renames it), so no reader sees a store marked complete without its
    metadata. One write of the attrs, not three: an ingest's attrs list every input file (25 MB
    of JSON at 10^5 files), and each write of them costs ~5x their size in the client's memory."""
    group = open_group(url, storage_options, mode="r+")
    zarr.consolidate_metadata(group.store)
    consolidated = zarr.open_group(group.store, mode="r+", zarr_format=3, use_consolidated=True)
    update = {key: value for key, value in attrs.items() if key != conventions.ATTR_COMPLETE}
    consolidated.attrs.update({**update, conventions.ATTR_COMPLETE: True})


def require_complete(group: zarr.Group, url: str) -> zarr.Group:
    if not group.attrs.get(conventions.ATTR_COMPLETE, False):
        raise InvalidInput(str(url), "store is incomplete (its writer did not finish); re-run it")
    return group


# Sizes an array's metadata may declare before anything lazy is built over it: a Dask array of
# more chunks does not fit in memory (its chunk tuples alone), a chunk this large cannot be
# decoded. seisctf's own stores stay far below (chunks of at most tens of MiB).
MAX_DECLARED_CHUNKS = 2**26
MAX_DECLARED_CHUNK_BYTES = 2**31


def check_declared_sizes(array: zarr.Array, what: str) -> zarr.Array:
    """Refuse an array whose metadata declares an absurd number or size of chunks."""
    chunks = tuple(array.chunks)
    count = math.prod(-(-n // c) for n, c in zip(array.shape, chunks, strict=True))
    chunk_bytes = math.prod(getattr(array, "shards", None) or chunks) * array.dtype.itemsize
    if count > MAX_DECLARED_CHUNKS or chunk_bytes > MAX_DECLARED_CHUNK_BYTES:
        raise InvalidInput(
            what,
            f"metadata declares shape {tuple(array.shape)} in chunks {chunks}: {count} "
            f"chunks of {chunk_bytes} bytes (limits {MAX_DECLARED_CHUNKS} chunks, "
            f"{MAX_DECLARED_CHUNK_BYTES} bytes)",
        )
    return array


def write_dataset(
    dataset: xr.Dataset,
    url: str,
    storage_options: StorageOptions | None = None,
    *,
    label: str = "write",
    quiet: bool = False,
    compress: bool = True,
) -> None:
    """Write a (lazy) Dataset as a zarr v3 store, chunk-aligned, attrs and marker last.
    Numeric variables use `conventions.DATA_CODEC`; `compress=False`: no compressor (scratch
    stores, written and read once)."""
    attrs = dict(dataset.attrs)
    dataset = dataset.copy()
    dataset.attrs = {}
    for name in dataset.variables:
        dataset[name].encoding.pop("chunks", None)
    encoding = {
        name: {"compressors": conventions.data_compressor() if compress else None}
        for name, variable in dataset.data_vars.items()
        if variable.dtype.kind in "biufc"
    }
    compute(start_dataset(dataset, url, storage_options, encoding), label=label, quiet=quiet)
    finish_group(url, attrs, storage_options)


def start_dataset(
    dataset: xr.Dataset,
    url: str,
    storage_options: StorageOptions | None,
    encoding: Mapping[str, Mapping[str, Any]],
) -> Any:
    """Create the zarr v3 store at `url` for `dataset` (replacing one there): its metadata and
    numpy-backed variables now, not marked complete; returns the Delayed that writes the
    Dask-backed ones (compute it, or write their chunks yourself), then call `finish_group`."""
    return dataset.to_zarr(
        str(url),
        mode="w",
        compute=False,
        zarr_format=3,
        consolidated=False,
        storage_options=options_for(url, storage_options),
        encoding=dict(encoding),
    )


def open_dataset(url: str, storage_options: StorageOptions | None = None) -> xr.Dataset:
    """Open a complete seisctf store lazily (Dask-backed) with xarray."""
    group = require_complete(open_group(url, storage_options), url)
    for name, array in group.arrays():
        check_declared_sizes(array, join(url, name))
    # Chunk reads inlined: each is then a root task the scheduler queues, instead of every read
    # depending on one shared array task and running far ahead of its consumers.
    return xr.open_dataset(
        str(url),
        engine="zarr",
        chunks={},
        inline_array=True,
        storage_options=options_for(url, storage_options),
        consolidated=True,
        zarr_format=3,
    )


def write_arrays(
    arrays: Mapping[str, da.Array],
    url: str,
    attrs: Mapping[str, Any],
    storage_options: StorageOptions | None = None,
    *,
    chunks: Mapping[str, tuple[int, ...]] | None = None,
    label: str = "write",
    quiet: bool = False,
    finish: bool = True,
) -> None:
    """Write named Dask arrays as arrays of one zarr v3 group (a CTF bundle or submission).

    Each array is rechunked to its zarr chunks (given, or `time_space_chunks` of its shape) so
    every write task owns whole chunks; the group's attrs and completion marker go last (unless
    `finish` is False: the caller then calls `finish_group` once it has all the attrs). Every
    chunk is stored, also one equal to the fill value: a referee refuses missing chunks.
    """
    group = open_group(url, storage_options, mode="w")
    targets, sources = [], []
    for name, array in arrays.items():
        array_chunks = (chunks or {}).get(name) or conventions.time_space_chunks(
            *array.shape, itemsize=array.dtype.itemsize
        )
        target = group.create_array(
            name,
            shape=array.shape,
            chunks=array_chunks,
            dtype=array.dtype,
            fill_value=0,
            compressors=conventions.data_compressor(),
            config={"write_empty_chunks": True},  # every chunk stored: none reads as fill
        )
        targets.append(target)
        sources.append(array.rechunk(array_chunks))
    if sources:
        compute(da.store(sources, targets, lock=False, compute=False), label=label, quiet=quiet)
    if finish:
        finish_group(url, attrs, storage_options)


def read_array(url: str, name: str, storage_options: StorageOptions | None = None) -> da.Array:
    """One array of a zarr group as a Dask array with the stored chunks."""
    group = open_group(url, storage_options)
    if name not in group:
        raise InvalidInput(f"{url}/{name}", "array not found in the group")
    return da.from_zarr(check_declared_sizes(group[name], f"{url}/{name}"))


def read_attrs(url: str, storage_options: StorageOptions | None = None) -> dict[str, Any]:
    """The attrs of a complete group."""
    group = require_complete(open_group(url, storage_options), url)
    return dict(group.attrs)
