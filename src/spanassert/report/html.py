"""The replay report as one self-contained HTML file (``spanassert replay ... --html report.html``).

- Nothing is fetched when the file opens: styles and script are inline and a Content-Security-Policy
  (``default-src 'none'``) forbids any request.
- Span-derived text (tool names, agent names, keys, messages) is hostile: it travels as JSON inside
  ``<script type="application/json">`` with ``<``, ``>``, ``&`` and the line separators escaped, and the
  page puts it into the DOM with ``textContent`` only, never as markup.
- Evidence is what the other reports show: the assertions' own messages (arguments and results
  already redacted or hashed by the rule's ``evidence`` setting) and tool names; no argument values.
- Sections: totals; per rule passed / failed / inconclusive / not applicable; violations over time;
  per episode the timeline of its calls with the offending ones marked and the message beside them;
  filters by rule, agent and verdict. Episodes render a page at a time, so 10,000 open in well
  under the budget (tests/test_report_html.py measures it in headless Chromium).
"""
from __future__ import annotations

import json
import time
from typing import Any, Dict, List, Optional, Tuple

from ..core.model import Verdict
from ..core.report import Report

VERDICT_CODES = {Verdict.PASSED: 0, Verdict.FAILED: 1, Verdict.INCONCLUSIVE: 2, Verdict.NOT_APPLICABLE: 3}
MAX_CALLS_PER_EPISODE = 200
MAX_TEXT = 2000


def _clip(text: Optional[str], n: int = MAX_TEXT) -> str:
    if not text:
        return ""
    return text if len(text) <= n else text[: n - 1] + "…"


def _script_json(data: Any) -> str:
    """JSON that cannot end its <script> element or start markup, whatever the strings hold."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def report_data(report: Report) -> Dict[str, Any]:
    """The report as the page's data: compact arrays, indexes into shared tables."""
    rules: List[List[Any]] = []
    rule_index: Dict[Tuple[str, int], int] = {}
    for (test_id, index), c in report.coverage.items():
        rule_index[(test_id, index)] = len(rules)
        rules.append([test_id, c.assertion_type, index, c.counts["passed"], c.counts["failed"],
                      c.counts["inconclusive"], c.counts["not_applicable"]])
    agents: List[str] = []
    agent_index: Dict[str, int] = {}
    violations_at: Dict[Tuple[str, str], List[int]] = {}
    for v in report.violations:
        if v.span_id and v.trace_id:
            violations_at.setdefault((v.trace_id, v.span_id), []).append(rule_index.get((v.test_id, v.assertion_index), -1))
    calls = report.calls or {}
    episodes = []
    for ep in report.episodes:
        if ep.agent:
            a = agent_index.get(ep.agent)
            if a is None:
                a = agent_index[ep.agent] = len(agents)
                agents.append(_clip(ep.agent, 200))
        else:
            a = -1
        traces = report.key_traces.get(ep.key) or ([ep.trace_id] if ep.trace_id else [])
        ep_calls: List[Tuple[int, int, str, str, str]] = []
        for tid in traces:
            ep_calls.extend((s, e, tool, tid, sid) for s, e, tool, sid in calls.get(tid, ()))
        ep_calls.sort()
        t0 = ep_calls[0][0] if ep_calls else None
        rows = []
        for s, e, tool, tid, sid in ep_calls[:MAX_CALLS_PER_EPISODE]:
            marks = violations_at.get((tid, sid), [])
            rows.append([_clip(tool, 200), round((s - (t0 or s)) / 1e6, 3), round(max(e - s, 0) / 1e6, 3), marks])
        results = [[rule_index.get((r.test_id, r.index), -1), VERDICT_CODES[r.verdict], _clip(r.message),
                    1 if r.shadow else 0] for r in ep.results]
        episodes.append({
            "k": _clip(ep.key, 200), "tr": ep.trace_id or "", "a": a, "s": _clip(ep.service, 200),
            "n": _clip(ep.root_name, 200), "v": VERDICT_CODES[ep.verdict], "cr": ep.close_reason.value,
            "t0": round(t0 / 1e6) if t0 is not None else None, "r": results, "c": rows,
            "more": max(len(ep_calls) - MAX_CALLS_PER_EPISODE, 0),
        })
    counts = report.counts()
    return {
        "config": _clip(report.config.source, 500), "generated": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "totals": {**counts, "episodes": len(report.episodes), "spans": report.spans_read,
                   "violations": len(report.violations), "input_errors": len(report.input_errors)},
        "rules": rules, "agents": agents, "episodes": episodes,
    }


