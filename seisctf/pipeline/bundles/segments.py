"""CTF task bundles: public training arrays + withheld truth, from a wavefield store.

Secrecy (docs/contract.md, "Rules every part keeps"): noise keys and the commitment salt derive from
the organiser's secret; each pair group comes from its own realisation, so no public array holds
another pair's truth; per-sensor normalisation scales come from each group's public arrays only and
are applied unchanged to its truth arrays; the public manifest carries a salted SHA-256 commitment
of every truth array and nothing from which the truth could be regenerated (no seeds, no source
parameters beyond the published parameter values of the parametric pairs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dask.array as da
import numpy as np
import xarray as xr

from seisctf import commitment, keys, storage
from seisctf import conventions as cv
from seisctf.cluster import compute
from seisctf.ctf_json import CtfPair, PairParameters, ValidationTarget
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.pipeline.transforms.noise import gaussian_noise
from seisctf.plugins.layouts import (
    BURN_IN_ROLES,
    Layout,
    Window,
    array_windows,
    check_layout,
    normalisation_group,
)

# Roles whose realisations are taken in the order of their parameter values.
SORTED_BY_PARAMETER = ("param_train", "sweep_train")


@dataclass
class Bundle:
    public: dict[str, da.Array]
    truth: dict[str, da.Array]
    manifest: dict[str, Any]


def _realisation_index(wavefield: xr.Dataset, window: Window, what: str) -> int:
    roles = [str(role) for role in wavefield[cv.ROLE].values]
    matches = [i for i, role in enumerate(roles) if role == window.role]
    if window.role in SORTED_BY_PARAMETER and cv.PARAMETER_VALUE in wavefield.coords:
        values = wavefield[cv.PARAMETER_VALUE].values
        matches.sort(key=lambda i: values[i])
    if len(matches) <= window.role_index:
        raise InvalidInput(
            what,
            f"needs {window.role_index + 1} realisation(s) with role "
            f"{window.role!r}; the store has roles {roles}",
        )
    return matches[window.role_index]


def _clean_window(wavefield: xr.Dataset, window: Window, what: str) -> da.Array:
    field = wavefield[cv.WAVEFIELD_VAR]
    if cv.REALISATION in field.dims:
        field = field.isel({cv.REALISATION: _realisation_index(wavefield, window, what)})
    block = field.isel({cv.TIME: slice(window.start, window.stop)}).transpose(cv.TIME, cv.SENSOR)
    return block.data.astype(np.float64)


def _add_noise(clean: da.Array, level: float, key: int) -> da.Array:
    """clean + level * RMS(trace) * N(0, 1), the noise keyed by global (time, sensor) position."""
    rms = da.sqrt((clean**2).mean(axis=0, keepdims=True))
    noise = gaussian_noise(key, clean.shape, cv.time_space_chunks(*clean.shape))
    return clean + level * rms * noise.rechunk(clean.chunks)


def _normalisers(
    public_raw: dict[str, da.Array], windows: dict[str, Window], floor_fraction: float
) -> dict[str, da.Array]:
    """Per group: per-sensor scale = RMS over time of the group's public arrays, floored at
    `floor_fraction` × the median sensor RMS (and 1 where everything is 0).

    Scale only, no centring: ground motion has zero mean, and centring with the training mean
    would make the `mean` baseline identical to `zeros`. The floor keeps traces that are quiet
    during the public window (a wavefront has not reached them yet) from being amplified without
    bound in the withheld window.
    """
    members: dict[str, list[da.Array]] = {}
    for name, array in public_raw.items():
        role = windows[name].role
        if role in BURN_IN_ROLES:
            continue  # burn-in windows are normalised with their group's training constants
        members.setdefault(normalisation_group(role), []).append(array)
    scales = {}
    for group, arrays in members.items():
        rms = da.sqrt((da.concatenate(arrays, axis=0) ** 2).mean(axis=0, keepdims=True))
        floor = floor_fraction * da.median(rms.rechunk({1: -1}), axis=1, keepdims=True)
        scale = da.maximum(rms, floor)
        scales[group] = da.where(scale > 0, scale, 1.0)
    return scales


def build_bundle(
    wavefield: xr.Dataset, layout: Layout, secret: str, what: str = "wavefield"
) -> Bundle:
    """Lazy public and truth arrays (float32, (time, space)) and the manifest (without hashes)."""
    cv.validate_wavefield(wavefield, what)
    n_time, n_space = wavefield.sizes[cv.TIME], wavefield.sizes[cv.SENSOR]
    check_layout(layout, n_time, n_space, what)
    n_sweep, n_initial = extended_counts(wavefield, what)
    windows = array_windows(layout, n_sweep, n_initial)
    noise_levels = {"noise_medium": layout.noise_medium, "noise_high": layout.noise_high}

    public_raw: dict[str, da.Array] = {}
    truth_raw: dict[str, da.Array] = {}
    for name, window in windows.items():
        clean = _clean_window(wavefield, window, what)
        if cv.is_train_name(name):
            if window.noise:
                key = keys.derive_seed(secret, keys.noise_purpose(name))
                clean = _add_noise(clean, noise_levels[window.noise], key)
            public_raw[name] = clean
        else:
            truth_raw[name] = clean

    scales = _normalisers(public_raw, windows, layout.normalisation_floor)

    def normalise(name: str, array: da.Array) -> da.Array:
        return (array / scales[normalisation_group(windows[name].role)]).astype(np.float32)

    public = {name: normalise(name, array) for name, array in public_raw.items()}
    truth = {name: normalise(name, array) for name, array in truth_raw.items()}
    pairs = _pairs(wavefield, windows, cv.extended_pairs(n_sweep, n_initial))
    validation = validation_targets(pairs, layout)
    public.update(
        {target.target: public[target.source][target.start_index :] for target in validation}
    )
    manifest = _manifest(wavefield, layout, pairs)
    manifest["validation"] = [target.to_json() for target in validation]
    return Bundle(public=public, truth=truth, manifest=manifest)


def validation_targets(pairs: Sequence[CtfPair], layout: Layout) -> list[ValidationTarget]:
    """Per pair, a target cut from the end of its own most recent input (the burn-in where there
    is one, else its last training matrix): participants fit on the rows before `start_index` and
    predict the held-out end, then score themselves with `seisctf score ctf --validation`."""
    training = {pair.id: len(pair.train) for pair in pairs}
    windows = array_windows(layout, training.get(10, 0), training.get(11, 0))
    entries = []
    for pair in pairs:
        source = pair.inputs[-1]
        rows = windows[source].steps
        held_out = max(layout.k_short, layout.k_long, round(layout.validation_fraction * rows))
        entries.append(
            ValidationTarget(
                id=pair.id,
                target=f"X{pair.id}val",
                source=source,
                start_index=rows - held_out,
                shape=(held_out, pair.shape[1]),
                metrics=pair.metrics,
            )
        )
    return entries


def extended_counts(wavefield: xr.Dataset, what: str) -> tuple[int, int]:
    """(sweep training simulations, initial-condition training simulations) of the extended
    pairs: (0, 0) for a store without their roles; InvalidInput for an incomplete set."""
    roles = [str(role) for role in wavefield[cv.ROLE].values] if cv.ROLE in wavefield else []
    counts = {role: roles.count(role) for role in cv.EXTENDED_ROLES}
    if not any(counts.values()):
        return 0, 0
    complete = (
        counts["sweep_train"] >= 2
        and counts["sweep_test"] == 1
        and counts["initial_train"] >= 1
        and counts["initial_test"] == 1
    )
    if not complete:
        raise InvalidInput(
            what,
            "extended pairs need ≥ 2 'sweep_train', one 'sweep_test', ≥ 1 'initial_train' and "
            f"one 'initial_test' realisations; the store has {counts}",
        )
    return counts["sweep_train"], counts["initial_train"]


def _parameters(wavefield: xr.Dataset) -> dict[str, Any] | None:
    name = wavefield.attrs.get(cv.ATTR_PARAMETER_NAME)
    if not name or cv.PARAMETER_VALUE not in wavefield.coords:
        return None
    roles = [str(role) for role in wavefield[cv.ROLE].values]
    values = [float(v) for v in wavefield[cv.PARAMETER_VALUE].values]
    by_role: dict[str, list[float]] = {}
    for role, value in zip(roles, values, strict=True):
        by_role.setdefault(role, []).append(value)
    return {
        "name": name,
        "train": sorted(by_role.get("param_train", [])),
        "interpolation": by_role.get("param_interp", [None])[0],
        "extrapolation": by_role.get("param_extrap", [None])[0],
        "sweep_train": sorted(by_role.get("sweep_train", [])),
        "sweep_test": by_role.get("sweep_test", [None])[0],
    }


def _pairs(
    wavefield: xr.Dataset, windows: dict[str, Window], extended: tuple[cv.PairSpec, ...] = ()
) -> list[CtfPair]:
    """The manifest's pairs: each spec with its test array's window and (time, sensors) shape."""
    n_space = wavefield.sizes[cv.SENSOR]
    parameters = _parameters(wavefield)
    pairs = []
    for spec in cv.CTF_PAIRS + extended:
        window = windows[spec.test]
        published = None
        if parameters and spec.id in (8, 9, 10):
            train, test = {
                8: ("train", "interpolation"),
                9: ("train", "extrapolation"),
                10: ("sweep_train", "sweep_test"),
            }[spec.id]
            published = PairParameters(
                parameters["name"], tuple(parameters[train]), parameters[test]
            )
        pairs.append(
            CtfPair(
                id=spec.id,
                train=spec.train,
                test=spec.test,
                metrics=spec.metrics,
                burn_in=spec.burn_in,
                start_index=window.start,
                shape=(window.steps, n_space),
                task=cv.EXTENDED_TASKS.get(spec.id),
                parameters=published,
            )
        )
    return pairs


def _manifest(wavefield: xr.Dataset, layout: Layout, pairs: Sequence[CtfPair]) -> dict[str, Any]:
    sensor_grid = wavefield.attrs.get(cv.ATTR_SENSOR_GRID)
    grid = {cv.ATTR_SENSOR_GRID: dict(sensor_grid)} if sensor_grid else {}
    return {
        "dataset": str(wavefield.attrs.get(cv.ATTR_DATASET, "unknown")),
        "layout": layout.name,
        "delta_t": 1.0 / cv.sampling_rate_hz(wavefield.attrs, "wavefield"),
        "k_short": layout.k_short,
        "k_long": layout.k_long,
        "modes": layout.modes,
        "noise": {
            "medium_rms_fraction": layout.noise_medium,
            "high_rms_fraction": layout.noise_high,
        },
        "normalisation": {
            "kind": "per-sensor RMS of the group's public arrays",
            "floor_fraction_of_median": layout.normalisation_floor,
        },
        "sensor_order": str(wavefield.attrs.get(cv.ATTR_SENSOR_ORDER, "")),
        **grid,
        "pairs": [pair.to_json() for pair in pairs],
    }


def refuse_existing_bundle(
    public: StoreLocation, truth: StoreLocation, *, overwrite: bool = False
) -> None:
    """A bundle is never replaced by accident: unless `overwrite`, refuse when anything exists at
    `public` or `truth` (a bundle written again gets new noise and, without a given secret, a
    new one). Called before any work, so nothing there changes."""
    if overwrite:
        return
    for parameter, location in (("public", public), ("truth", truth)):
        fs, path = location.filesystem()
        if fs.exists(path):
            raise InvalidInput(
                f"{{{parameter}}} {location.url}",
                "already exists; nothing was written (a new bundle would have new noise and "
                "commitments); give {overwrite} to replace it",
                parameters=(parameter, "overwrite"),
            )


def write_bundle(
    bundle: Bundle,
    public: StoreLocation,
    truth: StoreLocation,
    secret: str,
    *,
    keep_secret: bool = False,
    quiet: bool = False,
    attrs: Mapping[str, Any] | None = None,
    truth_attrs: Mapping[str, Any] | None = None,
    manifest_stamp: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write truth first (and hash what was stored), then the public group. Returns the manifest.

    `attrs`: more attrs for both groups (e.g. a recipe's provenance; nothing secret);
    `truth_attrs`: more for the truth group only (organiser-side provenance); `manifest_stamp`:
    more manifest keys (`public_truth.truth_stamp`'s)."""
    if storage.join(public.url, "") == storage.join(truth.url, ""):
        raise InvalidInput(
            "{truth}",
            "must differ from {public}: truth is written only to its own URL",
            parameters=("truth", "public"),
        )
    salt = keys.derive_salt(secret)
    storage.write_arrays(bundle.truth, truth, {}, label="truth", quiet=quiet, finish=False)
    stored = {name: storage.read_array(truth, name) for name in bundle.truth}
    rows = commitment.block_rows(next(iter(bundle.truth.values())).shape[1])
    digests = compute(
        {name: commitment.block_digests(array, salt, rows) for name, array in stored.items()},
        label="commitments",
        quiet=quiet,
    )[0]
    manifest = {
        **bundle.manifest,
        **(manifest_stamp or {}),
        "truth_sha256": {
            name: commitment.sha256_commitment(array, salt) for name, array in stored.items()
        },
        "truth_sha256_blocks": {
            "block_rows": rows,
            **{name: commitment.block_root(digests[name], salt) for name in stored},
        },
    }
    storage.write_arrays(
        bundle.public,
        public,
        {**(attrs or {}), cv.ATTR_CTF: manifest},
        label="public bundle",
        quiet=quiet,
    )
    private = {
        **(attrs or {}),
        **(truth_attrs or {}),
        cv.ATTR_CTF: manifest,
        cv.ATTR_CTF_SALT: salt,
    }
    if keep_secret:
        private[cv.ATTR_CTF_SECRET] = secret
    storage.finish_group(truth, private)
    return manifest
