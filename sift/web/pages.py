"""Server-rendered HTML: the dashboard and the judging page.

Every piece of text that comes from Kafka (document titles and text, profile and
document names, reasons) goes through :func:`esc`; attributes are always quoted.
The script (``/static/app.js``) then keeps the pages live.
"""

from __future__ import annotations

import hashlib
import html
import time
from typing import Any
from urllib.parse import quote

from sift.web.assets import CSS, JS

#: the assets' URLs carry a digest of their content, so a browser holding an older
#: script or style sheet fetches the new one after an upgrade (it was a constant "1")
ASSET_VERSION = hashlib.sha256((CSS + JS).encode()).hexdigest()[:12]


def esc(value: Any) -> str:
    """HTML-escape any value for text or a double-quoted attribute.

    >>> esc('<img src=x onerror="alert(1)">')
    '&lt;img src=x onerror=&quot;alert(1)&quot;&gt;'
    """
    return html.escape("" if value is None else str(value), quote=True)


def fmt(value: Any, digits: int | None = None) -> str:
    """A number for a table cell (``–`` when unknown), escaped."""
    if value is None:
        return "–"
    if digits is not None and isinstance(value, int | float):
        return f"{value:.{digits}f}"
    return esc(value)


def ago(ts: float | None, now: float | None = None) -> str:
    """``12 s ago`` style age of a timestamp."""
    if not ts:
        return "–"
    s = max(0.0, (time.time() if now is None else now) - ts)
    if s < 60:
        return f"{round(s)} s ago"
    if s < 3600:
        return f"{round(s / 60)} min ago"
    return f"{round(s / 3600)} h ago"


def layout(title: str, body: str, *, page: str, data: dict[str, str] | None = None) -> str:
    attrs = "".join(f' data-{k}="{esc(v)}"' for k, v in (data or {}).items())
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)} · sift</title>
<link rel="stylesheet" href="/static/app.css?v={ASSET_VERSION}">
<script src="/static/app.js?v={ASSET_VERSION}" defer></script>
</head>
<body data-page="{esc(page)}"{attrs}>
<header>
  <span class="brand">sift</span>
  <a href="/">Dashboard</a>
  <a href="/api/openapi.json">API</a>
  <a href="/metrics">Metrics</a>
  <span class="spacer"></span>
  <form id="token-form" autocomplete="off">
    <label for="token">API token</label>
    <input id="token" type="password" placeholder="paste to judge">
    <button type="submit">Set</button>
    <span id="token-state" class="muted"></span>
  </form>
</header>
<main>
{body}
</main>
</body>
</html>
"""


PROFILE_COLUMNS = (("delivered", None, "Delivered"), ("judged", None, "Judged"),
                   ("pending", None, "Pending"), ("precision", 3, "Precision"),
                   ("threshold", 4, "Threshold"), ("model_version", None, "Model version"),
                   ("last_update", "ago", "Last update"))


def bagged(p: dict[str, Any]) -> str:
    """`` x B`` after a bagged profile's model (its score and threshold are margins)."""
    bags = p.get("bags")
    return f" &times; {bags}" if isinstance(bags, int) and bags > 1 else ""


def profile_row(p: dict[str, Any], now: float) -> str:
    cells = [f'<td><a href="/judge/{esc(quote(p["profile"], safe=""))}">{esc(p["profile"])}'
             f'</a></td>', f'<td class="model">{fmt(p.get("model"))}{bagged(p)}</td>']
    for key, digits, _ in PROFILE_COLUMNS:
        text = ago(p.get(key), now) if digits == "ago" else fmt(
            p.get(key), digits if isinstance(digits, int) else None)
        cells.append(f'<td data-field="{key}">{text}</td>')
    return f'<tr data-profile="{esc(p["profile"])}">' + "".join(cells) + "</tr>"


def review_row(r: dict[str, Any]) -> str:
    stop = '<td class="stop-yes">STOP</td>' if r.get("stop") else '<td class="muted">continue</td>'
    link = f'<a href="/judge/{esc(quote(r["review"], safe=""))}">{esc(r["review"])}</a>'
    return (f'<tr data-review="{esc(r["review"])}"><td>{link}</td>'
            f'<td>{fmt(r.get("screened"), 0)}</td><td>{fmt(r.get("found"), 0)}</td>'
            f'<td>{fmt(r.get("r_hat"), 1)}</td><td>{fmt(r.get("recall"), 3)}</td>'
            f'<td>{fmt(r.get("pending"))}</td>{stop}</tr>')


def catching_up(s: dict[str, Any]) -> str:
    """The dashboard's line while sift web reads what the topics held at its start."""
    behind = s.get("behind")
    left = "" if behind is None else f": {fmt(behind)} messages to go"
    return f"Still reading the topics{left}; profiles not read yet are not listed."


