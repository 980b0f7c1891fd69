"""S3 as seisctf uses it: botocore's retries (how many, and saying so while they run), the
filesystem class every s3:// URL opens with, credentials that never enter a Dask graph, and what
a failed request means (an outage to wait out, or a mistake to name as bad input: no bucket,
credentials, access, an untrusted TLS certificate)."""

from __future__ import annotations

import asyncio
import copy
import os
import ssl
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import fsspec

from seisctf.errors import InvalidInput

StorageOptions = dict[str, Any]

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


def with_retries(storage_options: StorageOptions | None) -> StorageOptions:
    """`storage_options` over seisctf's retry defaults (`s3_retries()` retries, standard mode),
    with the credentials this process holds for them (`with_credentials`), for an S3 URL this
    process opens: fsspec opens it with `WatchedS3FileSystem` (`watch_s3_urls`)."""
    watch_s3_urls()
    retries = {"max_attempts": s3_retries(), "mode": "standard"}
    given = with_credentials(storage_options)
    return _with_defaults({"config_kwargs": {"retries": retries}}, given)


# --- Credentials: never inside a Dask graph -------------------------------------------------------
# Storage options that are credentials, at any depth of the options (`secret` as well as
# `client_kwargs.aws_secret_access_key`): s3fs's key, secret and token and their aliases
# username and password, botocore's client arguments, a session token. Dask pickles a task's
# arguments and sends them to its scheduler and workers (a cluster's logs, dumps and dashboards
# may show them); these options never go there. A worker resolves its credentials from its own
# environment (botocore's chain: AWS_* variables, a profile, an instance role); the embedded
# cluster's workers start with the ones the command was given (`credentials_environ`).
CREDENTIAL_OPTIONS = frozenset(
    {
        "key",
        "secret",
        "token",
        "session_token",
        "username",
        "password",
        "aws_access_key_id",
        "aws_secret_access_key",
        "aws_session_token",
    }
)
# The environment variable botocore reads for each S3 credential, and the options (dotted paths)
# that give it, the first given one winning as it does in s3fs.
CREDENTIAL_ENVIRON = {
    "AWS_ACCESS_KEY_ID": ("key", "username", "client_kwargs.aws_access_key_id"),
    "AWS_SECRET_ACCESS_KEY": ("secret", "password", "client_kwargs.aws_secret_access_key"),
    "AWS_SESSION_TOKEN": ("token", "session_token", "client_kwargs.aws_session_token"),
}


def split_credentials(options: Mapping[str, Any]) -> tuple[StorageOptions, StorageOptions]:
    """(`options` without its credentials, the credentials), both nested as `options` is."""
    public: StorageOptions = {}
    credentials: StorageOptions = {}
    for name, value in options.items():
        if name in CREDENTIAL_OPTIONS:
            credentials[name] = value
        elif isinstance(value, Mapping):
            public[name], inner = split_credentials(value)
            if inner:
                credentials[name] = inner
        else:
            public[name] = value
    return public, credentials


class CredentialedOptions(dict):
    """Storage options whose credentials stay in the process that holds them: the dict is the
    options without credentials (`CREDENTIAL_OPTIONS`), `credentials` holds those, nested as
    given. Pickled (Dask sending a task to its scheduler and workers), it leaves them behind;
    copied with `copy`, it keeps them. This process's own requests take them from
    `with_credentials`; a copy made with `dict(...)` has none."""

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        public, self.credentials = split_credentials(options or {})
        super().__init__(public)

    def __reduce__(self) -> tuple[Any, ...]:
        return (CredentialedOptions, (dict(self),))

    def __copy__(self) -> CredentialedOptions:
        return self.__deepcopy__({})

    def __deepcopy__(self, memo: dict) -> CredentialedOptions:
        copied = CredentialedOptions(copy.deepcopy(dict(self), memo))
        copied.credentials = copy.deepcopy(self.credentials, memo)
        return copied


def with_credentials(storage_options: Mapping[str, Any] | None) -> StorageOptions:
    """`storage_options` with the credentials held with them (`CredentialedOptions`) put back,
    for this process's own filesystem: never give the result to a task."""
    held = getattr(storage_options, "credentials", None) or {}
    return _with_defaults(dict(storage_options or {}), held)


def held_apart(storage_options: Mapping[str, Any] | None) -> CredentialedOptions | None:
    """`storage_options` as `CredentialedOptions` (its credentials held in this process); None
    and options already held are returned as they are."""
    if storage_options is None or isinstance(storage_options, CredentialedOptions):
        return storage_options
    return CredentialedOptions(storage_options)


