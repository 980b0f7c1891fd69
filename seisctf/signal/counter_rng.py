"""Counter-based standard normal noise: values are pure functions of (key, global position).

Each pair of elements (global flat indices 2p and 2p + 1) takes two uniforms from SplitMix64's
output function applied to counters derived from p (Steele, Lea & Flood 2014, "Fast splittable
pseudorandom number generators"), mixed with a 64-bit key; Box-Muller turns them into the pair's
two standard normals (cosine and sine). Nothing depends on how the array is chunked or which
worker computes a block, so noisy arrays are bit-identical on any cluster.

Nor on the machine: the logarithm, cosine and sine of Box-Muller are computed from IEEE 754
arithmetic alone (+, -, ×, ÷, frexp: exact or correctly rounded everywhere), with fdlibm's
polynomials (Sun Microsystems 1993: e_log.c, k_sin.c, k_cos.c). `np.log` runs NumPy's own
AVX-512 code where the CPU has it and the C library's elsewhere, which differ in the last bit for
~0.3 % of arguments, and C libraries' `cos` differ between systems: noise made with them would
change with the machine that makes it.

Keys come from `noise_key(seed, variable)` (BLAKE2b); `substream_key` derives independent keys
for other uses of one key.
"""

from __future__ import annotations

import hashlib
import math
import operator
import threading
from collections.abc import Sequence

import dask.array as da
import numpy as np

from seisctf.errors import InvalidInput

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def _splitmix64(values: np.ndarray) -> np.ndarray:
    z = values * _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


def _splitmix64_into(values: np.ndarray, out: np.ndarray, scratch: np.ndarray) -> np.ndarray:
    """`_splitmix64(values)` written into `out`, with no temporary arrays (same bits)."""
    np.multiply(values, _GOLDEN, out=out)
    for shift, multiplier in ((30, _MIX1), (27, _MIX2)):
        np.right_shift(out, np.uint64(shift), out=scratch)
        np.bitwise_xor(out, scratch, out=out)
        np.multiply(out, multiplier, out=out)
    np.right_shift(out, np.uint64(31), out=scratch)
    return np.bitwise_xor(out, scratch, out=out)


