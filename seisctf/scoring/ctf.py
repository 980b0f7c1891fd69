"""CTF scores E1..E12 on Dask: one fused pass over truth and submissions, exact in float64.

Everything a score needs is computed in one graph (`cluster.compute`): each stored chunk is read
once and feeds the truth's block commitment, the Gram matrices of the `reference` 2-norms (their
largest eigenvalue is taken on a worker), the sums of squares of the `paper` Frobenius norms, and
the spectra of the long-time windows. Formulas per convention: `seisctf.scoring.metrics`. The
2-norm uses the Gram matrix of the smaller side (`seisctf.scoring.gram`) when that side has at
most `GRAM_MAX_SIDE` entries, else a Lanczos iteration (scipy `svds` over a LinearOperator whose
products are Dask reductions). Submissions with values so large that squares overflow float64
are rescored, scaled by a power of two, in a second pass.

A truth with a commitment salt is also scored on its public and its private part, in the same
pass (`seisctf.scoring.parts`: each part's scores are those of its sensors, the others zero):
results then carry `parts` {"public", "private"}, each with its own scores and averages, and
`split` (the rule that made the parts). Every result names the metric of each score (`metrics`).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping, Sequence
from typing import Any

import dask.array as da
import numpy as np

from seisctf import commitment, keys, storage
from seisctf import conventions as cv
from seisctf.blocks import Stored, named, tiles, tree_sum
from seisctf.cluster import compute
from seisctf.ctf_json import CtfManifest, CtfPair
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.scoring import metrics, parts
from seisctf.scoring.ctf_conventions import Convention, convention_named
from seisctf.scoring.gram import spectral_norm, spectral_norms
from seisctf.scoring.plugin_metrics import metric_plugins, plugin_scores
from seisctf.scoring.regions import Difference
from seisctf.scoring.submission import SubmissionLimits, open_submission
from seisctf.scoring.values import raise_if_nonfinite, value_report

GRAM_MAX_SIDE = 4096
OVERFLOW_GUARD = 1e100  # |values| above this are rescaled before anything is squared


class Lanczos:
    """A 2-norm left for after the fused pass: both sides of the window are too large for a Gram.

    A plain class, not a dataclass: `dask.compute` traverses dataclasses and would compute (and
    bring to the client) the whole window inside."""

    __slots__ = ("window",)

    def __init__(self, window: da.Array) -> None:
        self.window = window


def lanczos_norm(window: da.Array, quiet: bool = True) -> float:
    """Largest singular value by ARPACK's Lanczos iteration; each product is a Dask reduction."""
    from scipy.sparse.linalg import LinearOperator, svds

    def matvec(vector: np.ndarray) -> np.ndarray:
        return compute(window @ np.asarray(vector).ravel(), quiet=quiet)[0]

    def rmatvec(vector: np.ndarray) -> np.ndarray:
        return compute(window.T @ np.asarray(vector).ravel(), quiet=quiet)[0]

    operator = LinearOperator(window.shape, matvec=matvec, rmatvec=rmatvec, dtype=np.float64)
    # A fixed pseudo-random start: deterministic scores, and A·start = 0 only when A = 0.
    start = np.random.default_rng(0).standard_normal(min(window.shape))
    probe = matvec(start) if window.shape[1] == start.size else rmatvec(start)
    if not np.any(probe):
        return 0.0
    values = svds(operator, k=1, tol=1e-13, v0=start, return_singular_vectors=False, maxiter=500)
    return float(values[0])