def _dotted(options: Mapping[str, Any], path: str) -> Any:
    """`options["a"]["b"]` for `path` "a.b"; None where it is missing."""
    value: Any = options
    for name in path.split("."):
        value = value.get(name) if isinstance(value, Mapping) else None
    return value


def credentials_environ(storage_options: Mapping[str, Any] | None) -> dict[str, str]:
    """The environment that gives a worker the S3 credentials held with `storage_options`
    (`CREDENTIAL_ENVIRON`), or {} when none are held. A variable with no credential given is
    empty, so that one the worker inherits is not paired with the given ones (botocore takes
    an empty variable for a missing one)."""
    held = getattr(storage_options, "credentials", None) or {}
    if not held:
        return {}
    environ = {}
    for variable, paths in CREDENTIAL_ENVIRON.items():
        given = [_dotted(held, path) for path in paths]
        environ[variable] = next((str(value) for value in given if value not in (None, "")), "")
    return environ


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
    return isinstance(error, tuple(kinds)) and untrusted_certificate(error) is None


def untrusted_certificate(error: BaseException) -> str | None:
    """Why the endpoint's TLS certificate was refused, when that is behind `error` (a setting to
    fix, never an outage to wait out), else None. A worker's error may arrive as text only."""
    for cause in _causes(error):
        if isinstance(cause, ssl.SSLCertVerificationError):
            return cause.verify_message or str(cause)
        if "CERTIFICATE_VERIFY_FAILED" in str(cause):
            return "certificate verify failed"
    return None


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
            getattr(current, "certificate_error", None),
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
    if caught_exception is not None and untrusted_certificate(caught_exception):
        raise caught_exception  # waiting changes no certificate: no retries
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
    from fsspec.spec import make_instance

    class WatchedS3FileSystem(s3fs.S3FileSystem):
        """s3fs, with `_watch_retries` on every S3 client it makes, each client closed on its
        own event loop, pickled without its credentials (a Dask task's store is rebuilt on the
        worker, which finds credentials in its own environment)."""

        def __reduce__(self) -> tuple[Any, ...]:
            public, _ = split_credentials(self.storage_options)
            return make_instance, (type(self), self.storage_args, public)

        async def set_session(self, refresh: bool = False, kwargs: dict | None = None) -> Any:
            client = await super().set_session(refresh=refresh, kwargs=kwargs or {})
            client.meta.events.register(
                "needs-retry.s3", _watch_retries, unique_id="seisctf-watch-retries"
            )
            return client

        @staticmethod
        def close_session(loop: Any, s3: Any) -> None:
            # s3fs closes a collected filesystem's client on the loop running where it was
            # collected: on a Dask thread that is Dask's loop, and an HTTPS connection then
            # refuses to close there ("attached to a different loop", a traceback). Elsewhere
            # (no loop running, or the client's own) s3fs's way stands: it waits for the close.
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running not in (None, loop) and loop is not None and loop.is_running():
                asyncio.run_coroutine_threadsafe(s3.__aexit__(None, None, None), loop)
                return
            s3fs.S3FileSystem.close_session(loop, s3)

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


def watch_s3_urls() -> None:
    """s3:// and s3a:// URLs open with `WatchedS3FileSystem` (or a subclass of it) again where
    fsspec's registry, global to the process, has since been given another class (code that
    registered its own, plain s3fs say): that class's filesystems would pickle their
    credentials into every task that holds a store opened with them."""
    watched = __getattr__("WatchedS3FileSystem")
    for protocol in ("s3", "s3a"):
        try:
            registered = fsspec.get_filesystem_class(protocol)
        except (ImportError, ValueError):  # a class registered by a name that does not import
            registered = None
        if not (isinstance(registered, type) and issubclass(registered, watched)):
            fsspec.register_implementation(protocol, watched, clobber=True)


# --- S3 mistakes as bad input -------------------------------------------------------------------
# The help names the storage options as a parameter (`{storage_options}`), which the command
# line spells as its flag, `--storage-option`.
STORAGE_OPTIONS = ("storage_options",)
CREDENTIALS_HELP = (
    "give {storage_options} key=KEY and {storage_options} secret=SECRET, or set "
    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or an AWS profile), or {storage_options} "
    "anon=true for a public bucket"
)
TLS_HELP = (
    "name the bundle (PEM) of the certificate authority that issued it in AWS_CA_BUNDLE, or in "
    "{storage_options} client_kwargs.verify=PATH (client_kwargs.verify=false skips the check)"
)
_REFUSED_CREDENTIALS = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken"}


