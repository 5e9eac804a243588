// Gatehouse dashboard page script (served from the binary; no inline
// script anywhere, so the CSP allows script from 'self' only).
//  - relative times ("5 min ago") kept fresh; the exact time is the title
//  - copy buttons (data-copy)
//  - the approvals page's live list: an EventSource on #queue's data-live,
//    the list swapped in on "queue", an open pane refreshed on "changed"
//  - a banner when the live stream is lost or the session has ended, with
//    "Sign in again" (a new tab); typed text stays on the page, and once
//    the session is back the page picks up the new CSRF token and goes on
//  - keyboard: j/k or arrows move through the list, Enter writes the
//    reason, / searches, [ ] change page, ? shows the keys, Esc leaves a field
(function () {
  'use strict';
  var $ = function (s, r) { return (r || document).querySelector(s); };
  var $$ = function (s, r) { return Array.prototype.slice.call((r || document).querySelectorAll(s)); };

  function rel(t, now) {
    var d = (now - t) / 1000;
    if (d < 45) return 'just now';
    if (d < 3600) return Math.round(d / 60) + ' min ago';
    if (d < 86400) return Math.round(d / 3600) + ' h ago';
    if (d < 14 * 86400) { var n = Math.round(d / 86400); return n === 1 ? '1 day ago' : n + ' days ago'; }
    return new Date(t).toISOString().slice(0, 10);
  }
  function tick() {
    $$('time[data-rel]').forEach(function (el) {
      var t = Date.parse(el.getAttribute('datetime'));
      if (!isNaN(t)) el.textContent = rel(t, Date.now());
    });
  }
  setInterval(tick, 30000);

  function copy(text) {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
    var ta = document.createElement('textarea');
    ta.value = text; ta.setAttribute('readonly', ''); ta.className = 'sr';
    document.body.appendChild(ta); ta.select();
    try { document.execCommand('copy'); } finally { document.body.removeChild(ta); }
    return Promise.resolve();
  }

  function notice(text, isError) {
    var n = $('#notice');
    if (!n) return;
    n.textContent = '';
    var p = document.createElement('p');
    p.className = isError ? 'alert' : 'ok';
    p.setAttribute('role', isError ? 'alert' : 'status');
    p.setAttribute('data-testid', 'notice');
    p.setAttribute('data-kind', isError ? 'error' : 'ok');
    p.textContent = text;
    n.appendChild(p);
  }

  // --- session and live stream

  var banner, signedOut = false, pollTimer = null, es = null, retries = 0, lost = false;

  function showBanner(kind, text) {
    if (!banner) return;
    banner.hidden = false;
    banner.setAttribute('data-kind', kind);
    $('.banner-text', banner).textContent = text;
    $('[data-action=signin]', banner).hidden = kind !== 'signed-out';
    $('[data-action=retry]', banner).hidden = kind !== 'lost';
  }
  function hideBanner() {
    if (!banner) return;
    banner.hidden = true;
    banner.setAttribute('data-kind', '');
  }
  function setCSRF(tok) {
    if (!tok) return;
    document.body.setAttribute('hx-headers', JSON.stringify({ 'X-CSRF-Token': tok }));
    $$('input[name=_csrf]').forEach(function (i) { i.value = tok; });
  }
  // checkSession answers 'ok' (and takes the CSRF token), 'out', or
  // 'down' when the server cannot be reached.
  function checkSession() {
    return fetch('/api/session', { credentials: 'same-origin', cache: 'no-store' }).then(function (r) {
      if (r.status === 200) return r.json().then(function (j) { setCSRF(j.csrf); return 'ok'; });
      return r.status === 401 ? 'out' : 'down';
    }, function () { return 'down'; });
  }
  function onSignedOut() {
    if (signedOut) return;
    signedOut = true;
    closeLive();
    showBanner('signed-out', 'Your session has ended, so this page no longer updates and its buttons would be refused. Sign in again (a new tab opens); what you typed stays here.');
    poll();
  }
  function poll() {
    clearTimeout(pollTimer);
    pollTimer = setTimeout(function () {
      checkSession().then(function (s) {
        if (s !== 'ok') { poll(); return; }
        signedOut = false;
        hideBanner();
        notice('Signed in again: the page is live once more.', false);
        openLive(true);
        refreshPane();
      });
    }, 1500);
  }

  function selected() { var d = $('#detail[data-id]'); return d ? d.getAttribute('data-id') : ''; }
  function mark() {
    var sel = selected();
    $$('#queue [data-row]').forEach(function (li) {
      var on = li.getAttribute('data-id') === sel;
      li.classList.toggle('selected', on);
      var a = $('a', li);
      if (a) { if (on) a.setAttribute('aria-current', 'true'); else a.removeAttribute('aria-current'); }
    });
  }
  function refreshList() {
    var q = $('#queue[data-live]');
    if (!q || !window.htmx) return;
    var query = q.getAttribute('data-query');
    htmx.ajax('GET', '/approvals' + (query ? '?' + query : ''), { target: '#queue', select: '#queue', swap: 'outerHTML' });
  }
  function refreshPane() {
    var id = selected();
    if (id) document.body.dispatchEvent(new Event('gh-changed-' + id));
  }
  function closeLive() { if (es) { es.close(); es = null; } }
  function openLive(refresh) {
    var q = $('#queue[data-live]');
    if (!q || !window.EventSource) return;
    closeLive();
    es = new EventSource(q.getAttribute('data-live'));
    es.addEventListener('open', function () {
      retries = 0;
      if (lost || refresh) { refreshList(); refreshPane(); }
      lost = false; refresh = false;
      if (banner && banner.getAttribute('data-kind') === 'lost') hideBanner();
    });
    es.addEventListener('queue', function (ev) {
      var box = $('#queue');
      if (box && window.htmx) { htmx.swap(box, ev.data, { swapStyle: 'innerHTML' }); mark(); }
    });
    es.addEventListener('changed', function (ev) { document.body.dispatchEvent(new Event('gh-changed-' + ev.data)); });
    es.onerror = function () {
      if (signedOut) return;
      lost = true;
      showBanner('lost', 'Live updates are lost: reconnecting… What you typed stays here.');
      var closed = es && es.readyState === EventSource.CLOSED;
      checkSession().then(function (s) {
        if (s === 'out') { onSignedOut(); return; }
        if (closed) setTimeout(function () { openLive(true); }, Math.min(30000, 1000 * Math.pow(2, retries++)));
      });
    };
  }

  // --- keyboard

  function move(d) {
    var rows = $$('#queue [data-row]');
    if (!rows.length) return;
    var sel = selected();
    var i = rows.findIndex(function (r) { return r.getAttribute('data-id') === sel; });
    i = i < 0 ? (d > 0 ? 0 : rows.length - 1) : Math.max(0, Math.min(rows.length - 1, i + d));
    var a = $('a', rows[i]);
    if (a) { a.focus(); a.click(); }
  }
  function toggleKeys(force) {
    var k = $('#keys'), b = $('[data-action=keys]');
    if (!k) return;
    k.hidden = force === undefined ? !k.hidden : !force;
    if (b) b.setAttribute('aria-expanded', String(!k.hidden));
  }
  function onKey(e) {
    if (e.ctrlKey || e.metaKey || e.altKey || !$('#queue')) return;
    var t = e.target;
    var typing = t.closest && t.closest('input, textarea, select, [contenteditable]');
    if (e.key === 'Escape') { if (typing) t.blur(); toggleKeys(false); return; }
    if (typing) return;
    var reason;
    switch (e.key) {
      case 'j': case 'ArrowDown': move(1); break;
      case 'k': case 'ArrowUp': move(-1); break;
      case '/': var s = $('[data-key=search]'); if (s) s.focus(); break;
      case 'Enter':
        if (t.closest && t.closest('a, button')) return;
        reason = $('#detail [data-key=reason]');
        if (reason) reason.focus(); else return;
        break;
      case '[': var p = $('[data-key=prev-page]'); if (p) p.click(); else return; break;
      case ']': var n = $('[data-key=next-page]'); if (n) n.click(); else return; break;
      case '?': toggleKeys(); break;
      default: return;
    }
    e.preventDefault();
  }

  function init() {
    banner = $('#banner');
    tick();
    document.addEventListener('keydown', onKey);
    document.addEventListener('click', function (e) {
      var b = e.target.closest && e.target.closest('button.copy');
      if (b) {
        copy(b.getAttribute('data-copy')).then(function () {
          b.textContent = 'Copied';
          setTimeout(function () { b.textContent = 'Copy'; }, 1500);
        });
        return;
      }
      if (e.target.closest && e.target.closest('#notice')) { $('#notice').textContent = ''; return; }
      if (e.target.closest && e.target.closest('[data-action=keys]')) toggleKeys();
      if (e.target.closest && e.target.closest('[data-action=retry]')) { checkSession().then(function (s) { if (s === 'out') onSignedOut(); else openLive(true); }); }
      if (e.target.closest && e.target.closest('[data-action=signin]')) poll();
    });
    document.body.addEventListener('htmx:responseError', function (e) {
      var x = e.detail.xhr;
      if (x.status === 401) { onSignedOut(); return; }
      notice(x.responseText || ('The server answered ' + x.status + '.'), true);
    });
    document.body.addEventListener('htmx:sendError', function () {
      lost = true;
      showBanner('lost', 'The server cannot be reached. What you typed stays here; try again when it is back.');
    });
    document.body.addEventListener('htmx:afterSwap', function (e) {
      tick();
      if (e.detail.target && e.detail.target.id === 'detail' || e.target && e.target.id === 'detail') {
        mark();
        var d = $('#detail');
        if (d && window.matchMedia('(max-width: 900px)').matches && !d.classList.contains('empty')) d.scrollIntoView({ block: 'start' });
      }
    });
    var mf = $('details.more-filters');
    if (mf && !mf.getAttribute('data-active') && window.matchMedia('(max-width: 600px)').matches) mf.open = false;
    mark();
    openLive(false);
    var d = $('#detail[data-id]');
    if (d && window.matchMedia('(max-width: 900px)').matches && location.search.indexOf('sel=') >= 0) d.scrollIntoView({ block: 'start' });
  }
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init); else init();
})();
