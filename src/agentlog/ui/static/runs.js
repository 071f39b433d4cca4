// The runs page: filters, counts and one page of runs (hot and archived).
"use strict";

(() => {
  const { el, getJSON, count, time, runPath } = AL;
  const form = document.getElementById("filters");
  const body = document.querySelector("#runs tbody");
  const counts = document.getElementById("counts");
  const info = document.getElementById("page-info");
  const prev = document.getElementById("prev");
  const next = document.getElementById("next");
  const LIMIT = 50;
  const params = new URLSearchParams(location.search);
  let offset = Number(params.get("offset") || 0);

  function filters() {
    const query = new URLSearchParams();
    for (const [key, value] of new FormData(form)) {
      if (!value) continue;
      query.set(key, key === "since" || key === "until" ? value + ":00Z" : value);
    }
    return query;
  }

  function cell(value, cls) {
    return el("td", { class: cls, text: value === undefined || value === null ? "" : value });
  }

  function row(run) {
    const link = el("a", { href: runPath(run.run_id), class: "run-link", text: run.run_id });
    const where = run.where || (run.archived ? "archive" : "hot");
    const workflow = run.version ? run.workflow + " v" + run.version : run.workflow;
    return el(
      "tr",
      { class: "run-row status-" + run.status },
      el("td", {}, link),
      cell(workflow),
      cell(run.status, "status"),
      cell(run.steps),
      cell(run.events !== undefined ? run.events : run.last_seq),
      cell(time(run.started_at)),
      cell(time(run.updated_at)),
      cell(where),
      cell(run.queue ? run.queue + (run.status === "queued" ? " (priority " + run.priority + ")" : "") : "", "queue"),
    );
  }

  async function load() {
    const query = filters();
    query.set("offset", offset);
    query.set("limit", LIMIT);
    let page;
    try {
      page = await getJSON("/api/runs?" + query);
    } catch (err) {
      counts.replaceChildren(el("span", { class: "error", text: err.message }));
      AL.ready();
      return;
    }
    body.replaceChildren(...page.rows.map(row));
    if (!page.rows.length) {
      body.append(el("tr", {}, el("td", { colspan: 8, class: "muted", text: "no runs match" })));
    }
    const parts = Object.entries(page.counts || {}).map(([k, n]) => k + " " + n);
    counts.textContent = count(page.total, "run") + (parts.length ? " · " + parts.join(" · ") : "");
    const last = Math.min(page.offset + page.rows.length, page.total);
    info.textContent = page.total ? page.offset + 1 + "–" + last + " of " + page.total : "";
    prev.disabled = page.offset === 0;
    next.disabled = last >= page.total;
    AL.ready();
  }

  async function choices() {
    const known = await getJSON("/api/workflows");
    const status = document.getElementById("f-status");
    const workflow = document.getElementById("f-workflow");
    for (const name of known.statuses) status.append(el("option", { value: name, text: name }));
    for (const name of known.workflows) workflow.append(el("option", { value: name, text: name }));
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    offset = 0;
    load();
  });
  prev.addEventListener("click", () => {
    offset = Math.max(0, offset - LIMIT);
    load();
  });
  next.addEventListener("click", () => {
    offset += LIMIT;
    load();
  });
  load();
  choices().catch((err) => counts.append(el("span", { class: "error", text: " " + err.message })));
})();
