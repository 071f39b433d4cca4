// The SQL page: a read-only query, its rows as a table, and a chart when a
// column is a time or a number (inline SVG, drawn here).
"use strict";

(() => {
  const { el, svg, getJSON, fold } = AL;
  const form = document.getElementById("sql-form");
  const query = document.getElementById("sql-query");
  const error = document.getElementById("sql-error");
  const info = document.getElementById("sql-info");
  const chart = document.getElementById("chart");
  const table = document.getElementById("sql-result");

  function renderTable(result) {
    const head = el("tr", {}, ...result.columns.map((c) => el("th", { title: c.type, text: c.name })));
    table.tHead.replaceChildren(head);
    const rows = result.rows.map((row) => el("tr", {}, ...row.map((v) => el("td", {}, fold(v, 120)))));
    table.tBodies[0].replaceChildren(...rows);
    info.textContent = result.truncated
      ? "the first " + result.shown.toLocaleString("en") + " rows (the query has more)"
      : AL.count(result.shown, "row");
  }

  // x: the first time column (else the first text column, as categories);
  // y: the first number column that is not x.
  function renderChart(result) {
    chart.replaceChildren();
    const cols = result.columns;
    const yi = cols.findIndex((c) => c.kind === "number");
    if (yi < 0 || !result.rows.length) return;
    let xi = cols.findIndex((c) => c.kind === "time");
    const timed = xi >= 0;
    if (!timed) xi = cols.findIndex((c, i) => i !== yi && c.kind === "text");
    const W = Math.max(chart.clientWidth || 800, 400);
    const H = 220;
    const P = 40;
    const points = result.rows
      .map((row, i) => [timed ? Date.parse(row[xi]) : i, Number(row[yi]), xi >= 0 ? row[xi] : i])
      .filter((p) => !isNaN(p[0]) && !isNaN(p[1]));
    if (!points.length) return;
    const ys = points.map((p) => p[1]);
    const lo = Math.min(0, ...ys);
    const hi = Math.max(...ys, lo + 1);
    const y = (v) => H - P - ((v - lo) / (hi - lo)) * (H - 2 * P);
    const graph = svg("svg", { class: "chart-svg", width: W, height: H, viewBox: "0 0 " + W + " " + H });
    graph.append(svg("title", {}, cols[yi].name + (xi >= 0 ? " by " + cols[xi].name : "")));
    graph.append(svg("line", { x1: P, x2: W - 10, y1: H - P, y2: H - P, class: "axis" }));
    graph.append(svg("line", { x1: P, x2: P, y1: 10, y2: H - P, class: "axis" }));
    graph.append(svg("text", { x: 2, y: 14, class: "tick" }, String(hi)));
    graph.append(svg("text", { x: 2, y: H - P, class: "tick" }, String(lo)));
    if (timed) {
      const xs = points.map((p) => p[0]);
      const x0 = Math.min(...xs);
      const x1 = Math.max(...xs, x0 + 1);
      const x = (v) => P + ((v - x0) / (x1 - x0)) * (W - P - 20);
      points.sort((a, b) => a[0] - b[0]);
      graph.append(svg("polyline", { class: "line",
        points: points.map((p) => x(p[0]) + "," + y(p[1])).join(" ") }));
      for (const p of points) {
        const dot = svg("circle", { cx: x(p[0]), cy: y(p[1]), r: 3, class: "dot" });
        dot.append(svg("title", {}, p[2] + ": " + p[1]));
        graph.append(dot);
      }
      graph.append(svg("text", { x: P, y: H - 10, class: "tick" }, new Date(x0).toISOString()));
    } else {
      const shown = points.slice(0, 100);
      const w = Math.min((W - P - 20) / shown.length, 80);
      shown.forEach((p, i) => {
        const bar = svg("rect", { x: P + i * w + 1, y: y(Math.max(p[1], 0)), width: Math.max(w - 2, 1),
          height: Math.abs(y(p[1]) - y(0)), class: "bar" });
        bar.append(svg("title", {}, p[2] + ": " + p[1]));
        graph.append(bar);
        if (w > 40) graph.append(svg("text", { x: P + i * w + 2, y: H - P + 14, class: "tick" }, String(p[2]).slice(0, 12)));
      });
    }
    chart.append(graph);
  }

  async function run() {
    error.hidden = true;
    try {
      const result = await getJSON("/api/sql?q=" + encodeURIComponent(query.value));
      renderTable(result);
      renderChart(result);
    } catch (err) {
      error.hidden = false;
      error.textContent = err.message;
      info.textContent = "";
      chart.replaceChildren();
      table.tHead.replaceChildren();
      table.tBodies[0].replaceChildren();
    }
    AL.ready();
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    run();
  });
  run();
})();
