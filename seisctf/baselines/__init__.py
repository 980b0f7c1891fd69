"""Baseline participants: CTF baselines, STA/LTA and SeisBench pickers. They consume bundles like
any participant."""
