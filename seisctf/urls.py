"""Locations as users type them: a local path or an fsspec URL, checked where they enter.

A misspelt URL does not fail by itself: `s3://demo//x.zarr` writes the keys `demo/x.zarr/…`
while its metadata lands elsewhere, `s3:/demo/x.zarr` and `s3//demo/x.zarr` are local folders
named `s3:` and `s3`, and `S3://` or `s4://` name no file system. `checked` refuses each, once,
where a location enters (the command line, a recipe, the storage layer's openers), with the
spelling that was probably meant:

- a URL: a lower-case scheme fsspec knows; a host or bucket; no empty (`//`), `.` or `..` path
  segment before a query; no white space at its ends and no control character in it;
- a local path: no first segment that reads as a scheme (`s3:`, `https:`, any `word:` of two
  letters or more; write `./s3:x` for a local file of that name), nor an object store's scheme
  followed by `//` (`s3//bucket`).

fsspec's registry is imported only for a location that looks like a URL.
"""

from __future__ import annotations

import difflib
import re

from seisctf.errors import InvalidInput

SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
# A local path whose first segment is `word:` (`s3:/demo/x`, `s3:demo/x`): a URL missing a slash.
SCHEME_PREFIX = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):/*(.*)", re.DOTALL)
# A local path `word//rest` (`s3//demo/x`): a URL missing its colon, when `word` is a scheme.
SCHEME_NO_COLON = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)//+(.*)", re.DOTALL)
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Schemes offered first as the spelling meant (the ones seisctf's users write).
COMMON_SCHEMES = ("s3", "s3a", "gs", "gcs", "az", "abfs", "http", "https", "file", "memory")
# Object stores and web servers: `s3//bucket/key` is taken for a typo of `s3://bucket/key` (a local
# folder `data//x` is left alone).
REMOTE_SCHEMES = frozenset(COMMON_SCHEMES) - {"file", "memory"}
# Schemes whose URLs name no host or bucket (`file:///abs/path`, `memory://x`).
LOCAL_SCHEMES = frozenset({"file", "local", "memory"})


def known_schemes() -> frozenset[str]:
    """The protocols fsspec can open: its known implementations and those registered."""
    from fsspec.registry import known_implementations, registry

    return frozenset(known_implementations) | frozenset(registry)


def checked(location: str, what: str | None = None) -> str:
    """`location` itself when it is a local path or a well-formed URL (module doc); else
    InvalidInput naming `what` (default: the location) and the spelling probably meant."""
    what = str(location) if what is None else what
    text = str(location)
    if "://" in text:
        for part in text.split("::"):
            _check_url(part, text, what)
    else:
        _check_local(text, what)
    return location


def _check_url(part: str, whole: str, what: str) -> None:
    """One URL of a location (`whole`, maybe a chain `a::b://…`); a bare protocol name in a
    chain (`simplecache::`) has no path to check."""
    if whole != whole.strip():
        raise InvalidInput(what, f"white space at an end of the URL; did you mean {whole.strip()}?")
    control = CONTROL.search(whole)
    if control:
        raise InvalidInput(what, f"the URL holds the control character {control[0]!r}")
    scheme, separator, rest = part.partition("://")
    if not SCHEME.fullmatch(scheme):
        raise InvalidInput(what, f"{scheme!r} is not a URL scheme (expected e.g. s3://BUCKET/KEY)")
    known = known_schemes()
    if scheme not in known:
        meant = scheme.lower() if scheme.lower() in known else _closest(scheme.lower(), known)
        fixed = whole.replace(f"{scheme}{separator}", f"{meant}{separator}", 1) if meant else ""
        if meant == scheme.lower():
            raise InvalidInput(what, f"write the scheme in lower case: {fixed}")
        hint = f"; did you mean {fixed}?" if meant else f" (known: {', '.join(COMMON_SCHEMES)})"
        raise InvalidInput(what, f"unknown URL scheme {scheme!r}{hint}")
    if not separator or scheme in LOCAL_SCHEMES:
        return
    path = re.split(r"[?#]", rest, maxsplit=1)[0]
    segments = path.split("/")
    host = segments[0]
    if host.endswith(":") and SCHEME.fullmatch(host[:-1]):
        # SCHEME_PREFIX matches any "scheme:" start, and `host` begins with one.
        twice = SCHEME_PREFIX.fullmatch(rest)
        assert twice is not None
        fixed = f"{scheme}://{twice[2]}"
        raise InvalidInput(what, f"the scheme is given twice; did you mean {fixed}?")
    inner = segments[:-1] if len(segments) > 1 else segments  # one trailing "/" is fine
    if all(inner) and not {".", ".."} & set(segments):
        return
    kept = "/".join(s for s in segments if s and s != ".")
    fixed = whole.replace(f"{scheme}://{path}", f"{scheme}://{kept}", 1)
    if not host:
        problem = "no bucket or host after '://'"
    elif not all(inner):
        problem = "an empty path segment ('//')"
    else:
        problem = "a '.' or '..' path segment (object stores keep it as a name)"
    meant = f"; did you mean {fixed}?" if kept and ".." not in kept.split("/") else ""
    raise InvalidInput(what, f"{problem}{meant}")


def _check_local(text: str, what: str) -> None:
    prefixed = SCHEME_PREFIX.fullmatch(text)
    if prefixed and len(prefixed[1]) > 1:  # one letter: a drive, not a scheme
        scheme, rest = prefixed[1], prefixed[2]
        meant = scheme.lower() if scheme.lower() in known_schemes() else _closest(scheme.lower())
        hint = f"did you mean {meant}://{rest}?" if meant else f"'{scheme}:' is no URL scheme"
        raise InvalidInput(
            what,
            f"reads as a URL missing a slash; {hint} (a local path starting with '{scheme}:' is "
            f"written ./{text})",
        )
    doubled = SCHEME_NO_COLON.fullmatch(text)
    if doubled and doubled[1].lower() in REMOTE_SCHEMES:
        raise InvalidInput(
            what,
            f"reads as a URL missing its ':'; did you mean {doubled[1].lower()}://{doubled[2]}? "
            f"(a local path is written ./{text})",
        )


def _closest(scheme: str, known: frozenset[str] = frozenset()) -> str | None:
    """The scheme `scheme` is most likely a typo of: a common one, else one of `known`."""
    for candidates in (COMMON_SCHEMES, sorted(known)):
        close = difflib.get_close_matches(scheme, candidates, n=1, cutoff=0.5)
        if close:
            return close[0]
    return None
