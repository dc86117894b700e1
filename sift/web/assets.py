
"""The page's stylesheet and script, served from ``/static`` (no build step, no inline code).

The pages forbid inline scripts and styles (Content-Security-Policy), so a document
whose text slips past the HTML escaping still cannot run code. The script builds
every element from API data with ``textContent``, never ``innerHTML``.
"""

from __future__ import annotations

CSS = """\
:root { --fg: #1d2330; --muted: #5d6677; --line: #dde2ea; --bg: #f6f7f9; --card: #fff;
        --accent: #2457c5; --good: #1f7a3a; --bad: #b3261e; --sel: #fff6d6; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       color: var(--fg); background: var(--bg); }
header { display: flex; gap: 1.5rem; align-items: center; padding: .7rem 1.4rem;
         background: #1d2330; color: #fff; }
header a { color: #cfe0ff; text-decoration: none; }
header .brand { font-weight: 700; letter-spacing: .04em; }
header .spacer { flex: 1; }
header form { display: flex; gap: .4rem; align-items: center; font-size: 13px; }
header input { width: 14rem; padding: .25rem .4rem; border-radius: 4px; border: 0; }
main { padding: 1rem 1.4rem 3rem; max-width: 1200px; margin: 0 auto; }
h1 { font-size: 1.3rem; margin: .4rem 0 1rem; }
h2 { font-size: 1.05rem; margin: 1.6rem 0 .5rem; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr)); gap: .8rem; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px;
        padding: .7rem .9rem; }
.card .v { font-size: 1.5rem; font-weight: 650; font-variant-numeric: tabular-nums; }
.card .k { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .05em; }
table { width: 100%; border-collapse: collapse; background: var(--card);
        border: 1px solid var(--line); border-radius: 8px; overflow: hidden; }
th, td { padding: .4rem .6rem; border-bottom: 1px solid var(--line); text-align: right;
         font-variant-numeric: tabular-nums; white-space: nowrap; }
th { background: #eef1f5; font-size: 12px; text-transform: uppercase; letter-spacing: .04em;
     color: var(--muted); }
th:first-child, td:first-child { text-align: left; }
td.changed { animation: flash 1.2s ease-out; }
@keyframes flash { from { background: var(--sel); } to { background: transparent; } }
.stop-yes { color: var(--good); font-weight: 700; }
.muted { color: var(--muted); }
.help { color: var(--muted); font-size: 13px; }
kbd { border: 1px solid var(--line); border-bottom-width: 2px; border-radius: 3px;
      padding: 0 .3rem; background: #fff; font-size: 12px; }
#queue { list-style: none; padding: 0; margin: 0; }
.item { background: var(--card); border: 1px solid var(--line); border-radius: 8px;
        padding: .8rem 1rem; margin: 0 0 .7rem; }
.item.selected { border-color: var(--accent); box-shadow: 0 0 0 2px #c9d8f7; background: #fbfcff; }
.item h3 { margin: 0 0 .3rem; font-size: 1rem; }
.item .snippet { margin: 0 0 .5rem; overflow-wrap: anywhere; }
.item .meta { color: var(--muted); font-size: 12px; margin: 0 0 .5rem; }
.item button { font: inherit; padding: .3rem .9rem; border-radius: 5px; border: 1px solid;
               cursor: pointer; margin-right: .4rem; }
button.rel { color: #fff; background: var(--good); border-color: var(--good); }
button.nrel { color: #fff; background: var(--bad); border-color: var(--bad); }
#status { min-height: 1.4em; font-size: 13px; }
#status.error { color: var(--bad); font-weight: 600; }
#change { margin: 0 0 .6rem; }
.empty { color: var(--muted); padding: 1.5rem; text-align: center; background: var(--card);
         border: 1px dashed var(--line); border-radius: 8px; }
"""

