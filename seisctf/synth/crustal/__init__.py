"""Crustal surface wavefields from 3D elastic finite differences (`seisctf synth crustal`).

Modules, each one concept: `medium` (the finite-difference grid, the random heterogeneous medium
and its staggered material coefficients), `source` (moment tensor from strike/dip/rake, moment
rate, injection), `solver` (the velocity–stress staggered-grid scheme, free surface, C-PML, CFL),
`recording` (the surface sensor grid, anti-aliased resampling, interpolation), `simulation` (one
simulation end to end) and `sweep` (the realisations of a store, one Dask task each, written as
`u(realisation, time, sensor)`). Documentation with every equation and convention:
docs/crustal.md.

Frame (Aki & Richards 2002): x north, y east, z down, in metres; the sensor grid's first sensor
is at x = y = 0 on the free surface z = 0.
"""
