"""A competition's folder: what `seisctf referee create` writes and `seisctf serve` reads.

```
DIR/competition.json     name, datasets (each: family, `ctf` or `picks`, public and truth
                         URLs, public bundle id), quota, upload limit, database URL (default:
                         DIR/service.sqlite),
                         the uploads bucket (`uploads`, s3://bucket/prefix, or none) and its
                         storage options (`uploads_options`: never credentials)
DIR/keys/receipts.ed25519      the receipts' signing key (PEM, mode 0600; never served)
DIR/keys/receipts.ed25519.pub  its public key (PEM; served at /api/receipt-key)
DIR/bundles/<id>.zip     each public bundle as a zip of its zarr group, <id> the SHA-256 of its
                         arrays (`bundle_id`): a release can be downloaded again by its id
DIR/uploads/             the submissions' bytes, by content hash and submission id
DIR/leaderboard.sqlite   the referee's record of every score (`seisctf.scoring.leaderboard`)
DIR/releases.sqlite      the Ladder's and the releases' record (`seisctf.scoring.release`)
DIR/site/                the leaderboard's pages, rendered again when a score lands
```
With a PostgreSQL database (`--db postgresql://…`) neither SQLite file is made: the referee's
records are the tables `leaderboard`, `releases` and `ladder` of that database, beside the job
table (`seisctf.scoring.postgres_records`; `Competition.records`), so services on several hosts
share one competition.
The truth stays where its URL points (the server's disk or bucket); nothing under DIR is a copy
of it, and no route serves a path the organiser did not put in `bundles/` or `site/`."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import zipfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np
import pandas as pd

from seisctf import conventions as cv
from seisctf import storage
from seisctf.catalogs.pick_table import describe_traces
from seisctf.catalogs.trace_table import per_trace_names, read_trace_table
from seisctf.commitment import sha256_commitment
from seisctf.ctf_json import CtfManifest
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.s3 import split_credentials, with_credentials
from seisctf.scoring.pick_public import label_columns
from seisctf.scoring.picks import PickTruth, read_truth
from seisctf.scoring.release_request import DEFAULT_QUOTA, on_postgres

CONFIG = "competition.json"
KEY = "keys/receipts.ed25519"
DEFAULT_MAX_UPLOAD_BYTES = 2 * 1024**3
FAMILIES = ("ctf", "picks")
SCORED_SPLIT = "test"  # the traces a picking dataset scores (`score picks --split`'s default)


@dataclass(frozen=True)
class Dataset:
    """One scored dataset: its `family` (`ctf` or `picks`), the public bundle's and the truth's
    URLs, the public bundle's id (`bundle_id`), and the round it belongs to or whether it is
    permanent."""

    family: str
    public: str
    truth: str
    bundle_id: str
    round: str = ""  # a rotating round's label; "" for none
    permanent: bool = False  # a frozen collection, scored across rounds


@dataclass(frozen=True)
class Competition:
    """A competition's settings (`competition.json`) and its folder `root`."""

    root: Path
    name: str
    datasets: dict[str, Dataset]
    quota: int = DEFAULT_QUOTA
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES
    db: str = ""
    uploads: str = ""  # s3://bucket/prefix for uploads through S3 (`s3_uploads`), or ""
    uploads_options: dict[str, Any] = field(default_factory=dict)  # never credentials
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def db_url(self) -> str:
        return self.db or f"sqlite:///{self.root / 'service.sqlite'}"

    def path(self, name: str) -> Path:
        return self.root / name

    def records(self, name: str) -> str:
        """Where the referee's record `name` (`leaderboard.sqlite`, `releases.sqlite`) is kept:
        the service's database URL when it is PostgreSQL's, else the SQLite file DIR/name."""
        return self.db_url if on_postgres(self.db_url) else str(self.path(name))


def _array_digest(array: Any) -> str:
    """The contract's unsalted commitment of a numeric array's values; of a text array (an
    event-window store's trace names), the SHA-256 of its values in order, each `\\n`-ended."""
    if np.dtype(array.dtype).kind in "biufc":
        return sha256_commitment(da.from_zarr(array), None)
    text = "".join(f"{value}\n" for value in np.asarray(array[...]).ravel().tolist())
    return hashlib.sha256(text.encode()).hexdigest()


