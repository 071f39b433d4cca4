// A run's page: info, timeline, a page of events at a time, the state at any
// seq with its diff, live updates (server-sent events), and the actions.
"use strict";

(() => {
  const { el, getJSON, post, fold, count, time, apiRun, showError, main } = AL;
  const runId = main.dataset.run;
  const tbody = document.querySelector("#events tbody");
  const more = document.getElementById("more");
  const eventsInfo = document.getElementById("events-info");
  const live = document.getElementById("live");
  const PAGE = 200;
  const TERMINAL = ["completed", "failed", "cancelled", "shredded"];
  let shownUpto = 0; // the last seq in the list
  let lastSeq = 0; // the last seq recorded, as far as the page knows
  let selected = null;
  let info = null;

  function renderInfo(data) {
    info = data.info || {};
    lastSeq = Math.max(lastSeq, data.last_seq || 0);
    const parts = [
      info.workflow ? info.workflow + (info.version ? " v" + info.version : "") : "",
      // The run index's count (StepCompleted events), as the timeline's legend says it.
      info.status === "queued" ? "queued in " + info.queue + " (priority " + info.priority + "), waiting for room"
        : info.waiting_for_room ? info.status + " in " + info.queue + " (admitted before), waiting for room" : info.status,
      count(info.steps ?? 0, "step completed", "steps completed"),
      count(lastSeq, "event"),
      data.where === "both" ? "hot and archived" : data.where === "archived" ? "archived" : data.where ? "in the " + data.where + " log" : "",
      info.started_at ? "started " + time(info.started_at) : "",
    ];
    document.getElementById("run-info").textContent = parts.filter(Boolean).join(" · ");
    renderParent(data.parent);
    renderTrace(data.trace_url);
    renderShredded(data.shredded);
    renderActions();
    renderPending();
  }

  // A child run (ctx.start_child) links to its parent run.
  function renderParent(parent) {
    const box = document.getElementById("parent");
    if (!parent) { box.hidden = true; return; }
    box.replaceChildren("child run of ", el("a", { href: AL.runPath(parent), id: "parent-link",
      text: parent }));
    box.hidden = false;
  }

  // A traced run links to its OpenTelemetry trace (agentlog ui --trace-url).
  function renderTrace(url) {
    const box = document.getElementById("trace");
    if (!url) { box.hidden = true; return; }
    box.replaceChildren(el("a", { href: url, id: "trace-link", text: "trace",
      rel: "noopener noreferrer", target: "_blank" }), " of this run in the trace viewer");
    box.hidden = false;
  }

  // A shredded run says so, when, and that its content is gone for good:
  // its data key was destroyed, so no key store anywhere opens it again.
  function renderShredded(shred) {
    const box = document.getElementById("shredded");
    if (!shred) { box.hidden = true; return; }
    const when = shred.at ? " on " + time(shred.at) : "";
    const by = shred.by ? " by " + shred.by : "";
    const seq = shred.seq ? " (seq " + shred.seq + ")" : "";
    box.replaceChildren(
      el("strong", { text: "Shredded" + when + by + seq + "." }),
      " This run's data key was destroyed, so its payloads (input, state, task " +
      "results, answers, output) are gone for good, in every copy: no key store can " +
      "open them again. Only its metadata is left: event types, times, steps and task names.");
    box.hidden = false;
  }

  // What the answer to an interrupt must look like: the schema it declared
  // (ctx.interrupt(..., expects=...)), which Runtime.resume checks.
  const HINTS = {
    bool: "true or false", str: '"text in double quotes"', int: "a whole number",
    float: "a number", list: "a JSON list: [...]", dict: "a JSON object: {...}",
  };

  // A template of the expected shape: an object's keys, each to fill in
  // (null fits no type, so an unfilled template is refused, never sent as an answer).
  function template(expects) {
    if (!expects || typeof expects !== "object" || Array.isArray(expects)) return null;
    return Object.fromEntries(Object.entries(expects).map(([k, v]) => [k, template(v)]));
  }

  function answerBox(question, i, note) {
    const plain = !question.expects || typeof question.expects !== "object" || Array.isArray(question.expects);
    const value = el("textarea", {
      id: i ? "resume-value-" + i : "resume-value", class: "answer", rows: plain ? 1 : 3,
      spellcheck: "false",
      placeholder: "answer as JSON: " + (HINTS[question.expects] || "any JSON value"),
    });
    value.value = plain ? "" : AL.json(template(question.expects));
    const button = el("button", { id: i ? "resume-" + i : "resume", type: "button", text: "Resume",
      onclick: () => {
        let answer;
        try { answer = JSON.parse(value.value); } catch (err) {
          note.textContent = "not JSON: " + err.message; return;
        }
        act(post(apiRun(runId, "/resume"), { answers: { [question.id]: answer } }), note);
      } });
    return el("div", { class: "answer-row" }, value, button);
  }

  function questionBox(question, i, note) {
    const expects = question.expects === null || question.expects === undefined
      ? "any JSON value" : AL.json(question.expects);
    return el("div", { class: "question", "data-id": question.id },
      el("p", {}, el("strong", { text: question.step }), " asks (interrupt " + question.id + "):"),
      el("pre", { class: "json payload", text: AL.json(question.payload, 2) }),
      el("p", { class: "expects" }, "the answer must be: ", el("code", { text: expects })),
      main.dataset.actions === "1" ? answerBox(question, i, note) : "");
  }

  // A waiting run shows what it asks, read-only too; with actions, each
  // question gets an answer box that starts from the expected shape.
  async function renderPending() {
    const box = document.getElementById("pending");
    if (box.dataset.built === info.status + lastSeq) return;
    box.dataset.built = info.status + lastSeq;
    if (info.status !== "waiting") { box.hidden = true; box.replaceChildren(); return; }
    const note = el("span", { class: "action-note", id: "resume-note" });
    try {
      const questions = (await getJSON(apiRun(runId, "/pending"))).interrupts || [];
      box.replaceChildren(el("h2", { text: "Waiting for " + count(questions.length, "answer") }),
        ...questions.map((q, i) => questionBox(q, i, note)), note);
    } catch (err) {
      showError(box, err);
    }
    box.hidden = false;
  }

  function act(promise, note) {
    return promise
      .then((r) => { note.textContent = "done: " + AL.json(r); refresh(); return r; })
      .catch((err) => { note.textContent = "refused: " + err.message; });
  }

  function eventRow(event) {
    const tr = el("tr", { class: "event", "data-seq": event.seq },
      el("td", { class: "seq", text: event.seq }),
      el("td", { text: time(event.ts) }),
      el("td", { class: "type", text: event.type }),
      el("td", { text: event.step || "" }),
      el("td", { class: "payload" }, fold(event.payload, 140)));
    tr.addEventListener("click", (e) => {
      if (e.target.closest("details")) return; // unfolding a payload is not a selection
      inspect(event.seq);
    });
    return tr;
  }

  async function loadEvents() {
    const page = await getJSON(apiRun(runId, "/events?after=" + shownUpto + "&limit=" + PAGE));
    lastSeq = Math.max(lastSeq, page.last_seq || 0);
    for (const event of page.events) {
      if (event.seq <= shownUpto) continue;
      tbody.append(eventRow(event));
      shownUpto = event.seq;
    }
    updateMore();
  }

  function updateMore() {
    const left = lastSeq - shownUpto;
    more.hidden = left <= 0;
    eventsInfo.textContent = "showing 1–" + shownUpto + " of " + lastSeq +
      (left > 0 ? " (" + left + " more)" : "");
  }

  async function inspect(seq) {
    selected = seq;
    for (const row of tbody.querySelectorAll("tr.selected")) row.classList.remove("selected");
    const row = tbody.querySelector('tr[data-seq="' + seq + '"]');
    if (row) row.classList.add("selected");
    const title = document.getElementById("inspect-title");
    title.textContent = "State at seq " + seq;
    document.getElementById("inspect-hint").hidden = true;
    const diff = document.getElementById("diff");
    const state = document.getElementById("state");
    try {
      const data = await getJSON(apiRun(runId, "/state/" + seq));
      if (selected !== seq) return;
      state.textContent = AL.json(data.state, 2);
      state.dataset.seq = seq;
      const changes = data.diff || [];
      if (!changes.length) {
        diff.replaceChildren(el("p", { class: "muted", text: "no change to the state" }));
      } else {
        const rows = changes.map((c) => el("tr", {},
          el("td", { text: c.path ?? "" }), el("td", { text: c.op ?? "" }),
          el("td", {}, fold(c.before, 80)), el("td", {}, fold(c.after, 80))));
        diff.replaceChildren(el("table", { class: "grid diff" },
          el("thead", {}, el("tr", {}, el("th", { text: "path" }), el("th", { text: "change" }),
            el("th", { text: "before" }), el("th", { text: "after" }))),
          el("tbody", {}, ...rows)));
      }
    } catch (err) {
      state.textContent = "";
      showError(diff, err);
    }
  }

  async function loadTimeline() {
    const box = document.getElementById("timeline");
    try {
      Timeline.render(box, await getJSON(apiRun(runId, "/timeline")));
      if (!box.dataset.drawn) performance.mark("agentlog-timeline");
      box.dataset.drawn = "1";
    } catch (err) {
      showError(box, err);
    }
  }

  // Live: the server says which seqs were recorded; the page fetches them (one
  // refresh at a time, and again if more arrived meanwhile).
  let refreshing = false;
  let again = false;
  async function refresh() {
    if (refreshing) { again = true; return; }
    refreshing = true;
    try {
      do {
        again = false;
        renderInfo(await getJSON(apiRun(runId)));
        // Only a list that shows the end grows by itself; a paged one counts.
        if (shownUpto + PAGE >= lastSeq) await loadEvents();
        else updateMore();
        await loadTimeline();
      } while (again);
    } finally {
      refreshing = false;
    }
  }

  function follow() {
    if (TERMINAL.includes(info.status) || !window.EventSource) return;
    live.textContent = "live: following new events";
    live.classList.add("on");
    const source = new EventSource(apiRun(runId, "/live?after=" + lastSeq));
    // Leaving the page closes the feed at once: a browser keeps only six
    // connections per server, and a page kept for "back" must not hold one.
    window.addEventListener("pagehide", () => source.close());
    source.addEventListener("seq", (message) => {
      const seq = JSON.parse(message.data).seq;
      if (seq > lastSeq) { lastSeq = seq; refresh(); }
    });
    source.addEventListener("end", () => {
      source.close();
      live.textContent = "the run has ended";
      live.classList.remove("on");
      refresh();
    });
  }

  function renderActions() {
    const box = document.getElementById("actions");
    if (main.dataset.actions !== "1" || box.dataset.built === info.status) return;
    box.dataset.built = info.status;
    box.hidden = false;
    const note = el("span", { class: "action-note" });
    const run = (promise) => act(promise, note);
    const items = [];
    if (!TERMINAL.includes(info.status)) {
      items.push(el("button", { id: "cancel", type: "button", text: "Cancel",
        onclick: () => run(post(apiRun(runId, "/cancel"), {})) }));
    }
    const newId = el("input", { id: "fork-id", placeholder: "new run id" });
    items.push(newId, el("button", { id: "fork", type: "button", text: "Fork at selected seq",
      onclick: () => {
        if (!selected) { note.textContent = "click an event first: the fork starts from its seq"; return; }
        run(post(apiRun(runId, "/fork"), { at_seq: selected, new_run_id: newId.value }))
          .then((r) => { if (r && r.run_id) location.href = AL.runPath(r.run_id); });
      } }));
    box.replaceChildren(...items, note);
  }

  // A fork links to the run it came from (read once, after the first render).
  async function loadOrigin() {
    const origin = (await getJSON(apiRun(runId, "/origin"))).forked_from;
    if (!origin) return;
    const box = document.getElementById("origin");
    box.replaceChildren("forked from ", el("a", { href: AL.runPath(origin.run_id), id: "origin-link",
      text: origin.run_id }), " at seq " + origin.seq);
    box.hidden = false;
  }

  // An origin lists its forks (each fork links back through loadOrigin).
  async function loadForks() {
    const found = await getJSON(apiRun(runId, "/forks"));
    if (!found.forks.length && found.complete) return;
    const box = document.getElementById("forks");
    const links = [];
    found.forks.forEach((fork, i) => {
      if (i) links.push(", ");
      links.push(el("a", { href: AL.runPath(fork.run_id), class: "fork-link", text: fork.run_id }),
        " at seq " + fork.seq + " (" + fork.status + ")");
    });
    box.replaceChildren("forked into " + count(found.forks.length, "run") + ": ", ...links,
      found.complete ? "" : " (and maybe more: only the first runs that could be forks were read)");
    box.hidden = false;
  }

  more.addEventListener("click", () => loadEvents().catch((err) => showError(eventsInfo, err)));

  (async () => {
    try {
      renderInfo(await getJSON(apiRun(runId)));
      // Ready once the events are listed (clickable); the timeline of a long
      // run folds on the server meanwhile and draws when it comes.
      const timeline = loadTimeline();
      await loadEvents();
      AL.ready();
      follow();
      await timeline;
      await loadOrigin().catch(() => {}); // only a link: the page works without it
      await loadForks().catch((err) => showError(document.getElementById("forks"), err));
    } catch (err) {
      showError(document.getElementById("run-info"), err);
      AL.ready();
    }
  })();
})();
