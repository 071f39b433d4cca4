// Shared helpers of the agentlog UI pages. Data from the log is only ever put
// into the page as text (textContent, text nodes, SVG text): never as markup.
"use strict";

const AL = (() => {
  const main = document.getElementById("main");
  const SVG = "http://www.w3.org/2000/svg";

  // An element with attributes; string children become text nodes.
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = String(value);
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, String(value));
    }
    for (const child of children) {
      if (child !== undefined && child !== null) node.append(child);
    }
    return node;
  }

  // An SVG element (for the timeline and the charts).
  function svg(tag, attrs, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "class") node.setAttribute("class", value);
      else node.setAttribute(key, String(value));
    }
    if (text !== undefined) node.textContent = String(text);
    return node;
  }

  async function answer(response) {
    let body;
    try {
      body = await response.json();
    } catch (err) {
      body = { error: response.status + " " + response.statusText };
    }
    if (!response.ok) {
      const error = new Error(body.error || response.statusText);
      error.status = response.status;
      throw error;
    }
    return body;
  }

  // The CSRF token goes with every call (the SQL API refuses a call without it).
  function getJSON(url) {
    return fetch(url, {
      headers: { accept: "application/json", "x-csrf-token": main.dataset.csrf || "" },
    }).then(answer);
  }

  // An action: the CSRF token the page was served with goes in a header.
  function post(url, body) {
    return fetch(url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-csrf-token": main.dataset.csrf || "",
      },
      body: JSON.stringify(body || {}),
    }).then(answer);
  }

  function json(value, indent) {
    return JSON.stringify(value, null, indent);
  }

  // A value as text; a long one folds (click to open the whole of it).
  function fold(value, limit) {
    const text = typeof value === "string" ? value : json(value);
    const max = limit || 160;
    if (text === undefined) return el("span", { class: "muted", text: "" });
    if (text.length <= max) return el("code", { text });
    return el(
      "details",
      { class: "fold" },
      el("summary", { text: text.slice(0, max) + "… (" + text.length + " chars)" }),
      el("pre", { class: "json", text: typeof value === "string" ? value : json(value, 2) }),
    );
  }

  // "1 step", "7 steps": a number and its noun, plural unless it is one (the
  // plural is the noun + "s" unless given). Every count on the pages goes
  // through here, so none reads "1 steps".
  function count(n, noun, plural) {
    return n + " " + (Number(n) === 1 ? noun : plural || noun + "s");
  }

  function time(iso) {
    if (!iso) return "";
    const at = new Date(iso);
    return isNaN(at) ? String(iso) : at.toISOString().replace("T", " ").slice(0, 23);
  }

  // A run id as one URL path segment: the rule of agentlog.ui._params.encode_run_id.
  // "/" would split it into segments the routes match, and the browser resolves
  // "." and ".." segments (even written %2E) before it sends the request.
  function runSegment(runId) {
    if (runId === "") return "~e";
    let segment = runId.replaceAll("~", "~~").replaceAll("/", "~s");
    if (segment.startsWith(".")) segment = "~d" + segment.slice(1);
    return encodeURIComponent(segment);
  }

  function runPath(runId) {
    return "/runs/" + runSegment(runId);
  }

  function apiRun(runId, suffix) {
    return "/api/runs/" + runSegment(runId) + (suffix || "");
  }

  function showError(where, err) {
    where.hidden = false;
    where.replaceChildren(el("span", { class: "error", text: String(err.message || err) }));
  }

  // The page marks itself ready after its first data render: the benchmark
  // reads this mark, the browser tests wait on data-ready.
  function ready() {
    if (main.dataset.ready) return;
    performance.mark("agentlog-ready");
    main.dataset.ready = "1";
  }

  return {
    main, el, svg, getJSON, post, json, fold, count, time, runPath, apiRun, showError, ready,
  };
})();
