"""Public scores cannot probe the truth (docs/release.md, "Which outputs are public").

A small real bundle; persistence scaled by c = 1 and c = 2 scored by the real command line
(`paper` convention) into an SQLite leaderboard; the public outputs written by `seisctf
leaderboard --html --json`, the season's view and, with `--final`, the close's. Then:

(a) during the season leaderboard.json and the HTML pages hold of a CTF entry only its
public score (short-time and reconstruction scores on the public part), a multiple of the
Ladder's step (1); at the close every number is a
private-part score, a multiple of 0.01 in [-100, 100]; no raw score, error or truth norm appears
in either at any precision;
(b) the probing attack of issue 20 recovers the norm of the private part of X1test[:k_short]
from two final-view scores (during the season there are no per-score numbers to use). With
e_c = 1 - E_c/100 = ||T - cS||_F / ||T||_F (S the persistence window, known to the
participant), a = ||T||_F^2, b = <T, S>, s = ||S||_F^2:
    e_c^2 a = a - 2cb + c^2 s, so 2 e_1^2 a - e_2^2 a = a - 2s and a = 2s / (1 - 2e_1^2 + e_2^2).
From the organisers' raw scores it gives the norm to ~1e-12 (the positive control). From the
public scores, each E_c is known only to +-0.005, so e_c to +-eta = 5e-5, and the denominator
D = 1 - 2e_1^2 + e_2^2 only to +-B, B = (4 e_1 + 2 e_2) eta + 3 eta^2 (exact bound: D moves by
-2(2 e_1 d_1 + d_1^2) + 2 e_2 d_2 + d_2^2 for |d_c| <= eta). Hence |a_public / a - 1| <=
B / (D - B); and every a in [2s / D_max, 2s / D_min] (D at the corners of the rounding box) is
consistent with the public numbers: no attack on them can tell those norms apart.
"""

from __future__ import annotations

import json
import math
import re
import secrets
import sqlite3
from contextlib import closing
from decimal import Decimal

import dask.array as da
import numpy as np
import pytest
import zarr
from conftest import TINY_LAYOUT, smooth_wavefield

from seisctf import conventions as cv
from seisctf.cli import main
from seisctf.location import StoreLocation
from seisctf.pipeline.bundles.segments import build_bundle, write_bundle
from seisctf.scoring import ladder, parts, release

SCALES = (1, 2)
STEP = 0.01  # the public leaderboard's score step
ETA = STEP / 2 / 100  # the largest error in e_c = 1 - E_c/100 from rounding E_c to STEP
RAW_TOLERANCE = 1e-9  # the attack's relative error on raw scores must stay below this
DECIMAL = re.compile(r"-?\d+\.\d+")


def slow_wavefield(seed: int = 7):
    """The conftest wavefield's structure, with slow plane waves (0.002-0.02 rad per step), so
    persistence forecasts the first rows well and both probes' scores stay inside the clip."""
    base = smooth_wavefield()
    n_realisation, n_time, n_sensor = base[cv.WAVEFIELD_VAR].shape
    rng = np.random.default_rng(seed)
    time = np.arange(n_time, dtype=np.float64)[:, None]
    space = np.arange(n_sensor, dtype=np.float64)[None, :]
    fields = [
        sum(
            rng.uniform(0.5, 2.0)
            * np.sin(
                rng.uniform(0, np.pi) * space
                - rng.uniform(0.002, 0.02) * time
                + rng.uniform(0, 2 * np.pi)
            )
            for _ in range(6)
        )
        for _ in range(n_realisation)
    ]
    data = da.from_array(
        np.stack(fields).astype(np.float32), chunks=base[cv.WAVEFIELD_VAR].data.chunksize
    )
    return base.assign({cv.WAVEFIELD_VAR: (base[cv.WAVEFIELD_VAR].dims, data)})


