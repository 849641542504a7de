// The codemode console: polls /api/console with the token typed once, writes text only.
"use strict";
(function () {
  const KEY = "codemode-token";
  const POLL_MS = 1000;
  let selected = null;
  let timer = null;
  const $ = (id) => document.getElementById(id);

  function el(tag, text, cls) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }

  function seconds(s) {
    if (s < 60) return s.toFixed(1) + " s";
    if (s < 3600) return (s / 60).toFixed(1) + " min";
    return (s / 3600).toFixed(1) + " h";
  }

  function fill(tableId, rows, cells) {
    const body = $(tableId).tBodies[0];
    body.replaceChildren();
    for (const row of rows) {
      const tr = el("tr");
      for (const cell of cells(row)) tr.append(cell instanceof Node ? cell : el("td", cell));
      body.append(tr);
    }
    if (!rows.length) {
      const tr = el("tr", null, "empty");
      const td = el("td", "none");
      td.colSpan = $(tableId).tHead ? $(tableId).tHead.rows[0].cells.length : 2;
      tr.append(td);
      body.append(tr);
    }
    return body;
  }

  function showLogin(message) {
    if (timer) clearTimeout(timer);
    timer = null;
    $("console").hidden = true;
    $("login").hidden = false;
    $("login-error").textContent = message || "";
    $("status").textContent = "not signed in";
  }

  async function poll() {
    const token = sessionStorage.getItem(KEY);
    if (!token) return showLogin("");
    let response;
    try {
      response = await fetch("/api/console", { headers: { Authorization: "Bearer " + token } });
    } catch (err) {
      $("status").textContent = "server unreachable; retrying";
      timer = setTimeout(poll, POLL_MS * 3);
      return;
    }
    if (response.status === 401 || response.status === 403) {
      sessionStorage.removeItem(KEY);
      return showLogin("The server refused this token (" + response.status + ").");
    }
    if (!response.ok) {
      $("status").textContent = "the server answered " + response.status + "; retrying";
      timer = setTimeout(poll, POLL_MS * 3);
      return;
    }
    render(await response.json());
    timer = setTimeout(poll, POLL_MS);
  }

  function render(data) {
    $("login").hidden = true;
    $("console").hidden = false;
    $("status").textContent = "live, updated " + new Date(data.time * 1000).toLocaleTimeString();
    $("sessions-count").textContent = data.sessions.length + " of " + data.sessions_max;
    fill("sessions", data.sessions, (s) => [s.id, seconds(s.age_s), seconds(s.idle_s), s.calls]);
    fill("calls", data.calls, (c) => [c.tool, seconds(c.running_s)]);
    fill("approvals", data.approvals, (a) => [a.tool, a.tenant, seconds(a.waiting_s)]);
    const body = fill("runs", data.runs, (r) => [
      new Date(r.started * 1000).toLocaleTimeString(),
      r.session,
      el("td", r.outcome, "outcome outcome-" + r.outcome),
      r.duration_ms === null ? "…" : r.duration_ms.toFixed(0) + " ms",
      r.steps.length + r.dropped_steps,
      el("td", r.code.split("\n")[0], "code"),
    ]);
    data.runs.forEach((r, i) => {
      const tr = body.rows[i];
      tr.dataset.run = r.id;
      if (r.id === selected) tr.classList.add("selected");
      tr.addEventListener("click", () => { selected = r.id; showRun(r); render(data); });
    });
    const current = data.runs.find((r) => r.id === selected);
    if (current) showRun(current); else $("run").hidden = true;
    metrics(data.metrics);
  }

  function showRun(r) {
    $("run").hidden = false;
    $("run-id").textContent = r.id;
    $("run-outcome").textContent = r.outcome;
    $("run-outcome").className = "outcome-" + r.outcome;
    $("run-code").textContent = r.code;
    $("run-output").textContent = r.output;
    $("run-error").textContent = r.error;
    $("run-error").hidden = !r.error;
    const line = $("timeline");
    line.replaceChildren();
    const total = Math.max(r.duration_ms || 0, ...r.steps.map((s) => s.offset_ms + (s.duration_ms || 0)), 1);
    for (const s of r.steps) {
      const row = el("div", null, "step");
      const bar = el("div", null, "bar" + (s.outcome === "ok" || s.outcome === "running" ? "" : " failed"));
      bar.style.left = (100 * s.offset_ms / total) + "%";
      bar.style.width = (100 * (s.duration_ms || 0) / total) + "%";
      const dur = s.duration_ms === null ? "running" : s.duration_ms.toFixed(1) + " ms";
      const track = el("div", null, "track");
      track.append(bar);
      row.append(el("span", s.tool + " · " + dur + " · " + s.outcome, "label"), track);
      line.append(row);
    }
    if (!r.steps.length) line.append(el("p", "no tool calls"));
  }

  function metrics(rows) {
    const body = $("metrics").tBodies[0];
    body.replaceChildren();
    let last = null;
    for (const row of rows) {
      const tr = el("tr");
      tr.append(el("th", row.section === last ? "" : row.section), el("td", row.name), el("td", row.value));
      last = row.section;
      body.append(tr);
    }
    const outcomes = {};
    for (const row of rows) {
      if (row.section === "runs" && row.name.startsWith("outcome ")) outcomes[row.name.slice(8)] = row.value;
    }
    const total = Object.values(outcomes).reduce((a, b) => a + b, 0);
    const chart = $("chart");
    chart.replaceChildren();
    for (const [name, n] of Object.entries(outcomes)) {
      const part = el("div", null, name === "ok" ? "ok" : name === "error" ? "error" : "other");
      part.title = name + ": " + n;
      part.style.width = (100 * n / total) + "%";
      chart.append(part);
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("login").addEventListener("submit", (event) => {
      event.preventDefault();
      const token = $("token").value.trim();
      if (!token) { $("login-error").textContent = "Type the server's token."; return; }
      sessionStorage.setItem(KEY, token);
      $("token").value = "";
      poll();
    });
    poll();
  });
})();
