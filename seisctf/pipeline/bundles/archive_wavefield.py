"""A CTF wavefield cut from a continuous waveform store, so real archives feed the same referee.

`archive_wavefield(store, layout, channel=…, sampling_rate_hz=…)` returns a wavefield dataset that
`tasks.build_bundle` accepts: `u(realisation, time, sensor)` float64 with the bundle's ten roles.
Everything is lazy (Dask) except one small pass that finds where the data are gap-free.

The cut is `guarded_segments.py`'s, shared with DAS stores (`das_wavefield.py`): ten slots of
a guard band and a segment, each processed alone with causal filters, the offset removed from
public rows only, so that no withheld sample reaches a public array (the rules and steps 2–5
are there). Here:

1. One channel of `data(station, channel, time)`: an exact code (`BHZ`) or a component letter
   (`Z`: the one channel whose code ends with it).
2.–5. `guarded_segments`: slots, gaps (stations without finite data throughout are dropped),
   each slot brought to the CTF rate alone, the offset removal.
6. Sensors are the kept stations, ordered by longitude, then latitude, then id (stations without
   coordinates last, by id): `SENSOR_ORDER`. The long-time score's FFT runs along this order; for
   scattered stations it is a convention, not a physical line.

Segment roles, in time order (`SEGMENT_ROLES`): forecast, few_clean, param_extrap, param_train,
noise_medium, few_noisy, param_interp, param_train, param_train, noise_high. With the guard
bands and slot-by-slot processing no order leaks; this one keeps the parametric pairs' meaning:
the interpolation segment lies between the training segments in time, the extrapolation segment
before all of them.

Parameter of the parametric pairs (`parameter_name` = `segment_start_h`): the segment's start,
in hours from the store's `start_time`. Training segments 4, 8 and 9; interpolation segment 7;
extrapolation segment 3.

Provenance (`archive` attr): the source store, its fingerprint and rate, the channel, the CTF
rate, the transforms, the guard, the segment start times, the stations used and dropped, and
`start_offsets_s`: per station that starts after a slot's start by less than half a CTF sample
(its leading gap held, `guarded_segments`), the seconds from each segment's slot start to its
first sample (0 where it has data from the start; the store's `time_offsets_s` add the
ingest's sub-sample offset of that sample from its trace's start). The
truth group gets all of it; the public group only `PUBLIC_ARCHIVE_KEYS` (no station ids, no
absolute times): with them, anyone with access to the archive could fetch the withheld samples.

`wavefield_for_tasks` cuts any store the way its kind needs: a waveform store here, a DAS store
with `das_wavefield`, a wavefield store not at all.
"""

from __future__ import annotations

from typing import Any

import dask.array as da
import numpy as np
import xarray as xr

from seisctf import conventions as cv
from seisctf.errors import InvalidInput
from seisctf.pipeline.bundles.das_wavefield import das_attrs, das_wavefield
from seisctf.pipeline.bundles.gap_check import store_coverage
from seisctf.pipeline.bundles.guarded_segments import (
    GAP_POLICY,
    N_SEGMENTS,
    SEGMENT_ROLES,
    TIME_CHUNK_SAMPLES,
    guarded_segments,
    iso_time,
    segment_start_hours,
)
from seisctf.pipeline.transforms.history import recorded
from seisctf.plugins.layouts import Layout
from seisctf.signal.filter_design import DEFAULT_RATE_HZ

SENSOR_ORDER = (
    "stations (station ids) by longitude, then latitude (degrees, ascending), then id; "
    "stations without coordinates last, by id"
)
PUBLIC_ARCHIVE_KEYS = (
    "channel",
    "sampling_rate_hz",
    "source_sampling_rate_hz",
    "transforms",
    "time_chunk_samples",
    "segment_steps",
    "guard_steps",
    "n_stations",
    "n_stations_dropped",
    "gap_policy",
)


def select_channel(store: xr.Dataset, channel: str | None, what: str) -> tuple[str, xr.DataArray]:
    """(code, `data(station, time)`) of one channel: an exact code, a component letter that
    ends exactly one channel's code, or None when the store has only one channel."""
    codes = [str(code) for code in store[cv.CHANNEL].values]
    if channel is None:
        matches = codes if len(codes) == 1 else []
        problem = f"has channels {codes}; choose one with {{channel}}"
    elif channel in codes:
        matches = [channel]
    else:
        letter = len(channel) == 1
        matches = [code for code in codes if letter and code.endswith(channel)]
        problem = f"has no channel {channel!r} (channels: {codes})"
        if len(matches) > 1:
            problem = f"component {channel!r} matches channels {matches}; give the full code"
    if len(matches) != 1:
        raise InvalidInput(what, problem, parameters=["channel"])
    data = channel_of(store[cv.WAVEFORM_VAR], codes.index(matches[0]))
    data = data.assign_attrs({cv.ATTR_SAMPLING_RATE: cv.sampling_rate_hz(store.attrs, what)})
    return matches[0], recorded(data, data, "select_channel", {"channel": matches[0]})


