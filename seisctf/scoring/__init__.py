"""Referees: CTF scores E1..E12, leaderboards, plots."""