def statistic(
    convention: Convention,
    metric: str,
    window: Difference,
    modes: int,
    gram_max_side: int = GRAM_MAX_SIDE,
    keep: np.ndarray | None = None,
) -> Any:
    """The lazy reduction (a Delayed) a metric needs from one window (truth, or truth −
    submission, or the submission for spectra), per convention; with `keep` ((n,) bool), of the
    window with the other columns set to zero (a part of the truth's sensors).

    Every reduction runs on regions whose shape depends on the window's shape only (whole rows
    for spectra, panels for Grams, `time_space_chunks` tiles for sums of squares), summed in a
    fixed order, so a score never depends on how truth or submission happen to be chunked, and
    identical windows (a zero submission's error is the truth itself) give bitwise identical
    statistics."""
    rows, cols = window.shape
    if metric == cv.METRIC_LONG:  # k_long whole rows: small, one region
        kernel = convention.spectrum
        if keep is None:
            return window.reduce(kernel, (0, rows), (0, cols), modes)
        # Zero-filled rather than narrowed: the spectrum keeps its n bins, `modes` of them scored.
        return window.reduce(parts.zero_filled, (0, rows), (0, cols), kernel, keep, modes)
    if keep is not None:  # a norm: the zero columns add nothing, so only the kept ones are read
        window = window.of_columns(np.flatnonzero(keep))
        rows, cols = window.shape
    if convention.frobenius:
        tile = cv.time_space_chunks(rows, cols, itemsize=8)
        return tree_sum(
            [window.reduce(_sum_of_squares, r, c) for r, c in tiles(window.shape, tile)]
        )
    if min(window.shape) > gram_max_side:
        values = window.as_float64().rechunk(cv.time_space_chunks(rows, cols, itemsize=8))
        return Lanczos(values)
    return spectral_norm(window)


def _sum_of_squares(values: np.ndarray) -> float:
    """Σ values², squaring in place: `values` is the region array its task just assembled (inf
    where it overflows: a submission that large is scored again, scaled)."""
    with np.errstate(over="ignore"):
        return float(np.sum(np.multiply(values, values, out=values)))


def metric_error(
    convention: Convention, metric: str, truth_value: Any, error_value: Any, scale: float
) -> float | None:
    """Relative error from computed statistics; `error_value` was computed on data × `scale`."""
    if metric == cv.METRIC_LONG:
        with np.errstate(over="ignore", invalid="ignore"):
            submission = error_value
            if convention.linear_spectrum:
                # The spectrum of data × 2^-e back to the data's: × 2^(2e) exactly (inf where it
                # overflows, 0 where it is 0; dividing by scale², which underflows to 0, gave NaN).
                submission = np.ldexp(error_value, 2 * round(-math.log2(scale)))
            return metrics.relative_error(
                float(np.linalg.norm(truth_value - submission)), float(np.linalg.norm(truth_value))
            )
    return metrics.relative_error(
        convention.norm(error_value) / scale, convention.norm(truth_value)
    )


def validate_manifest(
    manifest: CtfManifest, shapes: Mapping[str, tuple[int, ...]], what: str
) -> None:
    """Refuse a manifest whose windows the arrays cannot fill (k or modes too large)."""
    for pair in manifest.pairs:
        name, shape = pair.test, tuple(shapes[pair.test])
        if pair.shape != shape or len(shape) != 2:
            raise InvalidInput(
                f"{what}:{name}", f"shape {shape} differs from manifest {list(pair.shape)}"
            )
        rows, n_space = shape
        for metric, key, k in (
            (cv.METRIC_SHORT, "k_short", manifest.k_short),
            (cv.METRIC_LONG, "k_long", manifest.k_long),
        ):
            if metric in pair.metrics and not 0 < k <= rows:
                raise InvalidInput(what, f"{key}={k} but {name} has {rows} rows")
        if cv.METRIC_LONG in pair.metrics and not 0 < manifest.modes <= n_space - n_space // 2:
            raise InvalidInput(
                what,
                f"modes={manifest.modes} but {name} has {n_space} "
                f"sensors ({n_space - n_space // 2} bins from zero frequency)",
            )


OpenedTruth = tuple[CtfManifest, str | None, dict[str, da.Array]]


def open_truth(truth_store: StoreLocation) -> OpenedTruth:
    """(manifest, salt, {test name: Dask array as stored}) of a complete truth group."""
    attrs = storage.read_attrs(truth_store)
    manifest = CtfManifest.from_attrs(attrs, truth_store.url)
    truth = {pair.test: storage.read_array(truth_store, pair.test) for pair in manifest.pairs}
    shapes = {name: array.shape for name, array in truth.items()}
    validate_manifest(manifest, shapes, truth_store.url)
    return manifest, attrs.get(cv.ATTR_CTF_SALT), truth