@pytest.fixture(scope="module")
def scored(tmp_path_factory, dask_cluster):
    """Everything the organisers and the public hold after scoring the two probes."""
    root = tmp_path_factory.mktemp("public-scores")
    secret = secrets.token_urlsafe(32)
    public, truth_url = str(root / "public.zarr"), str(root / "truth.zarr")
    write_bundle(
        build_bundle(slow_wavefield(), TINY_LAYOUT, secret),
        StoreLocation(public),
        StoreLocation(truth_url),
        secret,
        quiet=True,
    )
    scheduler = ["--scheduler", dask_cluster.address, "--quiet"]
    persistence = root / "persistence.zarr"
    argv = ["baseline", "persistence", "--public", public, "--out", str(persistence)]
    assert main([*argv, *scheduler]) == 0
    group = zarr.open_group(str(persistence), mode="r")
    predictions = {name: group[name][...] for name in group.array_keys()}
    paths = []
    for c in SCALES:
        paths.append(str(root / f"probe-{c}.npz"))
        np.savez(paths[-1], **{k: (c * v).astype(v.dtype) for k, v in predictions.items()})
    db, full_json = root / "leaderboard.sqlite", root / "full.json"
    argv = ["score", "ctf", "--truth", truth_url, "--submission", *paths, "--convention", "paper",
            *(f"--name=persistence-x{c}" for c in SCALES), "--db", str(db),
            "--json", str(full_json)]  # fmt: skip
    assert main([*argv, *scheduler]) == 0
    views = {}
    for view, final in (("season", []), ("final", ["--final"])):
        site, public_json = root / f"site-{view}", root / f"leaderboard-{view}.json"
        argv = ["leaderboard", "--db", str(db), "--html", str(site), "--json", str(public_json)]
        assert main([*argv, *final]) == 0
        views[view] = {
            "json": public_json.read_text(),
            "pages": {path.name: path.read_text() for path in sorted(site.glob("*.html"))},
        }
    with closing(sqlite3.connect(db)) as connection:
        stored = [
            json.loads(row[0]) for row in connection.execute("SELECT result FROM submissions")
        ]
    truth = zarr.open_group(truth_url, mode="r")
    n_space = truth["X1test"].shape[1]
    return {
        "full": json.loads(full_json.read_text()),
        "stored": stored,
        "season": views["season"],
        "final": views["final"],
        "private": parts.part_mask(truth.attrs[cv.ATTR_CTF_SALT], n_space, "private"),
        "truth": {name: truth[name][...].astype(np.float64) for name in truth.array_keys()},
        "persistence": {k: v.astype(np.float64) for k, v in predictions.items()},
    }


def _hidden_values(scored) -> list[float]:
    """What must not be published: every raw score the organisers hold (the --json output and
    the SQLite rows), its error 1 - E/100, and norms of every truth window and of T - cS."""
    k = TINY_LAYOUT.k_short
    values = []
    for result in [*scored["full"], *scored["stored"]]:
        views = [result, *result["parts"].values()]
        for raw in (raw for view in views for raw in view["raw_scores"].values()):
            values += [raw, 1 - raw / 100]
    for name, truth in scored["truth"].items():
        for columns in (slice(None), scored["private"], ~scored["private"]):
            for window in (truth[:k, columns], truth[:, columns]):
                frobenius = float(np.linalg.norm(window))
                values += [frobenius, frobenius**2, float(np.linalg.norm(window, 2))]
        for c in SCALES:
            values.append(float(np.linalg.norm(truth[:k] - c * scored["persistence"][name][:k])))
    return values


def _spellings(value: float) -> set[str]:
    """`value` written with 3 to 12 decimals or significant digits, and as Python writes it;
    only spellings finer than 0.01 (a coarser one may be the published rounded score)."""
    spelt = {repr(value), str(value)}
    for digits in (3, 4, 6, 8, 10, 12):
        spelt |= {f"{value:.{digits}f}", f"{value:.{digits}g}"}
    return {text for text in spelt if re.fullmatch(r"-?\d+\.\d{3,}(e[-+]\d+)?", text)}