def _uniform_open_into(bits: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Top 53 bits of `bits` -> uniforms in (0, 1] (never 0, so their logarithm is finite),
    written into float64 `out`; `bits` is overwritten."""
    np.right_shift(bits, np.uint64(11), out=bits)
    out[...] = bits
    out += 1.0
    out *= 1.0 / 2.0**53
    return out


# fdlibm (Sun Microsystems 1993): e_log.c, k_sin.c, k_cos.c.
_SQRT_HALF = 0.70710678118654752440
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_LG1, _LG2, _LG3, _LG4, _LG5, _LG6, _LG7 = (
    6.666666666666735130e-01,
    3.999999999940941908e-01,
    2.857142874366239149e-01,
    2.222219843214978396e-01,
    1.818357216161805012e-01,
    1.531383769920937332e-01,
    1.479819860511658591e-01,
)
_S1, _S2, _S3, _S4, _S5, _S6 = (
    -1.66666666666666324348e-01,
    8.33333333332248946124e-03,
    -1.98412698298579493134e-04,
    2.75573137070700676789e-06,
    -2.50507602534068634195e-08,
    1.58969099521155010221e-10,
)
_C1, _C2, _C3, _C4, _C5, _C6 = (
    4.16666666666666019037e-02,
    -1.38888888888741095749e-03,
    2.48015872894767294178e-05,
    -2.75573143513906633035e-07,
    2.08757232129817482790e-09,
    -1.13596475577881948265e-11,
)
_TWO_PI = 2.0 * np.pi


def _horner_into(
    out: np.ndarray, variable: np.ndarray, coefficients: Sequence[float]
) -> np.ndarray:
    """out = c0 + v·(c1 + v·(c2 + …)), innermost first (fdlibm's order of operations)."""
    *rest, last = coefficients
    np.multiply(variable, last, out=out)
    for coefficient in reversed(rest[1:]):
        out += coefficient
        out *= variable
    out += rest[0]
    return out


def _log_into(
    x: np.ndarray,
    f: np.ndarray,
    s: np.ndarray,
    z: np.ndarray,
    w: np.ndarray,
    term: np.ndarray,
    low: np.ndarray,
    exponent: np.ndarray,
) -> np.ndarray:
    """ln of positive normal float64 `x`, in place (fdlibm's e_log.c without its shortcuts,
    within an ulp); the others are scratch of x's size (float64 × 6, intc). Selections are
    products with 0/1 (exact), not masked writes (ten times slower in NumPy)."""
    np.frexp(x, out=(f, exponent))  # x = f · 2^exponent, f in [1/2, 1)
    np.less(f, _SQRT_HALF, out=low)
    w[...] = exponent
    w -= low  # k
    low += 1.0
    f *= low  # in [√½, √2): exact
    f -= 1.0
    np.add(f, 2.0, out=s)
    np.divide(f, s, out=s)
    np.multiply(s, s, out=z)
    np.multiply(z, z, out=term)
    # R = t2 + t1: t1 = w(Lg2 + w(Lg4 + w·Lg6)) in x, t2 = z(Lg1 + w(Lg3 + w(Lg5 + w·Lg7)))
    _horner_into(x, term, (_LG2, _LG4, _LG6))
    x *= term
    _horner_into(low, term, (_LG1, _LG3, _LG5, _LG7))
    low *= z
    np.add(low, x, out=x)
    np.multiply(f, f, out=z)
    z *= 0.5  # hfsq
    x += z
    x *= s  # s(hfsq + R)
    np.multiply(w, _LN2_LO, out=term)
    x += term
    np.subtract(z, x, out=z)
    z -= f  # (hfsq - (s(hfsq + R) + k·ln2_lo)) - f
    w *= _LN2_HI
    return np.subtract(w, z, out=x)


def _sincos_two_pi_into(
    u: np.ndarray,
    z: np.ndarray,
    sine: np.ndarray,
    cosine: np.ndarray,
    poly: np.ndarray,
    extra: np.ndarray,
    far: np.ndarray,
    use_sine: np.ndarray,
    lower: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(cos(2π u), sin(2π u)) for float64 `u` in [0, 1], written into (u, sine): reduced exactly
    to [0, π/4] by symmetry (u is a multiple of 2^-53, so every step of the reduction is exact),
    then fdlibm's sine and cosine kernels; the others are scratch of u's size (float64 × 7)."""
    np.less(u, 0.5, out=lower)  # sin(2πu) = +sin(2πv) where u < ½, else -sin(2πv)
    u -= 0.5
    np.abs(u, out=u)  # v = |u - 1/2|: cos(2πu) = -cos(2πv)
    np.greater(u, 0.25, out=far)
    np.multiply(u, -2.0, out=extra)
    extra += 0.5
    extra *= far
    u += extra  # r = ½ - v where v > ¼, else v: cos(2πv) = ∓cos(2πr), sin(2πv) = sin(2πr)
    np.greater(u, 0.125, out=use_sine)
    np.multiply(u, -2.0, out=extra)
    extra += 0.25
    extra *= use_sine
    u += extra  # ¼ - r where r > ⅛ (cos(2πr) = sin(2π(¼ - r)) and back), else r
    u *= _TWO_PI  # x in [0, π/4]
    np.multiply(u, u, out=z)
    # sine: x + (z·x)(S1 + z(S2 + z(S3 + z(S4 + z(S5 + z·S6)))))
    _horner_into(sine, z, (_S2, _S3, _S4, _S5, _S6))
    sine *= z
    sine += _S1
    np.multiply(z, u, out=extra)
    sine *= extra
    sine += u
    # cosine: w' + (((1 - w') - hz) + z·r), r = z(C1 + z(C2 + z·C3)) + (w·w)(C4 + z(C5 + z·C6)),
    # w = z·z, hz = z/2, w' = 1 - hz
    _horner_into(cosine, z, (_C1, _C2, _C3))
    cosine *= z
    _horner_into(poly, z, (_C4, _C5, _C6))
    np.multiply(z, z, out=extra)
    extra *= extra
    poly *= extra
    cosine += poly
    cosine *= z
    z *= 0.5
    np.subtract(1.0, z, out=extra)
    np.subtract(1.0, extra, out=poly)
    poly -= z
    poly += cosine
    np.add(extra, poly, out=cosine)
    # cos(2πr) = S·s + C·(1 - s), sin(2πr) = C·s + S·(1 - s), s = use_sine (0/1: exact)
    np.multiply(sine, use_sine, out=poly)
    np.multiply(cosine, use_sine, out=extra)
    np.subtract(1.0, use_sine, out=use_sine)
    cosine *= use_sine
    cosine += poly
    sine *= use_sine
    sine += extra
    far *= 2.0
    far -= 1.0  # +1 where far, else -1
    lower *= 2.0
    lower -= 1.0  # +1 where u < ½, else -1
    sine *= lower
    return np.multiply(cosine, far, out=u), sine


# Elements per slab of the normal generator: its scratch arrays stay in the CPU's cache.
_NORMAL_SLAB = 1 << 15
# Each thread's scratch of the generator, kept between calls: a worker whose allocator returns
# freed memory to the kernel at once (distributed sets MALLOC_TRIM_THRESHOLD_) would otherwise
# fault fresh pages in for every slab, which nearly doubled the time to make a block's noise.
_scratch = threading.local()


def _cached(name: str, size: int, dtypes: Sequence[type]) -> tuple[np.ndarray, ...]:
    """Arrays of `dtypes`, `size` elements each, from this thread's cache under `name` (grown
    when needed; only up to 4 × _NORMAL_SLAB elements are kept)."""
    cached = getattr(_scratch, name, None)
    if cached is None or cached[0].size < size:
        cached = tuple(np.empty(max(size, _NORMAL_SLAB), dtype=dtype) for dtype in dtypes)
        if size <= 4 * _NORMAL_SLAB:
            setattr(_scratch, name, cached)
    return tuple(array[:size] for array in cached)


def _pairs_into(mixed_key: np.uint64, pairs: np.ndarray, out: np.ndarray) -> None:
    """Box-Muller pairs: for each p of 1-D uint64 `pairs`, row p of float64 `out` (n, 2) gets
    (R cos 2πU2, R sin 2πU2), R = sqrt(-2 ln U1), U1 and U2 from SplitMix64(4p ⊕ k) and
    SplitMix64((4p ⊕ k) + 1). Slab by slab with in-place arithmetic in this thread's scratch."""
    base, bits, scratch, radius, angle, *floats, exponent = _cached(
        "generator",
        min(pairs.size, _NORMAL_SLAB),
        (np.uint64, np.uint64, np.uint64, np.float64, np.float64, *(np.float64,) * 8, np.intc),
    )
    for start in range(0, pairs.size, _NORMAL_SLAB):
        stop = min(start + _NORMAL_SLAB, pairs.size)
        n = stop - start
        slab_base, slab_bits, slab_scratch = base[:n], bits[:n], scratch[:n]
        slab_radius, slab_angle = radius[:n], angle[:n]
        slab_floats = [array[:n] for array in floats]
        np.left_shift(pairs[start:stop], np.uint64(2), out=slab_base)
        np.bitwise_xor(slab_base, mixed_key, out=slab_base)
        _uniform_open_into(_splitmix64_into(slab_base, slab_bits, slab_scratch), slab_radius)
        f, s, z, w, term, low = slab_floats[:6]
        _log_into(slab_radius, f, s, z, w, term, low, exponent[:n])
        slab_radius *= -2.0
        np.sqrt(slab_radius, out=slab_radius)
        slab_base += np.uint64(1)
        _uniform_open_into(_splitmix64_into(slab_base, slab_bits, slab_scratch), slab_angle)
        cosine, sine = _sincos_two_pi_into(slab_angle, *slab_floats[:8])
        np.multiply(slab_radius, cosine, out=out[start:stop, 0])
        np.multiply(slab_radius, sine, out=out[start:stop, 1])


def _normal_runs_into(
    mixed_key: np.uint64, run_starts: np.ndarray, width: int, out: np.ndarray
) -> None:
    """out[r, j] = the standard normal at flat index run_starts[r] + j, for float64 `out`
    (runs, width): the pairs covering each run are made once, then cut to the run."""
    n_pairs = width // 2 + 1  # pairs from the run's first one: enough whatever its parity
    total = run_starts.size * n_pairs
    pairs, made = _cached("runs", 2 * total, (np.uint64, np.float64))
    pairs = pairs[:total].reshape(run_starts.size, n_pairs)
    np.add(
        (run_starts >> np.uint64(1))[:, np.newaxis], np.arange(n_pairs, dtype=np.uint64), out=pairs
    )
    made = made.reshape(total, 2)
    _pairs_into(mixed_key, pairs.reshape(-1), made)
    grid = made.reshape(run_starts.size, 2 * n_pairs)  # element 2·pair + {0, 1}
    offsets = (run_starts & np.uint64(1)).astype(np.intp)
    if offsets.min(initial=0) == offsets.max(initial=0):
        out[...] = grid[:, offsets[0] if offsets.size else 0 :][:, :width]
    else:
        columns = offsets[:, np.newaxis] + np.arange(width)
        out[...] = np.take_along_axis(grid, columns, axis=1)


def key_mix(key: int) -> np.uint64:
    """SplitMix64(key): the key as the generator mixes it into every counter."""
    return _splitmix64(np.array([key], dtype=np.uint64))[0]


def standard_normal_at(key: int, flat_index: np.ndarray) -> np.ndarray:
    """Standard normal float64 values at the given global flat indices (any shape).

    Indices 2p and 2p + 1 are Box-Muller's pair R·cos(2π U2) and R·sin(2π U2), R = sqrt(-2 ln
    U1), with U1, U2 uniforms in (0, 1] from the top 53 bits of SplitMix64(4p ⊕ k) and
    SplitMix64((4p ⊕ k) + 1), k = SplitMix64(key). (Even indices keep the values of the
    generator before 2026-12, which made every index from its own uniforms, cosine only.)"""
    flat = np.ascontiguousarray(flat_index, dtype=np.uint64)
    values = np.empty(flat.shape, dtype=np.float64)
    _normal_runs_into(key_mix(key), flat.reshape(-1), 1, values.reshape(-1, 1))
    return values


def _flat_strides(counter_shape: Sequence[int]) -> list[int]:
    """C-order element strides of `counter_shape`."""
    strides, stride = [], 1
    for size in reversed(counter_shape):
        strides.append(stride)
        stride *= size
    return strides[::-1]


def flat_positions(location: Sequence[tuple[int, int]], counter_shape: Sequence[int]) -> np.ndarray:
    """uint64 C-order flat indices in `counter_shape` of the block spanning `location`.

    `location` holds one (start, stop) per axis; the result has the block's shape.
    """
    shape = tuple(stop - start for start, stop in location)
    return _flat_positions_into(location, counter_shape, np.empty(shape, dtype=np.uint64))


def _flat_positions_into(
    location: Sequence[tuple[int, int]], counter_shape: Sequence[int], out: np.ndarray
) -> np.ndarray:
    """`flat_positions(location, counter_shape)` written into uint64 `out` (the block's shape)."""
    out[...] = 0
    for axis, ((start, stop), axis_stride) in enumerate(
        zip(location, _flat_strides(counter_shape), strict=True)
    ):
        positions = np.arange(start, stop, dtype=np.uint64) * np.uint64(axis_stride)
        out += positions.reshape((-1,) + (1,) * (len(location) - axis - 1))
    return out


def row_slabs(location: Sequence[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """`location` cut along its first axis into slabs of about `_NORMAL_SLAB` elements."""
    shape = [stop - start for start, stop in location]
    rows = max(1, _NORMAL_SLAB // max(1, math.prod(shape[1:])))
    first, last = location[0]
    return [[(start, min(start + rows, last)), *location[1:]] for start in range(first, last, rows)]


def normals_slab(
    mixed_key: np.uint64, slab: Sequence[tuple[int, int]], counter_shape: Sequence[int]
) -> np.ndarray:
    """float64 normals of one slab (its shape), in this thread's scratch: valid until the next
    call on this thread."""
    shape = tuple(stop - start for start, stop in slab)
    # Runs of consecutive flat indices: the slab's last axis, and the axes before it while
    # the ones after span the whole counter shape.
    run_axis = len(shape) - 1
    while run_axis > 0 and shape[run_axis] == counter_shape[run_axis]:
        run_axis -= 1
    width = math.prod(shape[run_axis:])
    firsts = [*slab[:run_axis], *((start, start + 1) for start, _ in slab[run_axis:])]
    run_shape = tuple(stop - start for start, stop in firsts)
    starts, values = _cached("slab", math.prod(shape), (np.uint64, np.float64))
    starts = starts[: math.prod(run_shape)]
    _flat_positions_into(firsts, counter_shape, starts.reshape(run_shape))
    values = values.reshape(-1, width) if width else values.reshape(0, 0)
    _normal_runs_into(mixed_key, starts, width, values)
    return values.reshape(shape)


def normals_in_block(
    key: int, location: Sequence[tuple[int, int]], counter_shape: Sequence[int]
) -> np.ndarray:
    """`standard_normal_at(key, flat_positions(location, counter_shape))`, made slab by slab
    along the first axis so no block-sized index array is held (the same bits)."""
    shape = tuple(stop - start for start, stop in location)
    if not shape:
        return standard_normal_at(key, flat_positions(location, counter_shape))
    values = np.empty(shape, dtype=np.float64)
    if values.size == 0:
        return values
    mixed_key = key_mix(key)
    first = location[0][0]
    for slab in row_slabs(location):
        start, stop = slab[0]
        values[start - first : stop - first] = normals_slab(mixed_key, slab, counter_shape)
    return values


def _normal_block(
    key: int, counter_shape: tuple[int, ...], block_info: dict | None = None
) -> np.ndarray:
    assert block_info is not None  # given by map_blocks
    return normals_in_block(key, block_info[None]["array-location"], counter_shape)


def standard_normal(key: int, shape: tuple[int, ...], chunks) -> da.Array:
    """Lazy float64 standard normal noise of any N-D `shape`, keyed by `key` (0 <= key < 2**64).

    Element `index` is `standard_normal_at(key, np.ravel_multi_index(index, shape))`, so
    `chunks` (anything `dask.array` accepts) cannot change any value. For 2-D shapes this is
    `gaussian_noise` bit for bit.
    """
    if not 0 <= key < 2**64:
        raise InvalidInput("key", f"must be an integer in [0, 2**64), got {key}")
    shape = tuple(operator.index(size) for size in shape)
    if math.prod(shape) >= 2**62:
        raise InvalidInput("shape", f"{shape} has too many elements for the 64-bit counter")
    return da.map_blocks(
        _normal_block,
        key,
        shape,
        chunks=da.core.normalize_chunks(chunks, shape, dtype=np.float64),
        dtype=np.float64,
        meta=np.empty((0,) * len(shape)),
    )


def gaussian_noise(key: int, shape: tuple[int, int], chunks: tuple[int, int]) -> da.Array:
    """Lazy (time, space) float64 standard normal noise keyed by `key` and global position."""
    return standard_normal(key, shape, chunks)


# --- keys ---------------------------------------------------------------------------------------


def noise_key(seed: int, variable: str) -> int:
    """The 64-bit noise key of `variable` under `seed`.

    The first 8 bytes (little-endian) of BLAKE2b(decimal seed, NUL, UTF-8 variable name),
    personalised "seisctf.noise", so every (seed, variable) pair gets its own noise stream.
    """
    if isinstance(seed, bool) or not hasattr(seed, "__index__"):
        raise InvalidInput("seed", f"must be an integer, got {type(seed).__name__}")
    seed = operator.index(seed)
    if not isinstance(variable, str) or not variable:
        raise InvalidInput("variable", f"must be a non-empty string, got {variable!r}")
    message = str(seed).encode() + b"\0" + variable.encode()
    digest = hashlib.blake2b(message, digest_size=8, person=b"seisctf.noise").digest()
    return int.from_bytes(digest, "little")


def substream_key(key: int, stream: str) -> int:
    """An independent key for one use of `key` (coloured noise, window choice, ...)."""
    digest = hashlib.blake2b(
        key.to_bytes(8, "little"), digest_size=8, person=stream.encode()
    ).digest()
    return int.from_bytes(digest, "little")


def counter_choice(key: int, counters: np.ndarray, n_choices: int) -> np.ndarray:
    """int64 choices in [0, n_choices): SplitMix64(counter XOR SplitMix64(key)) mod n_choices."""
    with np.errstate(over="ignore"):
        bits = _splitmix64(np.asarray(counters, dtype=np.uint64) ^ key_mix(key))
    return (bits % np.uint64(n_choices)).astype(np.int64)