Keeps = Mapping[str, np.ndarray | None]  # per test name, the columns of a part (None: all)


def _window(
    convention, pair: CtfPair, metric, truth, submission, manifest: CtfManifest, scales
) -> Difference:
    """The window a task's statistic reduces: truth − submission, the submission (spectra), or
    with `submission` None the truth itself; `truth`, `submission`: {test name: Stored}."""
    name = pair.test
    scale = scales.get(name, 1.0)
    if submission is None:
        window = Difference(truth[name])
    elif metric == cv.METRIC_LONG:
        window = Difference(submission[name], scale=scale if convention.linear_spectrum else 1)
    else:
        window = Difference(truth[name], submission[name], scale)
    return window.window(cv.window_rows(metric, manifest))


def view_statistics(
    convention, tasks, truth, submission, manifest, scales, gram_max_side, views
) -> dict[str, list]:
    """{view: [the lazy statistic of each task on the view's columns]} for one submission's
    windows (`submission` None: the truth's own); `views`: {view: Keeps} (`part_keeps`). A
    reference 2-norm's Gram is shared between the views (`gram.spectral_norms`): scoring the
    parts costs little more than the whole."""
    statistics: dict[str, list] = {view: [] for view in views}
    for _, pair, metric in tasks:
        name = pair.test
        window = _window(convention, pair, metric, truth, submission, manifest, scales)
        shared = None
        if (
            not convention.frobenius
            and metric != cv.METRIC_LONG
            and len(views) > 1
            and min(window.shape) <= gram_max_side
        ):
            columns = {
                view: None if keeps[name] is None else tuple(np.flatnonzero(keeps[name]).tolist())
                for view, keeps in views.items()
            }
            shared = spectral_norms(window, columns)
        for view, keeps in views.items():
            statistics[view].append(
                statistic(convention, metric, window, manifest.modes, gram_max_side, keeps[name])
                if shared is None
                else named(operator.getitem, "spectral_norm", shared, view)
            )
    return statistics


def part_keeps(
    manifest: CtfManifest, shapes: Mapping[str, tuple[int, ...]], salt: str | None
) -> dict[str, Keeps]:
    """The columns each view scores, per test name: "whole" (all), and with a salt "public" and
    "private" (`parts.part_mask`)."""
    names = [pair.test for pair in manifest.pairs]
    views: dict[str, Keeps] = {"whole": dict.fromkeys(names)}
    if salt:
        for part in parts.PARTS:
            views[part] = {name: parts.part_mask(salt, shapes[name][1], part) for name in names}
    return views


def _scored(
    convention: Convention, tasks: list, truth_values: list, stats: list, scales: dict
) -> dict[str, Any]:
    """{"scores", averages, "raw_scores", "unscorable"} from one view's computed statistics."""
    raw_scores, scores = {}, {}
    for (score_name, pair, metric), truth_value, error_value in zip(
        tasks, truth_values, stats, strict=True
    ):
        error = metric_error(
            convention, metric, truth_value, error_value, scales.get(pair.test, 1.0)
        )
        raw_scores[score_name], scores[score_name] = metrics.score_from_error(error)
    return {
        "scores": scores,
        **averages(scores),
        "raw_scores": raw_scores,
        "unscorable": [score for score, value in scores.items() if value is None],
    }


def _resolve_lanczos(values: Any, quiet: bool) -> Any:
    if isinstance(values, Lanczos):
        return lanczos_norm(values.window, quiet)
    if isinstance(values, list):
        return [_resolve_lanczos(value, quiet) for value in values]
    if isinstance(values, dict):
        return {key: _resolve_lanczos(value, quiet) for key, value in values.items()}
    return values


def _overflow_scales(maxabs: Mapping[str, float]) -> dict[str, float]:
    """Power-of-two scales bringing huge submission arrays to about 1 (empty when none is huge)."""
    return {
        name: 2.0 ** -math.ceil(math.log2(value))
        for name, value in maxabs.items()
        if value > OVERFLOW_GUARD
    }