JS = r"""
'use strict';
(function () {
  const KEY = 'sift-token';

  function readToken() {
    const m = location.hash.match(/token=([^&]+)/);
    if (m) {
      // a malformed escape (a hand-edited link) threw URIError before the page started
      let token = m[1];
      try { token = decodeURIComponent(token); } catch (e) { /* keep it as written */ }
      sessionStorage.setItem(KEY, token);
      history.replaceState(null, '', location.pathname + location.search);
    }
    return sessionStorage.getItem(KEY) || '';
  }

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function fmt(v, digits) {
    if (v === null || v === undefined) return '–';
    if (typeof v === 'number') return digits === undefined ? String(v) : v.toFixed(digits);
    return String(v);
  }

  function ago(ts) {
    if (!ts) return '–';
    const s = Math.max(0, Date.now() / 1000 - ts);
    if (s < 60) return Math.round(s) + ' s ago';
    if (s < 3600) return Math.round(s / 60) + ' min ago';
    return Math.round(s / 3600) + ' h ago';
  }

  function setupTokenForm() {
    const form = document.getElementById('token-form');
    const input = document.getElementById('token');
    const state = document.getElementById('token-state');
    if (!form) return;
    const show = () => { state.textContent = readToken() ? 'token set' : 'no token'; };
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      sessionStorage.setItem(KEY, input.value.trim());
      input.value = '';
      show();
    });
    show();
  }

  // ------------------------------------------------------------------ dashboard
  const PROFILE_FIELDS = [
    ['delivered'], ['judged'], ['pending'], ['precision', 3], ['threshold', 4],
    ['model_version'], ['last_update', 'ago'],
  ];

  function setCell(td, text) {
    if (td.textContent !== text) {
      td.textContent = text;
      td.classList.remove('changed');
      void td.offsetWidth;
      td.classList.add('changed');
    }
  }

  function renderDashboard(s) {
    const set = (id, text) => { const e = document.getElementById(id); if (e) setCell(e, text); };
    set('rate-documents', fmt(s.rates.documents, 1));
    set('rate-decisions', fmt(s.rates.decisions, 1));
    set('rate-judgments', fmt(s.rates.judgments, 1));
    set('total-dead', fmt(s.totals.dead_letters));
    set('lag-total', fmt(s.lag_total));
    set('total-documents', fmt(s.totals.documents));
    const body = document.querySelector('#profiles tbody');
    const seen = new Set();
    for (const p of s.profiles) {
      seen.add(p.profile);
      let tr = body.querySelector('tr[data-profile="' + CSS.escape(p.profile) + '"]');
      if (!tr) {
        tr = el('tr');
        tr.dataset.profile = p.profile;
        const name = el('td');
        const a = el('a', null, p.profile);
        a.href = '/judge/' + encodeURIComponent(p.profile);
        name.appendChild(a);
        tr.appendChild(name);
        tr.appendChild(el('td', 'model'));
        for (const [f] of PROFILE_FIELDS) { const td = el('td'); td.dataset.field = f; tr.appendChild(td); }
        body.appendChild(tr);
      }
      tr.querySelector('td.model').textContent = fmt(p.model) + (p.bags > 1 ? ' \u00d7 ' + p.bags : '');
      for (const [f, d] of PROFILE_FIELDS) {
        const td = tr.querySelector('td[data-field="' + f + '"]');
        setCell(td, d === 'ago' ? ago(p[f]) : fmt(p[f], d));
      }
    }
    for (const tr of Array.from(body.querySelectorAll('tr[data-profile]'))) {
      if (!seen.has(tr.dataset.profile)) tr.remove();
    }
    const empty = document.getElementById('no-profiles');
    if (empty) empty.hidden = s.profiles.length > 0;
    const rbody = document.querySelector('#reviews tbody');
    if (rbody) {
      rbody.replaceChildren();
      for (const r of s.reviews) {
        const tr = el('tr');
        tr.dataset.review = r.review;
        const name = el('td');
        const a = el('a', null, r.review);
        a.href = '/judge/' + encodeURIComponent(r.review);
        name.appendChild(a);
        tr.appendChild(name);
        tr.appendChild(el('td', null, fmt(r.screened)));
        tr.appendChild(el('td', null, fmt(r.found)));
        tr.appendChild(el('td', null, fmt(r.r_hat, 1)));
        tr.appendChild(el('td', null, fmt(r.recall, 3)));
        tr.appendChild(el('td', null, fmt(r.pending)));
        tr.appendChild(el('td', r.stop ? 'stop-yes' : 'muted', r.stop ? 'STOP' : 'continue'));
        rbody.appendChild(tr);
      }
      document.getElementById('reviews-section').hidden = s.reviews.length === 0;
    }
    const dl = document.getElementById('dead-reasons');
    if (dl) {
      const parts = Object.entries(s.dead_letters_by_reason).map(([k, v]) => k + ' ' + v);
      dl.textContent = parts.length ? parts.join(' · ') : 'none';
    }
    const lag = document.getElementById('lag-topics');
    if (lag) {
      const parts = Object.entries(s.lag).map(([k, v]) => k + ' ' + v);
      lag.textContent = parts.length ? parts.join(' · ')
        : (s.lag_error ? 'unknown: ' + s.lag_error : 'unknown');
    }
    const cu = document.getElementById('catching-up');
    if (cu) {
      cu.hidden = s.caught_up !== false;
      cu.textContent = 'Still reading the topics' + (s.behind == null ? ''
        : ': ' + fmt(s.behind) + ' messages to go') + '; profiles not read yet are not listed.';
    }
    const upd = document.getElementById('updated');
    if (upd) upd.textContent = new Date(s.ts * 1000).toLocaleTimeString();
  }

  function startDashboard() {
    let polling = null;
    const poll = async () => {
      try {
        const r = await fetch('/api/stats');
        if (r.ok) renderDashboard(await r.json());
      } catch (e) { /* next time */ }
    };
    if (window.EventSource) {
      const es = new EventSource('/api/events');
      es.addEventListener('stats', (ev) => renderDashboard(JSON.parse(ev.data)));
      es.onerror = () => { if (!polling) polling = setInterval(poll, 2000); };
      es.onopen = () => { if (polling) { clearInterval(polling); polling = null; } };
    } else {
      polling = setInterval(poll, 2000);
    }
    poll();
  }

  // ------------------------------------------------------------------ judging page
  function startJudge() {
    const profile = document.body.dataset.profile;
    const queue = document.getElementById('queue');
    const status = document.getElementById('status');
    const empty = document.getElementById('empty');
    const done = new Set();
    const change = document.getElementById('change');
    let selected = null;
    // the last verdict this page saw for a document (saved here, or found stored on a
    // 409), which the change button (key u) corrects to the other label: a standing
    // profile keeps one label per document, its last judgment's
    let last = null;
    // a judgment carries the epoch of the delivery shown (the profile's life: one deleted
    // and created again, or reset, while the page is open refuses it; the server no
    // longer knows the old life then)
    const epochOf = (epoch) => (epoch ? {profile_epoch: epoch} : {});
    const offer = (docId, relevant, epoch) => {
      if (!change) return;
      last = {docId: docId, relevant: relevant, epoch: epoch};
      change.textContent = 'Change ' + docId + ' to ' + (relevant ? 'not relevant' : 'relevant');
      change.hidden = false;
    };

    const say = (text, error) => { status.textContent = text; status.className = error ? 'error' : ''; };
    const items = () => Array.from(queue.querySelectorAll('li.item'));
    const select = (li) => {
      if (selected) selected.classList.remove('selected');
      selected = li || null;
      if (selected) { selected.classList.add('selected'); selected.scrollIntoView({block: 'nearest'}); }
    };
    const refreshEmpty = () => {
      empty.hidden = items().length > 0;
      const n = document.getElementById('count');
      if (n) n.textContent = String(items().length);
      if (!selected || !selected.isConnected) select(items()[0]);
    };

    function card(it) {
      const li = el('li', 'item');
      li.dataset.docId = it.doc_id;
      li.dataset.epoch = it.profile_epoch || '';
      li.appendChild(el('h3', 'title', it.title || it.doc_id));
      li.appendChild(el('p', 'snippet', it.snippet));
      li.appendChild(el('p', 'meta', it.review
        ? 'batch ' + fmt(it.batch) + ' · rank ' + fmt(it.rank) + ' · ' + it.doc_id
        : 'score ' + fmt(it.score, 4) + ' · threshold ' + fmt(it.threshold, 4) +
          ' · model v' + it.model_version + ' · ' + it.doc_id));
      const r = el('button', 'rel', 'Relevant'); r.type = 'button'; r.dataset.verdict = '1';
      const n = el('button', 'nrel', 'Not relevant'); n.type = 'button'; n.dataset.verdict = '0';
      li.appendChild(r); li.appendChild(n);
      return li;
    }

    async function judge(li, relevant) {
      if (!li || li.dataset.busy) return;
      li.dataset.busy = '1';
      const docId = li.dataset.docId;
      try {
        const r = await fetch('/api/judgments', {
          method: 'POST',
          headers: {'Content-Type': 'application/json', 'Authorization': 'Bearer ' + readToken()},
          body: JSON.stringify({doc_id: docId, profile: profile, relevant: relevant,
                                ...epochOf(li.dataset.epoch)}),
        });
        const drop = () => {
          done.add(docId);
          const next = li.nextElementSibling || li.previousElementSibling;
          li.remove();
          if (selected === li) select(next);
          refreshEmpty();
        };
        if (r.status === 202) {
          drop();
          say((relevant ? 'Relevant: ' : 'Not relevant: ') + docId);
          offer(docId, relevant, li.dataset.epoch);
        } else if (r.status === 409) {
          // judged already (by someone else, maybe the other way): the verdict that
          // counts is the stored one, not this click's
          let body = {};
          try { body = await r.json(); } catch (e) { /* keep */ }
          if (typeof body.relevant === 'boolean') {
            drop();
            const stored = body.relevant ? 'relevant' : 'not relevant';
            say('Already judged ' + stored + ': ' + docId +
                (body.relevant === relevant ? '' : ' (your verdict was not saved)'),
                body.relevant !== relevant);
            offer(docId, body.relevant, li.dataset.epoch);
          } else {
            say('Not saved: ' + (body.error || 'HTTP 409'), true);
          }
        } else {
          let msg = 'HTTP ' + r.status;
          try { msg = (await r.json()).error || msg; } catch (e) { /* keep */ }
          say(r.status === 401 ? 'Not saved: ' + msg + ' (enter the API token above)' : 'Not saved: ' + msg, true);
        }
      } catch (e) {
        say('Not saved: ' + e, true);
      } finally {
        delete li.dataset.busy;
      }
    }

    async function correct() {
      if (!last || !change || change.hidden || change.dataset.busy) return;
      const fix = {docId: last.docId, relevant: !last.relevant, epoch: last.epoch};
      change.dataset.busy = '1';
      try {
        const r = await fetch('/api/judgments', {
          method: 'POST',
          headers: {'Content-Type': 'application/json', 'Authorization': 'Bearer ' + readToken()},
          body: JSON.stringify({doc_id: fix.docId, profile: profile, relevant: fix.relevant,
                                correct: true, ...epochOf(fix.epoch)}),
        });
        if (r.status === 202) {
          say('Changed to ' + (fix.relevant ? 'relevant: ' : 'not relevant: ') + fix.docId);
          offer(fix.docId, fix.relevant, fix.epoch);
        } else {
          let msg = 'HTTP ' + r.status;
          try { msg = (await r.json()).error || msg; } catch (e) { /* keep */ }
          say('Not changed: ' + msg, true);
        }
      } catch (e) {
        say('Not changed: ' + e, true);
      } finally {
        delete change.dataset.busy;
      }
    }
    if (change) change.addEventListener('click', correct);

    queue.addEventListener('click', (ev) => {
      const b = ev.target.closest('button[data-verdict]');
      const li = ev.target.closest('li.item');
      if (li) select(li);
      if (b && li) judge(li, b.dataset.verdict === '1');
    });

    document.addEventListener('keydown', (ev) => {
      if (ev.target.closest && ev.target.closest('input, textarea')) return;
      if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
      const list = items();
      const i = list.indexOf(selected);
      if (ev.key === 'j' || ev.key === 'ArrowDown') { select(list[Math.min(i + 1, list.length - 1)]); }
      else if (ev.key === 'k' || ev.key === 'ArrowUp') { select(list[Math.max(i - 1, 0)]); }
      else if (ev.key === 'r' || ev.key === 'y' || ev.key === '1') { judge(selected, true); }
      else if (ev.key === 'n' || ev.key === '0') { judge(selected, false); }
      else if (ev.key === 'u' && change) { correct(); }
      else return;
      ev.preventDefault();
    });

    async function poll() {
      try {
        const r = await fetch('/api/pending?limit=100&profile=' + encodeURIComponent(profile));
        if (!r.ok) return;
        const data = await r.json();
        const want = new Set(data.items.map((it) => it.doc_id));
        for (const li of items()) {
          if (!want.has(li.dataset.docId) && !li.dataset.busy) { li.remove(); }
        }
        const have = new Set(items().map((li) => li.dataset.docId));
        for (const it of data.items) {
          if (!have.has(it.doc_id) && !done.has(it.doc_id)) queue.appendChild(card(it));
        }
        refreshEmpty();
      } catch (e) { /* next time */ }
    }
    refreshEmpty();
    setInterval(poll, 2000);
  }

  document.addEventListener('DOMContentLoaded', () => {
    readToken();
    setupTokenForm();
    if (document.body.dataset.page === 'dashboard') startDashboard();
    if (document.body.dataset.page === 'judge') startJudge();
  });
})();
"""