def channel_of(variable: xr.DataArray, index: int) -> xr.DataArray:
    """`variable(station, channel, time)`'s channel `index` as (station, time). On Dask blocks
    holding every channel (the ingest's chunks) it is taken block by block, one lazy layer: a
    Dask selection builds a task per chunk of its result, which for a whole channel is every
    chunk of the store (742 MB at 10^6 chunks), before anything is read."""
    array = variable.data
    if not isinstance(array, da.Array) or len(array.chunks[1]) != 1:
        return variable.isel({cv.CHANNEL: index}, drop=True)
    channel = da.map_blocks(np.take, array, indices=index, axis=1, drop_axis=1, dtype=array.dtype)
    coords = {
        name: coord for name, coord in variable.coords.items() if cv.CHANNEL not in coord.dims
    }
    return xr.DataArray(
        channel, dims=(cv.STATION, cv.TIME), coords=coords, attrs=variable.attrs, name=variable.name
    )


def sensor_order(ids: list[str], latitude: np.ndarray, longitude: np.ndarray) -> list[int]:
    """Indices of stations in `SENSOR_ORDER`."""
    located = np.isfinite(latitude) & np.isfinite(longitude)

    def key(i: int) -> tuple:
        return (0, longitude[i], latitude[i], ids[i]) if located[i] else (1, 0.0, 0.0, ids[i])

    return sorted(range(len(ids)), key=key)


def _coordinate(store: xr.Dataset, name: str) -> np.ndarray:
    if name not in store.coords:
        return np.full(store.sizes[cv.STATION], np.nan)
    return np.asarray(store[name].values, dtype=np.float64)


def archive_wavefield(
    store: xr.Dataset,
    layout: Layout,
    *,
    channel: str | None = None,
    sampling_rate_hz: float = DEFAULT_RATE_HZ,
    time_chunk_samples: int = TIME_CHUNK_SAMPLES,
    what: str = "waveform store",
    quiet: bool = False,
) -> xr.Dataset:
    """The wavefield `build_bundle` takes, cut from a continuous waveform store (see the module
    docstring): `u(realisation, time, sensor)` float64, 10 realisations of
    `layout.required_steps` samples at `sampling_rate_hz` (Hz), one per role in `SEGMENT_ROLES`.

    Computes one small thing, the gap check (bool per station and slot); `u` stays lazy.
    """
    cv.validate_waveform_store(store, what)
    code, data = select_channel(store, channel, what)
    source_rate_hz = cv.sampling_rate_hz(store.attrs, what)
    ids = [str(station) for station in store[cv.STATION].values]
    latitude, longitude = _coordinate(store, cv.LATITUDE), _coordinate(store, cv.LONGITUDE)
    cut = guarded_segments(
        data,
        cv.STATION,
        layout,
        sampling_rate_hz=sampling_rate_hz,
        order=sensor_order(ids, latitude, longitude),
        time_chunk_samples=time_chunk_samples,
        source=f"channel {code}",
        trace_noun="station",
        what=what,
        coverage=store_coverage(store, data, cv.STATION),
        quiet=quiet,
    )
    kept, complete, steps, starts, u = cut.kept, cut.complete, cut.steps, cut.starts, cut.u

    start_time = str(store.attrs[cv.ATTR_START_TIME])
    start_h = segment_start_hours(starts, sampling_rate_hz)
    is_parametric = [role.startswith("param_") for role in SEGMENT_ROLES]
    archive = {
        "source": what,
        "source_fingerprint": store.attrs.get("ingest_fingerprint"),
        "source_start_time": start_time,
        "source_sampling_rate_hz": source_rate_hz,
        "channel": code,
        "sampling_rate_hz": float(sampling_rate_hz),
        "transforms": cut.transforms,
        "time_chunk_samples": int(time_chunk_samples),
        "segment_steps": steps,
        "guard_steps": cut.guard,
        "segment_roles": list(SEGMENT_ROLES),
        "segment_start_times": [iso_time(start_time, start / sampling_rate_hz) for start in starts],
        "n_stations": len(kept),
        "n_stations_dropped": len(ids) - len(kept),
        "stations": [ids[i] for i in kept],
        "stations_dropped": [ids[i] for i in range(len(ids)) if not complete[i]],
        "start_offsets_s": cut.start_offsets(ids, source_rate_hz),
        "gap_policy": GAP_POLICY,
    }
    return xr.Dataset(
        {cv.WAVEFIELD_VAR: ((cv.REALISATION, cv.TIME, cv.SENSOR), u)},
        coords={
            cv.REALISATION: np.arange(N_SEGMENTS),
            cv.TIME: np.arange(steps) / sampling_rate_hz,
            cv.SENSOR: np.array(archive["stations"], dtype=object),
            cv.LATITUDE: (cv.SENSOR, latitude[kept]),
            cv.LONGITUDE: (cv.SENSOR, longitude[kept]),
            cv.ELEVATION: (cv.SENSOR, _coordinate(store, cv.ELEVATION)[kept]),
            cv.ROLE: (cv.REALISATION, np.array(SEGMENT_ROLES, dtype=object)),
            cv.PARAMETER_VALUE: (
                cv.REALISATION,
                np.where(is_parametric, start_h, np.nan),
            ),
            cv.SEGMENT_START_TIME: (
                cv.REALISATION,
                np.array(archive["segment_start_times"], dtype=object),
            ),
        },
        attrs={
            cv.ATTR_DATASET: cv.ARCHIVE_DATASET,
            cv.ATTR_START_TIME: start_time,
            cv.ATTR_SAMPLING_RATE: float(sampling_rate_hz),
            cv.ATTR_SENSOR_ORDER: SENSOR_ORDER,
            cv.ATTR_PARAMETER_NAME: cv.SEGMENT_PARAMETER,
            cv.ATTR_ARCHIVE: archive,
        },
    )