def _numbers(json_text: str) -> list[str]:
    """Every number of a JSON text, strings blanked."""
    outside_strings = re.sub(r'"(?:[^"\\]|\\.)*"', '""', json_text)
    return re.findall(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", outside_strings)


def test_season_json_holds_only_public_scores_to_the_ladder_step(scored):
    rows = json.loads(scored["season"]["json"])
    public = {result["name"]: release.public_score(result) for result in scored["full"]}
    assert {row["model"] for row in rows} == set(public)
    for row in rows:
        assert set(row) == {"model", "dataset", "convention", "scores", "avg_score", "public_score"}
        assert row["scores"] == {} and row["avg_score"] is None
        shown = row["public_score"]
        assert shown == ladder.to_step(public[row["model"]])
        assert abs(shown - public[row["model"]]) <= 0.5
    order = sorted(public, key=lambda name: (-ladder.to_step(public[name]), name))
    assert [row["model"] for row in rows] == order
    numbers = _numbers(scored["season"]["json"])
    assert len(numbers) == 2 and all(float(n) == round(float(n)) for n in numbers), numbers


def test_final_json_holds_only_private_scores_to_a_hundredth(scored):
    rows = json.loads(scored["final"]["json"])
    assert [row["model"] for row in rows] == ["persistence-x1", "persistence-x2"]
    by_model = {result["name"]: result for result in scored["full"]}
    for row in rows:
        assert set(row) == {"model", "dataset", "convention", "scores", "avg_score"}
        assert row["convention"] == "paper" and list(row["scores"]) == list(cv.SCORE_NAMES)
        private = by_model[row["model"]]["parts"]["private"]
        assert row["scores"] == {k: round(v, 2) + 0.0 for k, v in private["scores"].items()}
        assert row["avg_score"] == round(private["avg_score"], 2)
        for value in (*row["scores"].values(), row["avg_score"]):
            assert -100 <= value <= 100 and round(value * 100) == pytest.approx(value * 100)
    # The text itself: every number written with at most two decimals.
    numbers = _numbers(scored["final"]["json"])
    assert len(numbers) == 2 * (len(cv.SCORE_NAMES) + 1)
    assert all(re.fullmatch(r"-?\d+(\.\d\d?)?", number) for number in numbers), numbers


def test_season_pages_show_one_public_score_per_entry(scored):
    pages = scored["season"]["pages"]
    page = next(text for name, text in pages.items() if name.startswith("dataset-"))
    ranking = page[page.index('id="ctf1-ranking"') : page.index("</table>", page.index("ctf1-"))]
    cells = re.findall(r'<t[dh][^>]*data-sort="([^"]*)"[^>]*>([^<]*)</t[dh]>', ranking)
    scores = [text for _, text in cells if DECIMAL.fullmatch(text)]
    expected = [ladder.to_step(release.public_score(r)) for r in scored["full"]]
    assert sorted(float(text) for text in scores) == sorted(expected)
    assert "E1" not in ranking and "<svg" not in page  # no per-score column, no profile
    for name, text in pages.items():
        finer = [n for n in DECIMAL.findall(text) if len(n.split(".")[1]) > 2]
        assert finer == [], (name, finer[:5])


def test_html_scores_are_hundredths_and_no_page_has_a_finer_number(scored):
    pages = scored["final"]["pages"]
    page = next(text for name, text in pages.items() if name.startswith("dataset-"))
    ranking = page[page.index('id="ctf1-ranking"') : page.index("</table>", page.index("ctf1-"))]
    cells = re.findall(r'<t[dh][^>]*data-sort="([^"]*)"[^>]*>([^<]*)</t[dh]>', ranking)
    scores = [(key, text) for key, text in cells if DECIMAL.fullmatch(text)]
    assert len(scores) == 2 * (len(cv.SCORE_NAMES) + 1)  # AvgScore and E1..E12 of two rows
    by_text = {result["name"]: result["parts"]["private"] for result in scored["full"]}
    for key, text in scores:
        assert re.fullmatch(r"-?\d+\.\d\d", text) and float(key) == float(text)
        assert -100 <= float(text) <= 100
    for name, result in by_text.items():
        row = ranking[ranking.index(f">{name}<") :].split("</tr>")[0]
        shown = [float(t) for t in re.findall(r">(-?\d+\.\d\d)</td>", row)]
        assert shown == [round(result["avg_score"], 2)] + [
            round(result["scores"][k], 2) for k in cv.SCORE_NAMES
        ]
    for name, text in pages.items():  # styles, figures, tables: no number finer than 0.01
        finer = [n for n in DECIMAL.findall(text) if len(n.split(".")[1]) > 2]
        assert finer == [], (name, finer[:5])


def test_no_raw_score_error_or_norm_is_published(scored):
    public = [scored[view]["json"] for view in ("season", "final")]
    public += [page for view in ("season", "final") for page in scored[view]["pages"].values()]
    hidden = _hidden_values(scored)
    assert len(hidden) > 100
    raw_e1 = [result["raw_scores"]["E1"] for result in scored["full"]]
    assert raw_e1[1] != round(raw_e1[1], 2)  # there are digits to hide
    for value in hidden:
        for spelt in _spellings(value):
            assert all(spelt not in text for text in public), (value, spelt)


def _norm_from_probes(scores: list[float], persistence_window: np.ndarray) -> tuple:
    """(||T||_F^2 from the two probes' E1, e_1, e_2, D): the algebra in the module docstring."""
    e1, e2 = (1 - score / 100 for score in scores)
    denominator = 1 - 2 * e1**2 + e2**2
    return 2 * float(np.sum(persistence_window**2)) / denominator, e1, e2, denominator


def _known_to(published: float) -> float:
    """How far e = 1 - E/100 may be from a published E: half its last written digit (JSON
    writes Python's repr), at most half the public step (the policy participants read)."""
    last_digit = 10.0 ** Decimal(repr(published)).as_tuple().exponent
    return min(ETA, last_digit / 2 / 100)


def test_probing_attack_works_on_raw_scores_and_fails_on_public_ones(scored):
    """On the final view's private E1 (the season's view has no E1 to probe with)."""
    k, private = TINY_LAYOUT.k_short, scored["private"]
    truth_sq = float(np.sum(scored["truth"]["X1test"][:k, private] ** 2))
    window = scored["persistence"]["X1test"][:k, private]
    raw = [result["parts"]["private"]["raw_scores"]["E1"] for result in scored["full"]]
    public = [row["scores"]["E1"] for row in json.loads(scored["final"]["json"])]
    assert all(-100 < score < 100 for score in raw)  # neither probe is clipped: E1 is public

    # Positive control: the organisers' raw scores give the norm to float64 precision.
    from_raw, e1, e2, denominator = _norm_from_probes(raw, window)
    raw_error = abs(math.sqrt(from_raw / truth_sq) - 1)
    assert raw_error < RAW_TOLERANCE

    # The public scores: the same attack, with the error their precision allows and no less.
    eta1, eta2 = (_known_to(score) for score in public)
    from_public, e1_public, e2_public, _ = _norm_from_probes(public, window)
    public_error = abs(math.sqrt(from_public / truth_sq) - 1)
    bound = 4 * e1 * eta1 + 2 * e2 * eta2 + 2 * eta1**2 + eta2**2
    assert public_error <= bound / (denominator - bound)
    corners = [1 - 2 * (e1_public + s1) ** 2 + (e2_public + s2) ** 2
               for s1, s2 in ((eta1, -eta2), (-eta1, eta2))]  # fmt: skip
    low, high = (2 * float(np.sum(window**2)) / d for d in sorted(corners, reverse=True))
    assert low <= truth_sq <= high  # the truth is among the norms the public scores allow
    spread = (math.sqrt(high) - math.sqrt(low)) / math.sqrt(truth_sq)
    # Every norm in [sqrt(low), sqrt(high)] explains the public scores equally well. To first
    # order the interval of a is 2B/D of a wide, so that of the norm B/D: with the 0.01 step,
    # at least 4 orders of magnitude above what the raw scores give.
    assert spread >= 0.9 * bound / denominator
    assert spread > 1e4 * RAW_TOLERANCE
    print(
        f"||X1test[:{k}, private]||_F = {math.sqrt(truth_sq):.12g}: raw-score attack error "
        f"{raw_error:.1e}, public-score attack error {public_error:.1e} (bound "
        f"{bound / (denominator - bound):.1e}), norms consistent with the public scores span "
        f"{spread:.1e} of it"
    )
