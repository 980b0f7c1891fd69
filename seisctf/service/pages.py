"""The service's HTML: every text from the database or a request is escaped (`html.escape`),
scripts and styles are files of the service (`/static/…`, allowed by the Content-Security-Policy
`app.SECURITY_HEADERS` sets), forms carry the session's CSRF token."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from seisctf.service.competition import Competition
from seisctf.service.tables import SCORED

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 70rem; padding: 0 1rem; }
table { border-collapse: collapse; } th, td { border-bottom: 1px solid #ccc; padding: .3rem .6rem;
text-align: left; } .state-scored { color: #075; } .state-refused, .state-failed { color: #a00; }
iframe { width: 100%; height: 80vh; border: 1px solid #ccc; } form { margin: 1rem 0; }
.error { color: #a00; font-weight: bold; }
"""

# The team page's table follows the job table without a reload; the live page reloads the
# board's frame when a score lands.
TEAM_SCRIPT = """
async function refresh() {
  const response = await fetch('/api/submissions', {credentials: 'same-origin'});
  if (!response.ok) return;
  const rows = await response.json();
  const body = document.getElementById('submissions');
  body.replaceChildren(...rows.map(row => {
    const tr = document.createElement('tr');
    tr.dataset.id = row.id;
    for (const value of [row.id, row.dataset, row.model, row.state, row.shown, row.message]) {
      const td = document.createElement('td');
      td.textContent = value === null ? '' : String(value);
      tr.appendChild(td);
    }
    tr.children[3].className = 'state-' + row.state;
    const receipt = document.createElement('td');
    if (row.receipt) {
      const link = document.createElement('a');
      link.href = row.receipt;
      link.download = 'receipt-' + row.id + '.json';
      link.className = 'receipt';
      link.textContent = 'receipt';
      receipt.appendChild(link);
    }
    tr.appendChild(receipt);
    return tr;
  }));
}
setInterval(refresh, 1000);
"""

# With an uploads bucket, the team page's form sends the file's parts straight to the bucket's
# presigned URLs (`s3_uploads`): the server is asked for them and completes the upload, the
# bytes never pass through it. Requests carry the session's CSRF token as `X-CSRF-Token`.
UPLOAD_SCRIPT = """
async function sendToBucket(form) {
  const file = form.elements.file.files[0];
  const csrf = {'X-CSRF-Token': form.elements.csrf.value};
  const query = new URLSearchParams({dataset: form.elements.dataset.value,
    model: form.elements.model.value, filename: file.name, size: String(file.size)});
  const started = await fetch('/api/uploads?' + query, {method: 'POST', headers: csrf,
    credentials: 'same-origin'});
  if (!started.ok) throw new Error((await started.json()).detail);
  const plan = await started.json();
  const etags = [];
  try {
    for (const part of plan.parts) {
      const first = (part.part - 1) * plan.part_bytes;
      const sent = await fetch(part.url, {method: 'PUT',
        body: file.slice(first, first + plan.part_bytes)});
      if (!sent.ok) throw new Error('the bucket refused part ' + part.part + ': ' + sent.status);
      etags.push({part: part.part, etag: sent.headers.get('ETag')});
    }
  } catch (error) {
    await fetch('/api/uploads/' + plan.upload, {method: 'DELETE', headers: csrf,
      credentials: 'same-origin'});
    throw error;
  }
  const done = await fetch('/api/uploads/' + plan.upload + '/complete', {method: 'POST',
    headers: {...csrf, 'Content-Type': 'application/json'}, credentials: 'same-origin',
    body: JSON.stringify(etags)});
  if (!done.ok) throw new Error((await done.json()).detail);
}
const uploadForm = document.getElementById('upload-form');
uploadForm.addEventListener('submit', async event => {
  event.preventDefault();
  const button = document.getElementById('upload');
  const shown = document.getElementById('upload-state');
  button.disabled = true;
  shown.className = '';
  shown.textContent = 'uploading to the bucket';
  try {
    await sendToBucket(uploadForm);
    shown.textContent = 'received';
    uploadForm.reset();
    refresh();
  } catch (error) {
    shown.className = 'error';
    shown.textContent = String(error.message || error);
  } finally {
    button.disabled = false;
  }
});
"""

LIVE_SCRIPT = """
let version = null;
async function poll() {
  const response = await fetch('/api/board');
  if (!response.ok) return;
  const board = await response.json();
  if (version !== null && board.version !== version) {
    const frame = document.getElementById('board');
    frame.src = frame.src.split('?')[0] + '?v=' + board.version;
  }
  version = board.version;
  document.getElementById('scored').textContent = board.scored;
}
poll(); setInterval(poll, 1000);
"""

STATIC = {
    "service.css": ("text/css", STYLE),
    "team.js": ("text/javascript", TEAM_SCRIPT),
    "live.js": ("text/javascript", LIVE_SCRIPT),
    "upload.js": ("text/javascript", UPLOAD_SCRIPT),
}


def _page(title: str, body: str, scripts: Sequence[str] = ()) -> str:
    # An empty icon: the browser then asks for no /favicon.ico (a 404 in its console otherwise).
    tags = "".join(f'<script src="/static/{name}" defer></script>' for name in scripts)
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}'
        f'</title><link rel="icon" href="data:,"><link rel="stylesheet" href="/static/service.css">'
        f"{tags}</head><body>{body}</body></html>"
    )