def _verify_truth(
    manifest: CtfManifest,
    truth_stored: Mapping[str, da.Array],
    salt: str | None,
    digest_values: Mapping[str, Any],
    what: str,
) -> bool:
    """True when every truth array hashes to its published commitment (the block commitment's
    root from `digest_values`, else a stream over the array); InvalidInput naming the arrays
    otherwise: no score of an unverified truth leaves the referee."""
    blocks = manifest.truth_sha256_blocks
    published = manifest.truth_sha256 or {}
    if blocks:
        altered = [
            name
            for name in truth_stored
            if commitment.block_root(digest_values[name], salt) != blocks.roots.get(name)
        ]
    elif published:
        altered = [
            name
            for name, array in truth_stored.items()
            if published.get(name) != commitment.sha256_commitment(array, salt)
        ]
    else:
        raise InvalidInput(what, "publishes no truth commitment (truth_sha256); refusing to score")
    if altered:
        raise InvalidInput(
            f"{what}: {', '.join(altered)}",
            "does not hash to the published commitment (truth_sha256): the truth or its salt "
            "changed after publication; refusing to score",
        )
    return True


def score_arrays(
    manifest: CtfManifest,
    truth_stored: Mapping[str, da.Array],
    submissions: Mapping[str, Mapping[str, da.Array]],
    *,
    convention: str = "reference",
    salt: str | None = None,
    verify: bool = True,
    gram_max_side: int = GRAM_MAX_SIDE,
    quiet: bool = False,
    what: str = "truth",
    metrics: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Score opened submissions (float Dask arrays by test name) against truth arrays.

    With `verify`, the truth must hash to the manifest's commitment (checked in the same pass
    that reads it; InvalidInput naming `what` and the arrays otherwise).
    `gram_max_side`: 2-norms of windows whose smaller side is longer use Lanczos instead of a Gram
    matrix (whose memory grows as that side squared). `metrics`: metric plugins whose scores the
    results add (`plugin_metrics`)."""
    rules = convention_named(convention)
    tasks = cv.scored_metrics(manifest.pairs)
    plugins = metric_plugins(metrics)
    blocks = manifest.truth_sha256_blocks if verify else None
    digests = (
        {
            name: commitment.block_digests(array, salt, blocks.block_rows)
            for name, array in truth_stored.items()
        }
        if blocks
        else {}
    )
    truth = {name: Stored(array) for name, array in truth_stored.items()}
    stored = {
        name: {test: Stored(array) for test, array in arrays.items()}
        for name, arrays in submissions.items()
    }
    views = part_keeps(manifest, {name: a.shape for name, a in truth_stored.items()}, salt)

    def view_stats(submission, scales) -> dict[str, list]:
        return view_statistics(
            rules, tasks, truth, submission, manifest, scales, gram_max_side, views
        )

    truth_stats = view_stats(None, {})
    per_submission = {
        name: {
            "stats": view_stats(stored[name], {}),
            "values": {test: value_report(array) for test, array in arrays.items()},
        }
        for name, arrays in submissions.items()
    }
    computed, truth_values, digest_values = compute(
        per_submission, truth_stats, digests, label="scoring", quiet=quiet
    )
    truth_values = _resolve_lanczos(truth_values, quiet)
    verified = _verify_truth(manifest, truth_stored, salt, digest_values, what) if verify else None
    results = []
    for name, arrays in submissions.items():
        values = computed[name]
        raise_if_nonfinite(
            f"submission {name!r}",
            {test: report[:2] for test, report in values["values"].items()},
            {test: array.shape for test, array in arrays.items()},
        )
        scales = _overflow_scales({test: r[2] for test, r in values["values"].items()})
        stats = values["stats"]
        if scales:
            stats = compute(
                view_stats(stored[name], scales),
                label=f"rescoring {name} (huge values)",
                quiet=quiet,
            )[0]
        stats = _resolve_lanczos(stats, quiet)
        scored = {
            view: _scored(rules, tasks, truth_values[view], stats[view], scales) for view in views
        }
        whole = scored.pop("whole")
        result = {
            "name": name,
            "dataset": manifest.dataset,
            "convention": convention,
            "scores": whole["scores"],
            **{key: whole[key] for key in whole if key.endswith("avg_score")},
            "raw_scores": whole["raw_scores"],
            "truth_sha256_verified": verified,
            "unscorable": whole["unscorable"],
            "metrics": {score_name: metric for score_name, _, metric in tasks},
            **public_truth_keys(manifest),
        }
        if scored:
            result |= {"parts": scored, "split": parts.RULE}
        if plugins:
            result["plugin_scores"] = plugin_scores(plugins, manifest, truth_stored, arrays)
        results.append(result)
    return results


def public_truth_keys(manifest: CtfManifest) -> dict[str, str]:
    """The manifest's stamp of a truth anyone can regenerate (`truth`, `truth_note`), which every
    result, release and leaderboard page of its scores carries; nothing for a hidden truth."""
    if manifest.truth != keys.TRUTH_PUBLIC:
        return {}
    return {cv.PROVENANCE_TRUTH: keys.TRUTH_PUBLIC, "truth_note": cv.PUBLIC_TRUTH_NOTE}


def averages(scores: Mapping[str, float | None]) -> dict[str, float | None]:
    """`avg_score`: the mean of the scorable E1..E12 (the contract's AvgScore, comparable across
    bundles); with extended pairs also `extended_avg_score`, the mean of the scorable E13+."""

    def mean(names: list[str]) -> float | None:
        values = [value for name in names if (value := scores[name]) is not None]
        return float(np.mean(values)) if values else None

    core = [name for name in scores if name in cv.SCORE_NAMES]
    extended = [name for name in scores if name not in cv.SCORE_NAMES]
    result = {"avg_score": mean(core)}
    if extended:
        result["extended_avg_score"] = mean(extended)
    return result


def open_submissions(
    submissions: Mapping[str, Any], manifest: CtfManifest, limits: SubmissionLimits | None
) -> dict[str, dict[str, da.Array]]:
    """Every named submission through the one intake, validated against `manifest`."""
    return {
        name: open_submission(source, manifest, limits=limits)
        for name, source in submissions.items()
    }


def score_ctf(
    truth_store: StoreLocation,
    submissions: Mapping[str, Any],
    *,
    convention: str = "reference",
    limits: SubmissionLimits | None = None,
    quiet: bool = False,
    truth: OpenedTruth | None = None,
    metrics: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Score named submissions (the `StoreLocation`s of any accepted format, or mappings of
    arrays) against one truth group, in one pass that reads each truth chunk once for all of
    them.

    `truth`: the group at `truth_store` as `open_truth` returned it, when the caller opened it
    already (it is then not opened again)."""
    manifest, salt, truth_arrays = truth or open_truth(truth_store)
    opened = open_submissions(submissions, manifest, limits)
    return score_arrays(
        manifest,
        truth_arrays,
        opened,
        convention=convention,
        salt=salt,
        quiet=quiet,
        what=truth_store.url,
        metrics=metrics,
    )


def score_validation(
    public_store: StoreLocation,
    submissions: Mapping[str, Any],
    *,
    convention: str = "reference",
    limits: SubmissionLimits | None = None,
    quiet: bool = False,
    metrics: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Score submissions of X1val…X9val against the public bundle's validation targets, locally,
    with the referee's own code (for tuning; never touches the truth)."""
    public = CtfManifest.from_attrs(storage.read_attrs(public_store), public_store.url)
    manifest = public.validation_manifest(public_store.url)
    targets = {pair.test: storage.read_array(public_store, pair.test) for pair in manifest.pairs}
    validate_manifest(manifest, {name: a.shape for name, a in targets.items()}, public_store.url)
    opened = open_submissions(submissions, manifest, limits)
    results = score_arrays(
        manifest, targets, opened, convention=convention, verify=False, quiet=quiet, metrics=metrics
    )
    return [{**result, "validation": True} for result in results]
