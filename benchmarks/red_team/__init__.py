"""Red team of the CTF datasets (issue 20, point 3): build bundles with a random secret through
the real command line, score predictions with the real referee (`harness`), legitimate
baselines that learn only from the public training arrays (`baselines`), and per-dataset
inversion attacks (`attack_<dataset>`) written against the public package alone.
`benchmarks/bench_truth_inversion.py` runs them and prints the gaps."""
