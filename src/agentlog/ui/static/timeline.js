// The run's timeline as SVG. Steps (supersteps) in order, left to right, each
// a column; its parallel branches side by side as lanes stacked in the
// column; each task a bar whose length is its duration (tasks that overlap
// sit on separate tracks, each labelled with its task's name); diamonds mark
// failures, retries and interrupts.
// A column's width grows with its duration, but never below a readable
// minimum, so a run that waited days on an interrupt still shows its steps.
"use strict";

const Timeline = (() => {
  const { svg, el, count } = AL;
  const TRACK = 14; // height of one task track (a bar and its label)
  const CHAR = 6; // about how wide one character of a bar's label is
  const LANE_PAD = 18; // the lane's label row
  const HEAD = 20; // the step labels
  const MARKS = 16; // the mark row at the bottom
  const MIN_COL = 70;

  function ms(iso) {
    const t = Date.parse(iso);
    return isNaN(t) ? null : t;
  }

  // ``text`` cut to about ``width`` pixels ("" when not even two characters fit).
  function fit(text, width) {
    const room = Math.floor(width / CHAR);
    if (room < 2) return "";
    return text.length <= room ? text : text.slice(0, room - 1) + "…";
  }

  function laneHeight(lane) {
    return LANE_PAD + Math.max(lane.tracks || 1, 1) * TRACK + 6;
  }

  function render(box, data) {
    const steps = data.steps || [];
    const counts = data.counts || {};
    const supersteps = counts.supersteps ?? steps.length;
    const marks = data.marks || [];
    const runEnd = ms(data.end) ?? Date.now();
    const spans = steps.map((s) => {
      const start = ms(s.start) ?? runEnd;
      const end = ms(s.end) ?? runEnd;
      return { start, end: Math.max(end, start + 1) };
    });
    const spanTotal = spans.reduce((n, s) => n + (s.end - s.start), 0) || 1;
    const width = Math.max(box.clientWidth - 12 || 900, steps.length * MIN_COL, 480);
    const free = Math.max(width - steps.length * MIN_COL, 0);
    let left = 0;
    const cols = spans.map((s) => {
      const w = MIN_COL + (free * (s.end - s.start)) / spanTotal;
      const col = { x: left, w, t0: s.start, t1: s.end };
      left += w;
      return col;
    });
    // Row r of every column holds branch r: its height is the tallest such lane.
    const rows = [];
    for (const step of steps) {
      (step.lanes || []).forEach((lane, r) => {
        rows[r] = Math.max(rows[r] || 0, laneHeight(lane));
      });
    }
    const rowY = [];
    let y = HEAD;
    for (const h of rows) { rowY.push(y); y += h; }
    const height = y + MARKS + 4;
    const chart = svg("svg", { class: "tl", width, height, viewBox: "0 0 " + width + " " + height });
    const laneCount = steps.reduce((n, s) => n + (s.lanes || []).length, 0);
    chart.append(svg("title", {}, "Timeline: " + count(steps.length, "superstep") + ", " +
      count(laneCount, "lane")));
    const xAt = (col, t) => col.x + 2 + ((Math.min(Math.max(t, col.t0), col.t1) - col.t0) / (col.t1 - col.t0)) * (col.w - 6);
    steps.forEach((step, i) => {
      const col = cols[i];
      const g = svg("g", { class: "tl-step", "data-superstep": step.superstep });
      g.append(svg("rect", { x: col.x, y: 0, width: col.w, height, class: i % 2 ? "tl-col odd" : "tl-col" }));
      g.append(svg("text", { x: col.x + 3, y: 13, class: "tl-step-label" }, "#" + step.superstep));
      (step.lanes || []).forEach((lane, r) => {
        const ly = rowY[r];
        const lx = xAt(col, ms(lane.start) ?? col.t0);
        const lw = Math.max(xAt(col, ms(lane.end) ?? runEnd) - lx, 3);
        const lg = svg("g", {
          class: "tl-lane status-" + lane.status, "data-branch": lane.branch, "data-step": lane.step,
        });
        const span = svg("rect", { x: lx, y: ly + 2, width: lw, height: laneHeight(lane) - 4, rx: 3, class: "tl-span" });
        span.append(svg("title", {}, lane.step + " (branch " + lane.branch + "): " + lane.status +
          (lane.duration_ms !== null ? ", " + lane.duration_ms + " ms" : ", still running") +
          (lane.attempts > 1 ? ", " + lane.attempts + " attempts" : "")));
        lg.append(span, svg("text", { x: lx + 3, y: ly + 14, class: "tl-lane-label" }, lane.step));
        const placed = (lane.bars || []).map((bar) => {
          const bx = xAt(col, ms(bar.start) ?? col.t0);
          return { bar, bx, bw: Math.max(xAt(col, ms(bar.end) ?? runEnd) - bx, 2) };
        });
        for (const { bar, bx, bw } of placed) {
          const by = ly + LANE_PAD + (bar.track || 0) * TRACK;
          const rect = svg("rect", {
            x: bx, y: by, width: bw, height: TRACK - 2,
            class: "tl-bar status-" + bar.status, "data-seq": bar.seq,
          });
          const about = bar.task + ": " + bar.status +
            (bar.duration_ms !== null ? ", " + bar.duration_ms + " ms" : ", running") +
            (bar.attempts > 1 ? ", " + bar.attempts + " attempts" : "") +
            (bar.error ? ", " + bar.error : "");
          rect.append(svg("title", {}, about));
          lg.append(rect);
          // The label runs from the bar's start to the next bar on its track
          // (or the column's edge): a short task's name still reads.
          const next = placed.filter((p) => (p.bar.track || 0) === (bar.track || 0) && p.bx > bx)
            .reduce((m, p) => Math.min(m, p.bx), col.x + col.w - 2);
          const text = fit(bar.task + (bar.attempts > 1 ? " ×" + bar.attempts : ""), next - bx - 4);
          if (text) {
            const label = svg("text", { x: bx + 2, y: by + TRACK - 5, class: "tl-bar-label",
              "data-seq": bar.seq }, text);
            label.append(svg("title", {}, about));
            lg.append(label);
          }
        }
        g.append(lg);
      });
      chart.append(g);
    });
    const colOf = new Map(steps.map((s, i) => [s.superstep, cols[i]]));
    for (const mark of marks) {
      const col = colOf.get(mark.superstep) || cols[cols.length - 1];
      if (!col) continue;
      const mx = xAt(col, ms(mark.ts) ?? col.t0);
      const my = height - MARKS;
      const g = svg("g", { class: "tl-mark kind-" + mark.kind, "data-seq": mark.seq });
      g.append(svg("path", { d: "M" + mx + " " + my + " l5 7 l-5 7 l-5 -7 z" }));
      g.append(svg("title", {}, mark.kind + " at seq " + mark.seq + (mark.step ? " in " + mark.step : "") +
        (mark.text ? ": " + mark.text : "") + (mark.waited_ms !== null && mark.waited_ms !== undefined ? ", waited " + mark.waited_ms + " ms" : "")));
      chart.append(g);
    }
    const bars = steps.reduce((n, s) => n + (s.lanes || []).reduce((m, l) => m + (l.bars || []).length, 0), 0);
    // "steps completed" is the run index's count (the run's header says the
    // same); a superstep is a column: the steps that ran side by side in it.
    const legend = el("p", { class: "tl-legend muted",
      text: count(counts.steps ?? 0, "step completed", "steps completed") + " in " +
        count(supersteps, "superstep") + " · " + count(laneCount, "lane") + " · " +
        count(bars, "task") + " · " + count(marks.length, "mark") +
        (supersteps > steps.length ? " (the last " + count(steps.length, "superstep") + " drawn)" : "") });
    box.replaceChildren(chart, legend);
  }

  // Draw again when the box changes width (a scrollbar appears, the window
  // is resized), so the chart always fits its box.
  const drawn = new WeakMap();
  const watcher = window.ResizeObserver ? new ResizeObserver((entries) => {
    for (const entry of entries) {
      const last = drawn.get(entry.target);
      if (last && Math.abs(last.width - entry.target.clientWidth) > 4) draw(entry.target, last.data);
    }
  }) : null;

  function draw(box, data) {
    drawn.set(box, { data, width: box.clientWidth });
    render(box, data);
    if (watcher) watcher.observe(box);
  }

  return { render: draw };
})();