def home(competition: Competition) -> str:
    rows = "".join(
        f"<tr><td>{escape(name)}</td><td>{escape(spec.family)}</td>"
        f"<td>{'permanent' if spec.permanent else escape(spec.round)}</td>"
        f'<td><a href="/bundles/{spec.bundle_id}.zip">{spec.bundle_id[:16]}…</a></td></tr>'
        for name, spec in competition.datasets.items()
    )
    return _page(
        competition.name,
        (
            f"<h1>{escape(competition.name)}</h1>"
            "<table><caption>Public bundles (zip of the zarr group; named by the SHA-256 of its "
            "arrays)</caption><tr><th scope=col>dataset</th><th scope=col>family</th>"
            "<th scope=col>round</th>"
            f"<th scope=col>bundle</th></tr>{rows}</table>"
            '<p><a href="/live">Live leaderboard</a></p>'
            '<form method="post" action="/login"><label>Team token '
            '<input type="password" name="token" id="token" autocomplete="off" required></label> '
            '<button type="submit" id="login">Log in</button></form>'
        ),
    )


def _shown(released: str | None) -> str:
    """The released view in a few words: its public score (a pick result released before
    traces were split: its F1s)."""
    if not released:
        return ""
    view = json.loads(released)
    if view.get("family") == "picks" and "public_score" not in view:
        return ", ".join(
            f"{name.removesuffix('_f1')} F1 {'–' if value is None else format(value, 'g')}"
            for name, value in view["scores"].items()
        )
    best = view.get("public_score")
    return "" if best is None else f"public score {best:g}"


def receipt_path(ident: str) -> str:
    """Where a team downloads the signed receipt of its scored submission `ident`."""
    return f"/api/submissions/{ident}/receipt"


def submission_view(row: Mapping[str, Any]) -> dict[str, Any]:
    """A team's view of its submission (JSON): no path, no raw result; `receipt` the URL of its
    signed receipt once scored (else None)."""
    return {
        "id": row["id"],
        "dataset": row["dataset"],
        "model": row["model"],
        "state": row["state"],
        "message": row["message"],
        "final": bool(row["final"]),
        "sha256": row["sha256"],
        "size": row["size"],
        "created": dt.datetime.fromtimestamp(row["created_s"], dt.UTC).isoformat(
            timespec="seconds"
        ),
        "released": json.loads(row["released"]) if row["released"] else None,
        "shown": _shown(row["released"]),
        "receipt": receipt_path(row["id"]) if row["state"] == SCORED else None,
    }


def _receipt_cell(view: Mapping[str, Any]) -> str:
    if not view["receipt"]:
        return "<td></td>"
    return (
        f'<td><a class="receipt" href="{escape(view["receipt"])}" '
        f'download="receipt-{escape(view["id"])}.json">receipt</a></td>'
    )


def team_page(
    competition: Competition,
    team: str,
    csrf: str,
    rows: Sequence[Mapping[str, Any]],
    error: str = "",
) -> str:
    """A team's page: the upload form (straight to the bucket when the competition has one:
    `UPLOAD_SCRIPT`) and its submissions, followed without a reload (`TEAM_SCRIPT`)."""
    options = "".join(
        f'<option value="{escape(n)}">{escape(n)}</option>' for n in competition.datasets
    )
    table = "".join(
        f'<tr data-id="{escape(v["id"])}"><td>{escape(v["id"])}</td><td>{escape(v["dataset"])}'
        f'</td><td>{escape(v["model"])}</td><td class="state-{escape(v["state"])}">'
        f"{escape(v['state'])}</td><td>{escape(v['shown'])}</td><td>{escape(v['message'])}</td>"
        f"{_receipt_cell(v)}</tr>"
        for v in map(submission_view, rows)
    )
    shown_error = f'<p class="error" id="error">{escape(error)}</p>' if error else ""
    return _page(
        f"{team} · {competition.name}",
        (
            f"<h1>{escape(team)}</h1>{shown_error}"
            '<form method="post" action="/team/upload" enctype="multipart/form-data" '
            'id="upload-form">'
            f'<input type="hidden" name="csrf" value="{escape(csrf)}">'
            f'<label>Dataset <select name="dataset">{options}</select></label> '
            '<label>Model <input name="model" id="model" maxlength="200" required></label> '
            "<label>Submission (.zip or .npz; a pick table .csv or .parquet) "
            '<input type="file" name="file" id="file" required>'
            '</label> <button type="submit" id="upload">Upload</button> '
            '<span id="upload-state" role="status"></span></form>'
            "<table><caption>Your submissions</caption><thead><tr><th scope=col>id</th>"
            "<th scope=col>dataset</th><th scope=col>model</th><th scope=col>state</th>"
            "<th scope=col>released</th><th scope=col>message</th>"
            "<th scope=col>receipt</th></tr></thead>"
            f'<tbody id="submissions">{table}</tbody></table>'
            '<p><a href="/live">Live leaderboard</a></p>'
            f'<form method="post" action="/logout"><input type="hidden" name="csrf" '
            f'value="{escape(csrf)}"><button type="submit">Log out</button></form>'
        ),
        scripts=["team.js", "upload.js"] if competition.uploads else ["team.js"],
    )


def live_page(competition: Competition) -> str:
    return _page(
        f"Leaderboard · {competition.name}",
        (
            f"<h1>{escape(competition.name)}: leaderboard</h1>"
            '<p>Scored submissions: <span id="scored">…</span> (this page follows new scores)</p>'
            '<iframe id="board" title="leaderboard" src="/board/index.html"></iframe>'
        ),
        scripts=["live.js"],
    )


def message_page(title: str, message: str) -> str:
    return _page(
        title,
        f'<h1>{escape(title)}</h1><p class="error" id="error">{escape(message)}'
        '</p><p><a href="/">Back</a></p>',
    )