def render_html(report: Report) -> str:
    """One self-contained HTML document for ``report``."""
    return _PAGE.replace("/*DATA*/", _script_json(report_data(report)))


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>spanassert replay report</title>
<style>
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:14px 24px}
header h1{font-size:18px;margin:0 0 4px}
header .meta{color:#b8c0cc;font-size:12px}
main{padding:16px 24px;max-width:1280px}
section{background:#fff;border:1px solid #dde1e7;border-radius:6px;padding:12px 16px;margin-bottom:16px}
h2{font-size:15px;margin:0 0 8px}
.totals span{display:inline-block;margin-right:18px}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #eef0f3;font-variant-numeric:tabular-nums}
th{font-weight:600;color:#4a5363}
td.n{text-align:right}
.passed{color:#17803d}.failed{color:#c62828}.inconclusive{color:#b26a00}.not_applicable{color:#6b7280}
.badge{display:inline-block;border-radius:10px;padding:0 8px;font-size:12px;color:#fff}
.badge.passed{background:#17803d;color:#fff}.badge.failed{background:#c62828;color:#fff}
.badge.inconclusive{background:#b26a00;color:#fff}.badge.not_applicable{background:#6b7280;color:#fff}
.filters label{margin-right:16px}
.filters select{margin-left:4px;max-width:260px}
#chart svg{width:100%;height:100px;display:block}
#chart .bar{fill:#c62828}
#chart .axis{font-size:11px;color:#6b7280;display:flex;justify-content:space-between}
.episode{border-top:1px solid #eef0f3;padding:8px 0;content-visibility:auto;contain-intrinsic-size:auto 140px}
#episodes{contain:content}
.episode .head{font-weight:600}
.episode .head .dim{font-weight:400;color:#6b7280;margin-left:8px}
.results{margin:4px 0 4px 16px}
.calls{margin:4px 0 0 16px;list-style:none;padding:0}
.call{padding:1px 0}
.call .tool{font-family:ui-monospace,Menlo,monospace}
.call .t{color:#6b7280;margin-left:6px;font-size:12px}
.call.offending{background:#fdecea}
.call.offending .tool{color:#c62828;font-weight:600}
.call .msg{color:#c62828;margin-left:10px}
.track{position:relative;height:10px;background:#eef0f3;margin:4px 0 4px 16px;border-radius:3px}
.track i{position:absolute;top:0;height:10px;min-width:3px;background:#5b7bd5;border-radius:2px}
.track i.offending{background:#c62828}
#more{margin-top:8px}
.empty{color:#6b7280}
</style>
</head>
<body>
<header><h1>spanassert replay report</h1><div class="meta" id="meta"></div></header>
<main>
<section><h2>Totals</h2><div class="totals" id="totals"></div></section>
<section><h2>Rules</h2><table id="rules"><thead><tr><th>test</th><th>assertion</th><th class="n">passed</th><th class="n">failed</th><th class="n">inconclusive</th><th class="n">not applicable</th></tr></thead><tbody></tbody></table></section>
<section><h2>Violations over time</h2><div id="chart"></div></section>
<section class="filters"><h2>Episodes</h2>
<label>rule<select id="f-rule"><option value="">all</option></select></label>
<label>agent<select id="f-agent"><option value="">all</option></select></label>
<label>verdict<select id="f-verdict"><option value="">any</option><option value="1">failed</option><option value="2">inconclusive</option><option value="0">passed</option><option value="3">not applicable</option></select></label>
<span id="shown"></span>
<div id="episodes"></div>
<button id="more" type="button">show more</button>
</section>
</main>
<script type="application/json" id="data">/*DATA*/</script>
<script>
"use strict";
(function () {
  var t0 = performance.now();
  var D = JSON.parse(document.getElementById("data").textContent);
  var VERDICTS = ["passed", "failed", "inconclusive", "not_applicable"];
  var MARKS = ["\\u2713", "\\u2717", "?", "\\u2013"];
  var PAGE = 50;
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function ruleName(i) {
    var r = D.rules[i];
    return r ? r[0] + " " + r[1] + (r[2] ? " #" + r[2] : "") : "(unknown rule)";
  }
  document.getElementById("meta").textContent = "rules " + (D.config || "-") + " \\u00b7 generated " + D.generated;
  var T = D.totals, tot = document.getElementById("totals");
  [["episodes", T.episodes, ""], ["spans", T.spans, ""], ["passed", T.passed, "passed"], ["failed", T.failed, "failed"],
   ["inconclusive", T.inconclusive, "inconclusive"], ["not applicable", T.not_applicable, "not_applicable"],
   ["violations", T.violations, "failed"], ["input errors", T.input_errors, ""]].forEach(function (x) {
    var s = el("span", x[2], x[0] + ": "); s.appendChild(el("b", null, x[1])); s.dataset.total = x[0]; tot.appendChild(s);
  });
  var rb = document.querySelector("#rules tbody"), fr = document.getElementById("f-rule");
  D.rules.forEach(function (r, i) {
    var tr = el("tr"); tr.dataset.rule = String(i);
    tr.appendChild(el("td", null, r[0])); tr.appendChild(el("td", null, r[1] + (r[2] ? " #" + r[2] : "")));
    for (var k = 0; k < 4; k++) { var td = el("td", "n " + (r[3 + k] ? VERDICTS[k] : ""), r[3 + k]); td.dataset.verdict = VERDICTS[k]; tr.appendChild(td); }
    rb.appendChild(tr);
    var o = el("option", null, ruleName(i)); o.value = String(i); fr.appendChild(o);
  });
  var fa = document.getElementById("f-agent");
  D.agents.forEach(function (a, i) { var o = el("option", null, a); o.value = String(i); fa.appendChild(o); });
  var fv = document.getElementById("f-verdict");
  var matching = [], shownCount = 0;
  function matches(ep, rule, agent, verdict) {
    if (agent !== "" && ep.a !== +agent) return false;
    if (rule !== "") {
      for (var i = 0; i < ep.r.length; i++) {
        if (ep.r[i][0] === +rule) return verdict === "" || ep.r[i][1] === +verdict;
      }
      return false;
    }
    return verdict === "" || ep.v === +verdict;
  }
  function chart(list) {
    var box = document.getElementById("chart"); box.textContent = "";
    var times = [];
    list.forEach(function (ep) {
      if (ep.t0 === null) return;
      ep.c.forEach(function (c) { if (c[3].length) times.push(ep.t0 + c[1]); });
      ep.r.forEach(function (r) { if (r[1] === 1 && !ep.c.some(function (c) { return c[3].indexOf(r[0]) >= 0; })) times.push(ep.t0); });
    });
    if (!times.length) { box.appendChild(el("div", "empty", "no violations")); return; }
    var lo = Math.min.apply(null, times), hi = Math.max.apply(null, times), N = 60, bins = new Array(N).fill(0);
    var span = Math.max(hi - lo, 1);
    times.forEach(function (t) { bins[Math.min(N - 1, Math.floor((t - lo) / span * N))]++; });
    var max = Math.max.apply(null, bins), NS = "http://www.w3.org/2000/svg";
    var svg = document.createElementNS(NS, "svg"); svg.setAttribute("viewBox", "0 0 600 100"); svg.setAttribute("preserveAspectRatio", "none");
    bins.forEach(function (b, i) {
      if (!b) return;
      var r = document.createElementNS(NS, "rect"), h = b / max * 95;
      r.setAttribute("class", "bar"); r.setAttribute("x", i * 10 + 1); r.setAttribute("width", 8);
      r.setAttribute("y", 100 - h); r.setAttribute("height", h);
      var tip = document.createElementNS(NS, "title"); tip.textContent = b + " violation(s)"; r.appendChild(tip);
      svg.appendChild(r);
    });
    box.appendChild(svg);
    var axis = el("div", "axis");
    [lo, hi].forEach(function (t) { axis.appendChild(el("span", null, new Date(t).toISOString().replace("T", " ").slice(0, 19) + " UTC")); });
    box.appendChild(axis);
    box.dataset.violations = String(times.length);
  }
  function episodeNode(ep) {
    var d = el("div", "episode"); d.dataset.verdict = VERDICTS[ep.v];
    var h = el("div", "head"); h.appendChild(el("span", "badge " + VERDICTS[ep.v], VERDICTS[ep.v].replace("_", " ")));
    h.appendChild(document.createTextNode(" " + ep.k));
    h.appendChild(el("span", "dim", (ep.a >= 0 ? "agent " + D.agents[ep.a] : "no agent") + (ep.s ? " \\u00b7 service " + ep.s : "") +
      (ep.n ? " \\u00b7 root " + ep.n : "") + (ep.cr !== "root_ended" ? " \\u00b7 closed: " + ep.cr : "")));
    d.appendChild(h);
    var res = el("div", "results");
    ep.r.forEach(function (r) {
      var line = el("div", "result " + VERDICTS[r[1]], MARKS[r[1]] + " " + ruleName(r[0]) + (r[3] ? " (shadow)" : "") + ": " +
        VERDICTS[r[1]].replace("_", " ") + (r[2] ? " \\u2014 " + r[2] : ""));
      line.dataset.verdict = VERDICTS[r[1]]; res.appendChild(line);
    });
    d.appendChild(res);
    if (ep.c.length) {
      var end = 0; ep.c.forEach(function (c) { end = Math.max(end, c[1] + c[2]); });
      var track = el("div", "track");
      ep.c.forEach(function (c) {
        var i = el("i", c[3].length ? "offending" : ""); i.style.left = (end ? c[1] / end * 100 : 0) + "%";
        i.style.width = (end ? c[2] / end * 100 : 0) + "%"; i.title = c[0]; track.appendChild(i);
      });
      d.appendChild(track);
      var ul = el("ul", "calls");
      ep.c.forEach(function (c, n) {
        var li = el("li", "call" + (c[3].length ? " offending" : ""));
        li.appendChild(el("span", "n", (c[3].length ? "\\u2717 " : "") + "#" + (n + 1) + " "));
        li.appendChild(el("span", "tool", c[0]));
        li.appendChild(el("span", "t", "+" + c[1].toFixed(1) + " ms, " + c[2].toFixed(1) + " ms"));
        c[3].forEach(function (ri) {
          var msg = ""; ep.r.forEach(function (r) { if (r[0] === ri && r[2]) msg = r[2]; });
          li.appendChild(el("span", "msg", ruleName(ri) + (msg ? ": " + msg : "")));
        });
        ul.appendChild(li);
      });
      if (ep.more) ul.appendChild(el("li", "call", "\\u2026 " + ep.more + " more calls not shown"));
      d.appendChild(ul);
    } else {
      d.appendChild(el("div", "results empty", "no tool calls"));
    }
    return d;
  }
  function showMore() {
    var box = document.getElementById("episodes"), frag = document.createDocumentFragment();
    var stop = Math.min(matching.length, shownCount + PAGE);
    for (var i = shownCount; i < stop; i++) frag.appendChild(episodeNode(matching[i]));
    box.appendChild(frag); shownCount = stop;
    document.getElementById("shown").textContent = matching.length + " of " + D.episodes.length + " episodes match, " + shownCount + " shown";
    document.getElementById("more").style.display = shownCount < matching.length ? "" : "none";
  }
  function apply() {
    var t = performance.now();
    var rule = fr.value, agent = fa.value, verdict = fv.value;
    matching = D.episodes.filter(function (ep) { return matches(ep, rule, agent, verdict); });
    document.getElementById("episodes").textContent = ""; shownCount = 0;
    showMore(); chart(matching);
    window.__spanassertFilterMs = performance.now() - t;
  }
  [fr, fa, fv].forEach(function (s) { s.addEventListener("change", apply); });
  document.getElementById("more").addEventListener("click", showMore);
  apply();
  window.__spanassertRenderMs = performance.now() - t0;
  window.__spanassertReadyAt = performance.now();
  document.body.dataset.ready = "1";
})();
</script>
</body>
</html>
"""