def archive_attrs(wavefield: xr.Dataset) -> tuple[dict[str, Any], dict[str, Any]]:
    """(public attrs, truth attrs) of a bundle built from `archive_wavefield`'s result: the
    truth group gets all the provenance, the public group `PUBLIC_ARCHIVE_KEYS` only."""
    archive = wavefield.attrs[cv.ATTR_ARCHIVE]
    public = {key: archive[key] for key in PUBLIC_ARCHIVE_KEYS}
    return {cv.ATTR_ARCHIVE: public}, {cv.ATTR_ARCHIVE: archive}


def wavefield_for_tasks(
    store: xr.Dataset,
    layout: Layout,
    *,
    channel: str | None = None,
    sampling_rate_hz: float | None = None,
    what: str = "store",
    quiet: bool = False,
) -> tuple[xr.Dataset, dict[str, Any], dict[str, Any]]:
    """What `seisctf tasks` builds its bundle from: (wavefield, public attrs, truth attrs).

    A continuous waveform store goes through `archive_wavefield`, a DAS store through
    `das_wavefield.das_wavefield` (no `channel`); a wavefield store is used as it is, and then
    `channel` and `sampling_rate_hz` must not be given."""
    if cv.WAVEFIELD_VAR not in store.data_vars and cv.das_variable(store) is not None:
        if channel is not None:
            raise InvalidInput(
                what, "{channel} is only for a continuous waveform store", parameters=["channel"]
            )
        wavefield = das_wavefield(
            store,
            layout,
            sampling_rate_hz=DEFAULT_RATE_HZ if sampling_rate_hz is None else sampling_rate_hz,
            what=what,
            quiet=quiet,
        )
        return wavefield, *das_attrs(wavefield)
    if cv.is_waveform_store(store):
        wavefield = archive_wavefield(
            store,
            layout,
            channel=channel,
            sampling_rate_hz=DEFAULT_RATE_HZ if sampling_rate_hz is None else sampling_rate_hz,
            what=what,
            quiet=quiet,
        )
        return wavefield, *archive_attrs(wavefield)
    given = [
        option
        for option, value in (("channel", channel), ("sampling_rate_hz", sampling_rate_hz))
        if value is not None
    ]
    if given:
        raise InvalidInput(
            what,
            f"{' and '.join('{' + name + '}' for name in given)} "
            f"{'are' if len(given) > 1 else 'is'} only for a continuous "
            f"waveform store (variable {cv.WAVEFORM_VAR!r} with dims {cv.WAVEFORM_DIMS}) or a "
            "DAS store; this store is neither",
            parameters=given,
        )
    return store, {}, {}