def bucket_of(url: str) -> str:
    return str(url).split("://", 1)[-1].split("/", 1)[0]


def _endpoint_name(storage_options: StorageOptions | None) -> str:
    return (storage_options or {}).get("endpoint_url") or "the AWS default endpoint"


def no_bucket(bucket: str, storage_options: StorageOptions | None) -> str:
    """What to say of a bucket that does not exist."""
    endpoint = _endpoint_name(storage_options)
    return (
        f"bucket {bucket} does not exist at {endpoint}; create it first "
        f"(e.g. `aws s3 mb s3://{bucket} --endpoint-url {endpoint}`)"
    )


def _head_bucket(bucket: str, storage_options: StorageOptions | None) -> None:
    """One HeadBucket request, no retries (raises what s3fs raises)."""
    options = _with_defaults(
        with_retries(storage_options),
        {"config_kwargs": {"retries": {"max_attempts": 0}}, "skip_instance_cache": True},
    )
    __getattr__("WatchedS3FileSystem")(**options).call_s3("head_bucket", Bucket=bucket)


def bucket_exists(bucket: str, storage_options: StorageOptions | None) -> bool | None:
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
        bucket = bucket_of(url)
        if not str(url).startswith(("s3://", "s3a://")) or bucket in checked:
            continue
        checked.add(bucket)
        try:
            _head_bucket(bucket, storage_options)
        except FileNotFoundError:
            raise InvalidInput(str(url), no_bucket(bucket, storage_options)) from None
        except Exception as error:  # noqa: BLE001 - judged by storage_mistake, else left
            mistake = storage_mistake(error, [str(url)], storage_options)
            if mistake is not None:
                raise mistake from None


def storage_mistake(
    error: BaseException, urls: Sequence[str], storage_options: StorageOptions | None
) -> InvalidInput | None:
    """The S3 mistake behind `error` as bad input naming the URL, or None if it is none of them:
    no credentials, credentials the endpoint refuses, a bucket that does not exist (SeaweedFS
    refuses a write to it as AccessDenied, so a refusal is checked with one HeadBucket), access
    denied, or a TLS certificate not trusted here. `urls`: the command's URLs (the S3 ones name
    the store when the error does not); `storage_options` as given (`endpoint_url` names the
    endpoint)."""
    s3_urls = [str(url) for url in urls if str(url).startswith(("s3://", "s3a://"))]
    if not s3_urls:
        return None
    from botocore.exceptions import ClientError, NoCredentialsError, PartialCredentialsError

    endpoint = _endpoint_name(storage_options)
    causes = list(_causes(error))
    if any(isinstance(cause, NoCredentialsError | PartialCredentialsError) for cause in causes):
        return InvalidInput(
            s3_urls[0],
            f"no S3 credentials for {endpoint}: {CREDENTIALS_HELP}",
            parameters=STORAGE_OPTIONS,
        )
    refused_certificate = untrusted_certificate(error)
    if refused_certificate is not None:
        return InvalidInput(
            s3_urls[0],
            f"{endpoint} presents a TLS certificate this machine does not trust "
            f"({refused_certificate}): {TLS_HELP}",
            parameters=STORAGE_OPTIONS,
        )
    refusals = [cause for cause in causes if isinstance(cause, ClientError)]
    detail = refusals[0].response.get("Error", {}) if refusals else {}
    code = str(detail.get("Code", ""))
    # s3fs turns S3's refusals into these OS errors, without a file name; a worker's arrive
    # without their cause. One with a file name is about a local file.
    from_s3 = isinstance(error, PermissionError | FileNotFoundError) and error.filename is None
    if not (refusals or from_s3):
        return None
    url = next((u for u in s3_urls if bucket_of(u) == detail.get("BucketName")), s3_urls[0])
    bucket = detail.get("BucketName") or bucket_of(url)
    if code == "NoSuchBucket" or bucket_exists(bucket, storage_options) is False:
        return InvalidInput(url, no_bucket(bucket, storage_options))
    if code in _REFUSED_CREDENTIALS:
        return InvalidInput(
            url,
            f"{endpoint} refuses the credentials ({code}): {CREDENTIALS_HELP}",
            parameters=STORAGE_OPTIONS,
        )
    if code == "AccessDenied" or (from_s3 and isinstance(error, PermissionError)):
        operation = getattr(refusals[0], "operation_name", "") if refusals else ""
        return InvalidInput(
            url,
            f"access denied by {endpoint}{f' to {operation}' if operation else ''}: check that "
            f"the credentials may use bucket {bucket} ({CREDENTIALS_HELP})",
            parameters=STORAGE_OPTIONS,
        )
    return None
