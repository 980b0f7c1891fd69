"""The JSON documents of CTF scoring as typed, validated objects: a bundle's manifest (its `ctf`
attr, `CtfManifest`) and the result of scoring one submission (`CtfResult`).

Readers never index these documents: `CtfManifest.from_attrs` (a bundle group's attrs),
`CtfManifest.from_json` and `CtfResult.from_json` check every field the readers use and raise
InvalidInput naming the file and the field (`pairs[2].shape`) when one is missing or of the
wrong type. `to_json` gives the document back as it was read (keys this module does not know
are kept in `extra`), so a document read and written again is unchanged. Their layout is
docs/contract.md's ("CTF task bundle", "CTF bundle manifest", "Scoring conventions and
results", "Scores").

Standard library only: the command line checks submissions against a manifest before it loads
Dask, xarray or zarr.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from seisctf import conventions as cv
from seisctf.errors import InvalidInput

Shape = tuple[int, int]  # (time steps, sensors) of one array


class JsonFields:
    """Typed reads of one JSON object; a missing field or one of the wrong type is InvalidInput
    naming `what` (the file) and the field's path in the `kind` of document (`manifest field
    'pairs[2].test'`)."""

    def __init__(self, document: object, what: str, path: str = "", kind: str = "manifest") -> None:
        if not isinstance(document, Mapping):
            where = f"{kind} field {path!r}" if path else kind
            raise InvalidInput(what, f"{where} must be a JSON object, got {document!r:.80}")
        self.document, self.what, self.path, self.kind = document, what, path, kind

    def __contains__(self, key: str) -> bool:
        return key in self.document

    def name(self, key: str) -> str:
        """The field's path in the manifest, e.g. `pairs[2].test`."""
        return f"{self.path}.{key}" if self.path else key

    def wrong(self, key: str, expected: str) -> InvalidInput:
        value = self.document[key]
        return InvalidInput(
            self.what, f"{self.kind} field {self.name(key)!r} must be {expected}, got {value!r:.80}"
        )

    def get(self, key: str) -> Any:
        if key not in self.document:
            raise InvalidInput(self.what, f"{self.kind} field {self.name(key)!r} is missing")
        return self.document[key]

    def integer(self, key: str) -> int:
        value = self.get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.wrong(key, "an integer")
        return value

    def number(self, key: str) -> float:
        value = self.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.wrong(key, "a number")
        return value

    def text(self, key: str) -> str:
        value = self.get(key)
        if not isinstance(value, str):
            raise self.wrong(key, "a string")
        return value

    def optional(self, key: str, read: Callable[[str], Any]) -> Any:
        """`read(key)`, or None when the field is absent."""
        return read(key) if key in self.document else None

    def score(self, key: str) -> float | None:
        """A score: a number, or None (unscorable)."""
        return None if self.get(key) is None else self.number(key)

    def scores(self, key: str) -> dict[str, float | None]:
        """An object of scores by name (`{"E1": 12.5, "E2": null}`)."""
        value = self.mapping(key)
        named = JsonFields(value, self.what, self.name(key), self.kind)
        return {name: named.score(name) for name in value}

    def texts(self, key: str) -> tuple[str, ...]:
        value = self.get(key)
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self.wrong(key, "a list of strings")
        return tuple(value)

    def shape(self, key: str) -> Shape:
        value = self.get(key)
        if (
            not isinstance(value, list)
            or len(value) != 2
            or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in value)
        ):
            raise self.wrong(key, "[time steps, sensors], two non-negative integers")
        return value[0], value[1]

    def mapping(self, key: str) -> dict[str, Any]:
        value = self.get(key)
        if not isinstance(value, Mapping):
            raise self.wrong(key, "a JSON object")
        return dict(value)

    def items(self, key: str) -> list[tuple[object, str]]:
        """The elements of a list field, each with its path (`pairs[2]`)."""
        value = self.get(key)
        if not isinstance(value, list):
            raise self.wrong(key, "a list of JSON objects")
        return [(item, f"{self.name(key)}[{i}]") for i, item in enumerate(value)]

    def extra(self, known: tuple[str, ...]) -> dict[str, Any]:
        """The fields not in `known`, kept as they are."""
        return {key: value for key, value in self.document.items() if key not in known}


@dataclass(frozen=True)
class PairParameters:
    """The published parameter values of a parametric pair (8, 9, 10): its name (with unit,
    e.g. `source_depth_km`), the training simulations' values and the test value (None if
    unknown)."""

    name: str
    train: tuple[float, ...]
    test: float | None

    @classmethod
    def from_json(cls, document: object, what: str, path: str = "") -> PairParameters:
        """The `parameters` object `document` at `path` in the manifest of `what`."""
        fields = JsonFields(document, what, path)
        train = fields.get("train")
        if not isinstance(train, list) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in train
        ):
            raise fields.wrong("train", "a list of numbers")
        test = None if fields.get("test") is None else fields.number("test")
        return cls(fields.text("name"), tuple(train), test)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "train": list(self.train), "test": self.test}


PAIR_FIELDS = ("id", "train", "test", "metrics", "start_index", "shape", "burn_in", "task",
               "parameters")  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class CtfPair(cv.PairSpec):
    """One pair as a bundle's manifest holds it: the `PairSpec` and where its test array lies
    (`start_index`, the first time step in the realisation; `shape`, (time steps, sensors)),
    the extended pairs' `task`, and the parametric pairs' `parameters`."""

    start_index: int
    shape: Shape
    task: str | None = None
    parameters: PairParameters | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, document: object, what: str, path: str = "") -> CtfPair:
        """The pair `document` at `path` (`pairs[2]`) in the manifest of `what`."""
        fields = JsonFields(document, what, path)
        metrics = fields.texts("metrics")
        if not set(metrics) <= set(cv.METRIC_NAMES):
            raise fields.wrong("metrics", f"a list of {', '.join(cv.METRIC_NAMES)}")
        return cls(
            id=fields.integer("id"),
            train=fields.texts("train"),
            test=fields.text("test"),
            metrics=metrics,
            burn_in=fields.text("burn_in") if "burn_in" in fields else None,
            start_index=fields.integer("start_index"),
            shape=fields.shape("shape"),
            task=fields.text("task") if "task" in fields else None,
            parameters=(
                PairParameters.from_json(fields.get("parameters"), what, fields.name("parameters"))
                if "parameters" in fields
                else None
            ),
            extra=fields.extra(PAIR_FIELDS),
        )

    def to_json(self) -> dict[str, Any]:
        """The pair's JSON, keys in the order bundles are written with."""
        document: dict[str, Any] = {
            "id": self.id,
            "train": list(self.train),
            "test": self.test,
            "metrics": list(self.metrics),
            "start_index": self.start_index,
            "shape": list(self.shape),
        }
        if self.burn_in is not None:
            document["burn_in"] = self.burn_in
        if self.task is not None:
            document["task"] = self.task
        if self.parameters is not None:
            document["parameters"] = self.parameters.to_json()
        return document | dict(self.extra)

    @property
    def inputs(self) -> tuple[str, ...]:
        """The public arrays a prediction of this pair may read: training arrays, then burn-in."""
        return self.train + ((self.burn_in,) if self.burn_in else ())


TARGET_FIELDS = ("id", "target", "source", "start_index", "shape", "metrics")


@dataclass(frozen=True)
class ValidationTarget:
    """A pair's public validation target `X{id}val`: the rows of its public `source` array from
    `start_index` to the end, `shape` (time steps, sensors), scored with the pair's `metrics`."""

    id: int
    target: str
    source: str
    start_index: int
    shape: Shape
    metrics: tuple[str, ...]
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, document: object, what: str, path: str = "") -> ValidationTarget:
        """The validation entry `document` at `path` in the manifest of `what`."""
        fields = JsonFields(document, what, path)
        return cls(
            id=fields.integer("id"),
            target=fields.text("target"),
            source=fields.text("source"),
            start_index=fields.integer("start_index"),
            shape=fields.shape("shape"),
            metrics=fields.texts("metrics"),
            extra=fields.extra(TARGET_FIELDS),
        )

    def to_json(self) -> dict[str, Any]:
        """The target's JSON, keys in the order bundles are written with."""
        return {
            "id": self.id,
            "target": self.target,
            "source": self.source,
            "start_index": self.start_index,
            "shape": list(self.shape),
            "metrics": list(self.metrics),
        } | dict(self.extra)

    def as_pair(self) -> CtfPair:
        """The target as a pair whose test array it is (no training arrays: it is public)."""
        return CtfPair(
            id=self.id,
            train=(),
            test=self.target,
            metrics=self.metrics,
            start_index=self.start_index,
            shape=self.shape,
        )


@dataclass(frozen=True)
class TruthBlocks:
    """`truth_sha256_blocks`: rows per committed block and, per truth array, the hex root of its
    block commitment."""

    block_rows: int
    roots: Mapping[str, str]

    @classmethod
    def from_json(cls, document: object, what: str, path: str = "") -> TruthBlocks:
        """The `truth_sha256_blocks` object `document` in the manifest of `what`."""
        fields = JsonFields(document, what, path)
        roots = fields.extra(("block_rows",))
        for name, root in roots.items():
            if not isinstance(root, str):
                raise fields.wrong(name, "a hex string")
        return cls(fields.integer("block_rows"), roots)

    def to_json(self) -> dict[str, Any]:
        return {"block_rows": self.block_rows, **self.roots}


MANIFEST_FIELDS = (
    "dataset", "layout", "delta_t", "k_short", "k_long", "modes", "noise", "normalisation",
    "sensor_order", cv.ATTR_SENSOR_GRID, "pairs", "validation", cv.PROVENANCE_TRUTH,
    cv.PROVENANCE_TRUTH_REASON, "truth_note", "truth_sha256", "truth_sha256_blocks",
)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class CtfManifest:
    """A CTF bundle's manifest: its pairs, the scored windows (`k_short` first and `k_long` last
    rows of a test array; `modes` wavenumber bins), the truth's commitments, and what describes
    the bundle (`delta_t` in s, the layout, noise and normalisation, the sensors' order and
    grid). Fields a bundle may lack (older bundles, a validation manifest) are None."""

    dataset: str
    k_short: int
    k_long: int
    modes: int
    pairs: tuple[CtfPair, ...]
    layout: str | None = None
    delta_t: float | None = None
    noise: Mapping[str, Any] | None = None
    normalisation: Mapping[str, Any] | None = None
    sensor_order: str | None = None
    sensor_grid: Mapping[str, Any] | None = None
    validation: tuple[ValidationTarget, ...] | None = None
    truth: str | None = None  # `keys.TRUTH_PUBLIC` when anyone can regenerate the truth
    truth_reason: str | None = None
    truth_note: str | None = None
    truth_sha256: Mapping[str, str] | None = None  # per test array, hex SHA-256 commitment
    truth_sha256_blocks: TruthBlocks | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, document: object, what: str) -> CtfManifest:
        """The manifest `document` (the `ctf` attr) of the file or group `what`; InvalidInput
        naming `what` and the field when a field readers use is missing or of the wrong type."""
        fields = JsonFields(document, what)

        optional = fields.optional
        truth_sha256 = optional("truth_sha256", fields.mapping)
        if truth_sha256 is not None and not all(isinstance(v, str) for v in truth_sha256.values()):
            raise fields.wrong("truth_sha256", "an object of hex strings")
        blocks = optional("truth_sha256_blocks", fields.get)
        return cls(
            dataset=fields.text("dataset"),
            k_short=fields.integer("k_short"),
            k_long=fields.integer("k_long"),
            modes=fields.integer("modes"),
            pairs=tuple(CtfPair.from_json(pair, what, at) for pair, at in fields.items("pairs")),
            layout=optional("layout", fields.text),
            delta_t=optional("delta_t", fields.number),
            noise=optional("noise", fields.mapping),
            normalisation=optional("normalisation", fields.mapping),
            sensor_order=optional("sensor_order", fields.text),
            sensor_grid=optional(cv.ATTR_SENSOR_GRID, fields.mapping),
            validation=(
                tuple(
                    ValidationTarget.from_json(entry, what, at)
                    for entry, at in fields.items("validation")
                )
                if "validation" in fields
                else None
            ),
            truth=optional(cv.PROVENANCE_TRUTH, fields.text),
            truth_reason=optional(cv.PROVENANCE_TRUTH_REASON, fields.text),
            truth_note=optional("truth_note", fields.text),
            truth_sha256=truth_sha256,
            truth_sha256_blocks=(
                None
                if blocks is None
                else TruthBlocks.from_json(blocks, what, "truth_sha256_blocks")
            ),
            extra=fields.extra(MANIFEST_FIELDS),
        )

    @classmethod
    def from_attrs(cls, attrs: Mapping[str, Any], what: str) -> CtfManifest:
        """The manifest of a bundle group (truth or public) with `attrs`, named `what`."""
        if cv.ATTR_CTF not in attrs:
            raise InvalidInput(what, f"bundle group has no {cv.ATTR_CTF!r} manifest attr")
        return cls.from_json(attrs[cv.ATTR_CTF], what)

    def to_json(self) -> dict[str, Any]:
        """The manifest's JSON as it was read, keys in the order bundles are written with."""
        described = {
            "layout": self.layout,
            "delta_t": self.delta_t,
            "k_short": self.k_short,
            "k_long": self.k_long,
            "modes": self.modes,
            "noise": self.noise,
            "normalisation": self.normalisation,
            "sensor_order": self.sensor_order,
            cv.ATTR_SENSOR_GRID: self.sensor_grid,
        }
        validation = None
        if self.validation is not None:
            validation = [target.to_json() for target in self.validation]
        stamp = {
            "validation": validation,
            cv.PROVENANCE_TRUTH: self.truth,
            cv.PROVENANCE_TRUTH_REASON: self.truth_reason,
            "truth_note": self.truth_note,
            "truth_sha256": self.truth_sha256,
            "truth_sha256_blocks": (
                None if self.truth_sha256_blocks is None else self.truth_sha256_blocks.to_json()
            ),
        }
        document: dict[str, Any] = {"dataset": self.dataset}
        document |= {
            key: _json_value(value) for key, value in described.items() if value is not None
        }
        document["pairs"] = [pair.to_json() for pair in self.pairs]
        document |= {key: _json_value(value) for key, value in stamp.items() if value is not None}
        return document | dict(self.extra)

    def test_shapes(self) -> dict[str, Shape]:
        """Test array name -> (time steps, sensors): what a submission holds."""
        return {pair.test: pair.shape for pair in self.pairs}

    def validation_targets(self, what: str) -> tuple[ValidationTarget, ...]:
        """The public validation targets; InvalidInput naming `what` for a bundle built before
        they existed."""
        if not self.validation:
            raise InvalidInput(what, "bundle has no validation targets (built before they existed)")
        return self.validation

    def validation_manifest(self, what: str) -> CtfManifest:
        """The manifest of the public validation targets, shaped like a truth manifest: one pair
        per target, k_short and k_long at most the shortest target's rows."""
        targets = self.validation_targets(what)
        rows = min(target.shape[0] for target in targets)
        return replace(
            self,
            k_short=min(self.k_short, rows),
            k_long=min(self.k_long, rows),
            pairs=tuple(target.as_pair() for target in targets),
        )


def _json_value(value: Any) -> Any:
    """A field's JSON: mappings as plain dicts."""
    return dict(value) if isinstance(value, Mapping) else value


PART_FIELDS = ("scores", "avg_score", "extended_avg_score", "raw_scores", "unscorable")


@dataclass(frozen=True, kw_only=True)
class ScoredView:
    """The scores of one view of a truth (its public or private part): E scores clipped to
    [-100, 100] (None: unscorable), their mean, the mean of E13+ where they exist, the unclipped
    scores and the names of the unscorable ones."""

    scores: Mapping[str, float | None]
    avg_score: float | None
    extended_avg_score: float | None = None
    raw_scores: Mapping[str, float | None] | None = None
    unscorable: tuple[str, ...] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, document: object, what: str, path: str = "") -> ScoredView:
        """The part `document` at `path` (`parts.public`) of the result in `what`."""
        fields = JsonFields(document, what, path, "result")
        return cls(
            scores=fields.scores("scores"),
            avg_score=fields.score("avg_score"),
            extended_avg_score=fields.optional("extended_avg_score", fields.score),
            raw_scores=fields.optional("raw_scores", fields.scores),
            unscorable=fields.optional("unscorable", fields.texts),
            extra=fields.extra(PART_FIELDS),
        )

    def to_json(self) -> dict[str, Any]:
        """The part's JSON, keys in the order results are written with."""
        return self.view_json() | dict(self.extra)

    def view_json(self) -> dict[str, Any]:
        """The fields of the view (without `extra`): `extended_avg_score` where E13+ exist."""
        document: dict[str, Any] = {"scores": dict(self.scores), "avg_score": self.avg_score}
        extended = any(name not in cv.SCORE_NAMES for name in self.scores)
        if extended or self.extended_avg_score is not None:
            document["extended_avg_score"] = self.extended_avg_score
        if self.raw_scores is not None:
            document["raw_scores"] = dict(self.raw_scores)
        if self.unscorable is not None:
            document["unscorable"] = list(self.unscorable)
        return document


RESULT_FIELDS = (
    "name", "dataset", "convention", "scores", "avg_score", "extended_avg_score", "raw_scores",
    "truth_sha256_verified", "unscorable", "metrics", cv.PROVENANCE_TRUTH, "truth_note",
    "parts", "split", "plugin_scores", "validation",
)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class CtfResult(ScoredView):
    """The result of scoring one submission (`seisctf score ctf`), as the organiser's JSON holds
    it: the whole truth's scores (the `ScoredView` fields) and what was scored (`name`, the
    bundle's `dataset`, the `convention`), whether the truth matched its commitment (None for a
    validation score), each score's metric, the public and private `parts` with the rule that
    `split` them, metric plugins' scores, and the public-truth stamp. Fields older results
    lack are None."""

    name: str
    dataset: str
    convention: str | None = None
    truth_sha256_verified: bool | None  # None: a validation score (the truth is not read)
    metrics: Mapping[str, str] | None = None  # score name -> metric (`short_time`, ...)
    parts: Mapping[str, ScoredView] | None = None  # "public", "private"
    split: str | None = None
    plugin_scores: Mapping[str, Mapping[str, float | None]] | None = None
    validation: bool | None = None
    truth: str | None = None
    truth_note: str | None = None

    @classmethod
    def from_json(cls, document: object, what: str, path: str = "") -> CtfResult:
        """The result `document` (one object of a results JSON) read from `what`."""
        fields = JsonFields(document, what, path, "result")
        view = ScoredView.from_json(document, what, path)
        verified = fields.get("truth_sha256_verified")
        if verified is not None and not isinstance(verified, bool):
            raise fields.wrong("truth_sha256_verified", "true, false or null")
        validation = fields.optional("validation", fields.get)
        if validation is not None and not isinstance(validation, bool):
            raise fields.wrong("validation", "true or false")
        metrics = fields.optional("metrics", fields.mapping)
        if metrics is not None and not all(m in cv.METRIC_NAMES for m in metrics.values()):
            raise fields.wrong("metrics", f"an object of {', '.join(cv.METRIC_NAMES)}")
        parts = fields.optional("parts", fields.mapping)
        if parts is not None:
            at = fields.name("parts")
            parts = {
                key: ScoredView.from_json(part, what, f"{at}.{key}") for key, part in parts.items()
            }
        plugins = fields.optional("plugin_scores", fields.mapping)
        if plugins is not None:
            named = JsonFields(plugins, what, fields.name("plugin_scores"), "result")
            plugins = {metric: named.scores(metric) for metric in plugins}
        return cls(
            scores=view.scores,
            avg_score=view.avg_score,
            extended_avg_score=view.extended_avg_score,
            raw_scores=view.raw_scores,
            unscorable=view.unscorable,
            name=fields.text("name"),
            dataset=fields.text("dataset"),
            convention=fields.optional("convention", fields.text),
            truth_sha256_verified=verified,
            metrics=metrics,
            parts=parts,
            split=fields.optional("split", fields.text),
            plugin_scores=plugins,
            validation=validation,
            truth=fields.optional(cv.PROVENANCE_TRUTH, fields.text),
            truth_note=fields.optional("truth_note", fields.text),
            extra=fields.extra(RESULT_FIELDS),
        )

    def to_json(self) -> dict[str, Any]:
        """The result's JSON as it was read, keys in the order the referee writes them."""
        view = self.view_json()
        document: dict[str, Any] = {"name": self.name, "dataset": self.dataset}
        if self.convention is not None:
            document["convention"] = self.convention
        document |= {key: view.pop(key) for key in ("scores", "avg_score", "extended_avg_score",
                                                    "raw_scores") if key in view}  # fmt: skip
        document["truth_sha256_verified"] = self.truth_sha256_verified
        parts = None
        if self.parts is not None:
            parts = {key: part.to_json() for key, part in self.parts.items()}
        plugins = None
        if self.plugin_scores is not None:
            plugins = {metric: dict(values) for metric, values in self.plugin_scores.items()}
        optional = {
            **view,  # unscorable
            "metrics": None if self.metrics is None else dict(self.metrics),
            cv.PROVENANCE_TRUTH: self.truth,
            "truth_note": self.truth_note,
            "parts": parts,
            "split": self.split,
            "plugin_scores": plugins,
            "validation": self.validation,
        }
        document |= {key: value for key, value in optional.items() if value is not None}
        return document | dict(self.extra)

    def public_part(self) -> ScoredView | None:
        """The scores of the truth's public part; None for a result of a truth not split."""
        return None if self.parts is None else self.parts.get("public")
