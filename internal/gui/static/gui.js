// meshnames GUI: a token for the API when it asks for one, live updates,
// and a keyboard shortcut. The pages work without it, reloaded by hand.
(function () {
  "use strict";
  var TOKEN_KEY = "meshnames-token";
  // After a change the page is fetched at once, and once more a little
  // later: the controllers write the status of a new service, and the DNS
  // server rebuilds its table, a moment after the change that woke us.
  var TRAILING_MS = 700;

  function token() {
    try { return sessionStorage.getItem(TOKEN_KEY); } catch (e) { return null; }
  }
  function authHeaders() {
    var t = token();
    return t ? { "Authorization": "Bearer " + t } : {};
  }

  // Every htmx request (navigation, search, live refresh) carries the token.
  document.addEventListener("htmx:configRequest", function (e) {
    var t = token();
    if (t) { e.detail.headers["Authorization"] = "Bearer " + t; }
  });
  document.addEventListener("htmx:responseError", function (e) {
    var xhr = e.detail.xhr;
    if (xhr && (xhr.status === 401 || xhr.status === 403)) { askToken(reasonOf(xhr.responseText)); }
  });

  // reasonOf is the detail of the API's JSON error body, if it is one.
  function reasonOf(body) {
    try { return JSON.parse(body).detail || ""; } catch (e) { return ""; }
  }

  // ---- the token dialog ----
  var tokenWaiters = [];
  function askToken(reason) {
    var d = document.getElementById("token-dialog");
    if (!d || d.open) { return; }
    var why = document.getElementById("token-reason");
    if (why && reason) { why.textContent = "The API refused the request: " + reason + ". The token is kept in this tab only (sessionStorage) and sent as Authorization: Bearer."; }
    var input = document.getElementById("token-input");
    input.value = "";
    d.showModal();
    input.focus();
  }
  function tokenGiven() {
    var w = tokenWaiters;
    tokenWaiters = [];
    w.forEach(function (f) { f(); });
  }
  function waitForToken() {
    return new Promise(function (resolve) { tokenWaiters.push(resolve); });
  }
  document.addEventListener("close", function (e) {
    if (!e.target || e.target.id !== "token-dialog") { return; }
    var d = e.target;
    if (d.returnValue !== "ok") { return; }
    var v = document.getElementById("token-input").value.trim();
    if (!v) { return; }
    try { sessionStorage.setItem(TOKEN_KEY, v); } catch (err) { /* private mode: kept for no one */ }
    tokenGiven();
    reloadPage();
  }, true);
  document.addEventListener("click", function (e) {
    if (e.target && e.target.id === "prompt-open") { askToken(); }
  });

  // reloadPage fetches the whole page again with the token and swaps the body.
  function reloadPage() {
    if (!window.htmx) { location.reload(); return; }
    // As a boosted link does: the response is a whole page, whose body
    // replaces this one's.
    htmx.ajax("GET", location.pathname + location.search, { target: "body", swap: "innerHTML" });
  }

  // ---- live updates ----
  function setState(text) {
    var el = document.getElementById("live-state");
    if (el && el.textContent !== text) { el.textContent = text; }
  }
  function liveRegion() {
    var el = document.getElementById("live");
    return el && el.getAttribute("data-live") === "true" ? el : null;
  }
  function sleep(ms) { return new Promise(function (r) { setTimeout(r, ms); }); }

  var refreshing = null;
  var refreshedAt = Date.now();
  // refresh fetches the current page and swaps its live region, keeping
  // the focus and the open <details> where they were.
  function refresh() {
    if (refreshing) { return refreshing; }
    if (!window.htmx || !liveRegion()) { return Promise.resolve(); }
    refreshedAt = Date.now();
    var keep = remember();
    refreshing = htmx.ajax("GET", location.pathname + location.search, { target: "#live", select: "#live", swap: "outerHTML" })
      .then(function () { restore(keep); })
      .catch(function () {})
      .then(function () {
        refreshing = null;
        var live = document.getElementById("live");
        var rev = document.getElementById("revision");
        if (live && rev) { rev.textContent = live.getAttribute("data-revision"); }
      });
    return refreshing;
  }
  function remember() {
    var live = document.getElementById("live");
    var a = document.activeElement;
    var keep = { open: [], focus: null };
    if (!live) { return keep; }
    live.querySelectorAll("details[open][id]").forEach(function (d) { keep.open.push(d.id); });
    if (a && live.contains(a) && a !== live) {
      keep.focus = { id: a.id, href: a.getAttribute("href"), text: a.textContent };
    }
    return keep;
  }
  function restore(keep) {
    keep.open.forEach(function (id) {
      var d = document.getElementById(id);
      if (d) { d.open = true; }
    });
    if (!keep.focus) { return; }
    var live = document.getElementById("live");
    var el = keep.focus.id ? document.getElementById(keep.focus.id) : null;
    if (!el && live && keep.focus.href) {
      var cands = live.querySelectorAll("a[href]");
      for (var i = 0; i < cands.length; i++) {
        if (cands[i].getAttribute("href") === keep.focus.href && cands[i].textContent === keep.focus.text) { el = cands[i]; break; }
      }
    }
    if (el) { el.focus({ preventScroll: true }); }
  }

  var poll = null; // the AbortController of the long poll in flight
  var trailing = null;
  async function loop() {
    for (;;) {
      var live = liveRegion();
      if (!live) { setState(""); await sleep(1000); continue; }
      var rev = live.getAttribute("data-revision");
      poll = new AbortController();
      var res;
      try {
        res = await fetch("/gui/_wait?rev=" + encodeURIComponent(rev), { headers: authHeaders(), cache: "no-store", signal: poll.signal });
      } catch (e) {
        if (poll.signal.aborted) { continue; } // the page changed
        setState("offline: retrying");
        await sleep(2000);
        continue;
      }
      if (res.status === 401 || res.status === 403) {
        setState("paused: token required");
        askToken(reasonOf(await res.text()));
        await waitForToken();
        continue;
      }
      if (!res.ok) { setState("offline: retrying"); await sleep(2000); continue; }
      var body = await res.json();
      setState("updates live");
      var current = liveRegion();
      if (!current || body.revision <= Number(current.getAttribute("data-revision"))) { continue; }
      await refresh();
      if (trailing) { clearTimeout(trailing); }
      trailing = setTimeout(function () { trailing = null; refresh(); }, TRAILING_MS);
    }
  }
  // A new page (navigation, back) starts a new poll from its revision.
  document.addEventListener("htmx:afterSettle", function (e) {
    if (e.detail && e.detail.target === document.body) {
      refreshedAt = Date.now();
      if (poll) { poll.abort(); }
    }
  });
  // Figures that change without a store revision (the zones' sync
  // insights): a page whose live region says data-every="N" is fetched
  // again every N seconds while it is visible.
  setInterval(function () {
    var live = liveRegion();
    var every = live ? Number(live.getAttribute("data-every")) : 0;
    if (!every || document.visibilityState === "hidden" || Date.now() - refreshedAt < every * 1000) { return; }
    refresh();
  }, 500);
  document.addEventListener("htmx:historyRestore", function () { if (poll) { poll.abort(); } });

  // ---- keyboard ----
  // "/" focuses the page's search box, as on many sites.
  document.addEventListener("keydown", function (e) {
    if (e.key !== "/" || e.ctrlKey || e.metaKey || e.altKey) { return; }
    var t = e.target;
    if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable)) { return; }
    var box = document.querySelector("[data-shortcut='/']");
    if (box) { e.preventDefault(); box.focus(); box.select(); }
  });

  var prompt = document.getElementById("prompt-message");
  if (prompt) { askToken(prompt.textContent); }
  loop();
})();