def dashboard(s: dict[str, Any]) -> str:
    """The live dashboard, rendered from a :meth:`WebState.snapshot`."""
    now = s["ts"]
    rates, totals = s["rates"], s["totals"]
    rows = "\n".join(profile_row(p, now) for p in s["profiles"])
    reviews = "\n".join(review_row(r) for r in s["reviews"])
    reasons = " · ".join(f"{esc(k)} {v}" for k, v in sorted(s["dead_letters_by_reason"].items()))
    lag = " · ".join(f"{esc(k)} {v}" for k, v in sorted(s["lag"].items())) or (
        f"unknown: {esc(s['lag_error'])}" if s.get("lag_error") else "")
    heads = "".join(f"<th>{esc(label)}</th>" for _, _, label in PROFILE_COLUMNS)
    body = f"""
<h1>Dashboard <span class="muted help">updated <span id="updated">{
        esc(time.strftime('%H:%M:%S', time.localtime(now)))}</span></span></h1>
<section class="cards">
  <div class="card"><div class="k">documents / s</div><div class="v" id="rate-documents">{
        fmt(rates['documents'], 1)}</div></div>
  <div class="card"><div class="k">decisions / s</div><div class="v" id="rate-decisions">{
        fmt(rates['decisions'], 1)}</div></div>
  <div class="card"><div class="k">judgments / s</div><div class="v" id="rate-judgments">{
        fmt(rates['judgments'], 1)}</div></div>
  <div class="card"><div class="k">documents read</div><div class="v" id="total-documents">{
        fmt(totals['documents'])}</div></div>
  <div class="card"><div class="k">dead letters</div><div class="v" id="total-dead">{
        fmt(totals['dead_letters'])}</div></div>
  <div class="card"><div class="k">consumer lag</div><div class="v" id="lag-total">{
        fmt(s['lag_total'])}</div></div>
</section>
<p class="help" id="catching-up" role="status"{'' if not s.get('caught_up', True) else ' hidden'}>{
        catching_up(s)}</p>
<p class="help">Dead letters by reason: <span id="dead-reasons">{reasons or 'none'}</span>.
Consumer lag of the workers' group by topic: <span id="lag-topics">{lag or 'unknown'}</span>.</p>
<h2>Profiles</h2>
<table id="profiles">
<thead><tr><th>Profile</th><th>Model</th>{heads}</tr></thead>
<tbody>
{rows}
</tbody>
</table>
<p id="no-profiles" class="empty"{' hidden' if s['profiles'] else ''}>No profiles yet:
<code>sift profiles add NAME --query "..."</code></p>
<section id="reviews-section"{'' if s['reviews'] else ' hidden'}>
<h2>Reviews</h2>
<table id="reviews">
<thead><tr><th>Review</th><th>Screened</th><th>Found</th><th>R-hat</th><th>Recall so far</th>
<th>Awaiting judgment</th><th>Stop signal</th></tr></thead>
<tbody>
{reviews}
</tbody>
</table>
</section>
"""
    return layout("Dashboard", body, page="dashboard")


def item_card(it: dict[str, Any]) -> str:
    """One document awaiting judgment (the script builds the same structure)."""
    if it.get("review"):
        meta = f"batch {fmt(it['batch'])} · rank {fmt(it['rank'])} · {esc(it['doc_id'])}"
    else:
        meta = (f"score {fmt(it['score'], 4)} · threshold {fmt(it['threshold'], 4)} · "
                f"model v{fmt(it['model_version'])} · {esc(it['doc_id'])}")
    return (f'<li class="item" data-doc-id="{esc(it["doc_id"])}">'
            f'<h3 class="title">{esc(it["title"] or it["doc_id"])}</h3>'
            f'<p class="snippet">{esc(it["snippet"])}</p>'
            f'<p class="meta">{meta}</p>'
            '<button type="button" class="rel" data-verdict="1">Relevant</button>'
            '<button type="button" class="nrel" data-verdict="0">Not relevant</button></li>')


def judge_page(profile: str, items: list[dict[str, Any]], summary: dict[str, Any] | None,
               *, review: dict[str, Any] | None = None) -> str:
    """The judging page of one profile (its delivered documents awaiting judgment) or,
    with ``review`` (its last status), of a review (the documents it asked to judge)."""
    cards = "\n".join(item_card(it) for it in items)
    stats = ""
    if review is not None:
        stop = " · <strong>stop signal</strong>" if review.get("stop") else ""
        topic = f'<p class="query">{esc(review["query"])}</p>' if review.get("query") else ""
        stats = (f'{topic}<p class="help">Review: screened {fmt(review.get("screened"), 0)} · found '
                 f'{fmt(review.get("found"), 0)} · R-hat {fmt(review.get("r_hat"), 1)} · recall '
                 f'so far {fmt(review.get("recall"), 3)}{stop}</p>')
    elif summary is not None:
        waiting = summary.get("waiting_judgments")
        held = (f' · {fmt(waiting)} judgments wait for the next model update (every '
                f'{esc(str(summary.get("update")))})' if waiting else "")
        stats = (f'<p class="help">Delivered {fmt(summary["delivered"])} · judged '
                 f'{fmt(summary["judged"])} · precision {fmt(summary["precision"], 3)} · '
                 f'threshold {fmt(summary["threshold"], 4)} · model v'
                 f'{fmt(summary["model_version"])}{held}</p>')
    # a standing profile takes a correction of the last verdict (one label per document,
    # its last judgment's); a review keeps its own rule
    change_key = "" if review is not None else ", <kbd>u</kbd> changes the last verdict"
    change_button = "" if review is not None else (
        '\n<button type="button" id="change" hidden></button>')
    body = f"""
<h1>Judge <q>{esc(profile)}</q> <span class="muted help"><span id="count">{len(items)}</span>
awaiting judgment</span></h1>
{stats}
<p class="help">Keys: <kbd>j</kbd>/<kbd>k</kbd> next/previous, <kbd>r</kbd> relevant,
<kbd>n</kbd> not relevant{change_key}. A judged document leaves the queue; new deliveries
appear every two seconds.</p>
<p id="status" role="status"></p>{change_button}
<ol id="queue">
{cards}
</ol>
<p id="empty" class="empty"{' hidden' if items else ''}>Nothing awaiting judgment.</p>
"""
    return layout(f"Judge {profile}", body, page="judge", data={"profile": profile})


def not_found(what: str, title: str = "Not found") -> str:
    return layout(title, f"<h1>{esc(title)}</h1><p>{esc(what)}</p>", page="error")