def bundle_id(public: StoreLocation) -> str:
    """The SHA-256 of a public bundle's arrays: of the sorted JSON {name: `_array_digest`}."""
    group = storage.open_group(public)
    digests = {name: _array_digest(array) for name, array in sorted(group.arrays())}
    return hashlib.sha256(json.dumps(digests, sort_keys=True).encode()).hexdigest()


def _zip_folder(folder: Path, out: Path) -> None:
    partial = out.with_suffix(".partial")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_STORED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and not path.is_symlink():
                archive.write(path, path.relative_to(folder).as_posix())
    partial.replace(out)


def _write_keys(root: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private = root / KEY
    private.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as out:
        out.write(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    (root / f"{KEY}.pub").write_bytes(public)


def _kind(truth: str) -> tuple[str, set[str], PickTruth | None]:
    """(family, truth commitments, labels of a picking truth) of the truth at `truth`: `ctf`
    when its group holds a CTF manifest (as `score ctf` opens it), `picks` when it is an
    event-window store with pick labels (as `score picks` reads it), else InvalidInput."""
    attrs = dict(storage.open_group(StoreLocation(truth)).attrs)
    try:
        manifest = CtfManifest.from_attrs(attrs, truth)
    except InvalidInput as not_ctf:
        try:
            labels = read_truth(StoreLocation(truth))
        except InvalidInput as not_picks:
            raise InvalidInput(
                truth,
                f"neither a CTF truth bundle ({not_ctf.problem}) nor an event-window store "
                f"with pick labels ({not_picks.problem})",
            ) from None
        return "picks", {labels.commitment(SCORED_SPLIT)}, labels
    return "ctf", set((manifest.truth_sha256 or {}).values()), None


def _check_picks_public(public: str, truth: PickTruth) -> None:
    """Refused unless the event-window store `public` holds the traces the truth scores, as its
    own test split, without a label of theirs (`pick_public.label_columns`: they stay with the
    truth)."""
    shown = read_truth(StoreLocation(public), labelled=False)
    names = shown.labels[cv.TRACE_NAME].to_numpy(dtype=object)
    scored = truth.labels[cv.TRACE_NAME].to_numpy(dtype=object)[truth.scored(SCORED_SPLIT)]
    in_split = set(names[(shown.labels[cv.SPLIT_VAR] == SCORED_SPLIT).to_numpy()])
    if in_split != set(scored):
        raise InvalidInput(
            public,
            describe_traces(
                sorted(in_split ^ set(scored)),
                f"in one of its and the truth's {SCORED_SPLIT} splits only",
            )
            + ": a picking dataset's public bundle holds the truth's traces and splits",
        )
    ds = storage.open_dataset(StoreLocation(public))
    columns = label_columns(per_trace_names(ds))
    table = read_trace_table(ds, columns).iloc[pd.Index(names).get_indexer(scored)]
    given = {}
    for column in columns:
        text = table[column].astype(str).str.strip()
        given[column] = (table[column].notna() & ~text.isin(["", "nan", "NaN", "None"])).to_numpy()
    labelled = [column for column in columns if given[column].any()]
    if labelled:
        traces = np.logical_or.reduce([given[column] for column in labelled])
        raise InvalidInput(
            public,
            describe_traces(scored[traces], f"of its {SCORED_SPLIT} split with labels given")
            + f" ({', '.join(labelled)}): a public bundle holds none of their columns but "
            "the trace's name, split, receiver and geometry (`seisctf referee public-picks` "
            "writes one); the rest stays with the truth",
        )


def _described(
    root: Path,
    name: str,
    public: str,
    truth: str,
    round_: str,
    permanent: bool,
    others: dict[str, Dataset],
) -> Dataset:
    """A dataset of the competition in `root`: its bundles checked, its public bundle zipped
    under its id; refused when `name` is taken or its truth is another dataset's (a round's
    truth is fresh: a new secret)."""
    if name in others:
        raise InvalidInput(
            f"dataset {name!r}",
            "exists already (a permanent collection, or a round, is added under a name of its own)",
        )
    for role, url in (("public", public), ("truth", truth)):
        if not Path(url).is_dir():
            raise InvalidInput(url, f"{name}'s {role} bundle: not a zarr folder here")
    family, fresh, labels = _kind(truth)
    if labels is not None:
        _check_picks_public(public, labels)
    for other, spec in others.items():
        if fresh & _kind(spec.truth)[1]:
            raise InvalidInput(
                truth, f"holds {other}'s truth: each round's truth is made with a new secret"
            )
    ident = bundle_id(StoreLocation(public))
    (root / "bundles").mkdir(parents=True, exist_ok=True)
    _zip_folder(Path(public), root / "bundles" / f"{ident}.zip")
    return Dataset(
        family, str(Path(public).resolve()), str(Path(truth).resolve()), ident, round_, permanent
    )


def _uploads_options(uploads: str, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The storage options kept for the uploads bucket: refused when `uploads` is not an S3
    URL, or when they hold credentials (the server takes those from its environment)."""
    if uploads and not uploads.startswith(("s3://", "s3a://")):
        raise InvalidInput(uploads, "the uploads bucket: expected s3://bucket/prefix")
    if not uploads:
        if options:
            raise InvalidInput("--storage-option", "applies to the uploads bucket (--uploads)")
        return {}
    public, credentials = split_credentials(with_credentials(options))
    if credentials:
        raise InvalidInput(
            "--storage-option",
            "credentials are not kept in competition.json: give the server "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in its environment",
        )
    return public


def _save(competition: Competition) -> None:
    config = {k: v for k, v in asdict(competition).items() if k not in ("root", "extra")}
    partial = competition.root / f"{CONFIG}.partial"
    partial.write_text(json.dumps(config, indent=2) + "\n")
    partial.replace(competition.root / CONFIG)


def create(
    root: Path,
    name: str,
    datasets: dict[str, tuple[str, str]],
    *,
    quota: int = DEFAULT_QUOTA,
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES,
    db: str = "",
    uploads: str = "",
    uploads_options: Mapping[str, Any] | None = None,
) -> Competition:
    """Make a competition's folder (module doc) for `datasets` ({name: (public URL, truth
    URL)} on this machine's disk: CTF bundles, or a picking dataset's event-window stores),
    taking uploads through the bucket `uploads` too when given; refused when `root` holds one
    already."""
    if (root / CONFIG).exists():
        raise InvalidInput(str(root), "holds a competition already")
    kept_options = _uploads_options(uploads, uploads_options)
    described: dict[str, Dataset] = {}
    for dataset, (public, truth) in datasets.items():
        described[dataset] = _described(root, dataset, public, truth, "", False, described)
    _write_keys(root)
    competition = Competition(
        root, name, described, quota, max_upload_bytes, db, uploads.rstrip("/"), kept_options
    )
    _save(competition)
    return competition


def add_dataset(
    root: Path, name: str, public: str, truth: str, *, round_: str = "", permanent: bool = False
) -> Competition:
    """The competition in `root` with one more dataset: a new round's (its truth fresh) or a
    permanent collection. A running service sees it at its next request (`Reloading`)."""
    found = load(root)
    added = _described(root, name, public, truth, round_, permanent, found.datasets)
    grown = dataclasses.replace(found, datasets={**found.datasets, name: added})
    _save(grown)
    return grown


def load(root: Path, db: str = "") -> Competition:
    """The competition in `root` (`db`: a database URL overriding the config's)."""
    try:
        config = json.loads((root / CONFIG).read_text())
    except FileNotFoundError:
        raise InvalidInput(
            str(root),
            f"no {CONFIG}: not a competition folder (make one with `seisctf referee create`)",
        ) from None
    datasets = {name: Dataset(**spec) for name, spec in config.pop("datasets").items()}
    return Competition(root=root, datasets=datasets, **{**config, "db": db or config.get("db", "")})


class Reloading:
    """The competition of a running service, loaded again when its `competition.json` changes
    (a round added while it runs)."""

    def __init__(self, competition: Competition) -> None:
        self._competition, self._stamp = competition, self._mtime(competition.root)

    @staticmethod
    def _mtime(root: Path) -> int:
        return (root / CONFIG).stat().st_mtime_ns

    def get(self) -> Competition:
        stamp = self._mtime(self._competition.root)
        if stamp != self._stamp:
            fresh = load(self._competition.root, self._competition.db)
            self._competition, self._stamp = fresh, stamp
        return self._competition
