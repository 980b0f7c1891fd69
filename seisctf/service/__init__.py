"""The referee as a service (`seisctf serve`): teams upload submissions over HTTP, a job table
drives their scoring on Dask, the truth never leaves the server, a live leaderboard.

- `competition`: a competition's folder (its bundles, signing key, databases) and its config;
- `tables`: the service's database (SQLite or PostgreSQL, SQLAlchemy Core): teams, submissions
  (the job table), sessions;
- `teams`: tokens (issued once, stored hashed) and the team a token or session belongs to;
- `intake`: an upload stored by its content hash, validated (a CTF submission from metadata,
  a pick table against the public bundle's trace names), charged, queued;
- `jobs`: leases on queued submissions (a retry after a wait), scoring with the referee
  (`seisctf.scoring.referee`: CTF or picks), results and receipts recorded once;
- `receipts`: Ed25519-signed score receipts and their offline check;
- `app`, `pages`: the ASGI app (FastAPI) and its HTML.
"""
