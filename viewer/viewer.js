// SPDX-License-Identifier: MIT
// heapprof viewer: reads the JSON that `heapprof view` embedded (docs/viewer.md#data-model) and
// draws the summary, the flamegraph, the heap over time, the sites table and the growth list.
// Every string from the trace is untrusted: it reaches the page only through text nodes
// (el()/textContent) or canvas fillText, never as markup. No network, no libraries.
'use strict';

(function () {
  const D = JSON.parse(document.getElementById('heapprof-data').textContent);
  const S = D.strings;
  const KIND_INLINED = 8;
  const KIND_COLORS = ['#e8743b', '#c98a3e', '#4f86c6', '#5aa469', '#9b8bb4', '#a0a7ae'];

  // ---- formatting ----
  const fmtInt = (v) => Math.round(v).toLocaleString('en-US');
  function fmtBytes(v) {
    if (v < 1024) return fmtInt(v) + ' B';
    const units = ['KiB', 'MiB', 'GiB', 'TiB'];
    let u = -1;
    do { v /= 1024; u++; } while (v >= 1024 && u < units.length - 1);
    return v.toFixed(1) + ' ' + units[u];
  }
  function fmtDur(ns) {
    if (ns < 1e3) return fmtInt(ns) + ' ns';
    if (ns < 1e6) return (ns / 1e3).toFixed(1) + ' \u00b5s';
    if (ns < 1e9) return (ns / 1e6).toFixed(1) + ' ms';
    return (ns / 1e9).toFixed(2) + ' s';
  }
  const pct = (part, whole) => (whole > 0 ? (100 * part / whole).toFixed(1) + '%' : '-');

  // el('div', {class: 'x'}, 'text', child): strings become text nodes, never markup.
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    if (attrs) {
      for (const k in attrs) {
        if (k === 'class') e.className = attrs[k];
        else if (k === 'style') e.style.cssText = attrs[k];
        else if (k.startsWith('on')) e.addEventListener(k.slice(2), attrs[k]);
        else e.setAttribute(k, attrs[k]);
      }
    }
    for (const c of kids) {
      if (c === null || c === undefined || c === false) continue;
      e.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
    }
    return e;
  }
  function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); return e; }

  // ---- the model: frames, the prefix tree of stacks, sites ----
  const nFrames = D.frames.length / 3;
  const frameFn = new Uint32Array(nFrames), frameLoc = new Uint32Array(nFrames), frameKind = new Uint8Array(nFrames);
  for (let i = 0; i < nFrames; i++) {
    frameFn[i] = D.frames[3 * i]; frameLoc[i] = D.frames[3 * i + 1]; frameKind[i] = D.frames[3 * i + 2];
  }
  const nNodes = D.nodes.length / 2 + 1; // node 0 is the root
  const nodeParent = new Int32Array(nNodes), nodeFrame = new Int32Array(nNodes);
  nodeParent[0] = -1; nodeFrame[0] = -1;
  for (let i = 1; i < nNodes; i++) { nodeParent[i] = D.nodes[2 * i - 2]; nodeFrame[i] = D.nodes[2 * i - 1]; }
  const nSites = D.sites.node.length;
  const T = D.totals;

  const METRICS = [
    {id: 'bytes', label: 'bytes', bytes: true, what: 'bytes allocated'},
    {id: 'blocks', label: 'blocks', bytes: false, what: 'blocks allocated'},
    {id: 'peak', label: 'peak', bytes: true, what: 'bytes live at the global peak'},
    {id: 'leaked', label: 'leaked', bytes: true, what: 'bytes still live at exit'},
    {id: 'temporary', label: 'temporary', bytes: true, what: 'bytes of temporary blocks'},
    {id: 'growth', label: 'growth', bytes: true, what: 'bytes copied as blocks grew'},
    {id: 'cpu', label: 'cpu', bytes: false, what: 'CPU samples'},
  ];
  const colOf = (m) => D.sites[m] || null;
  // What a metric weighs: leaf nodes of the tree and their values. Allocation metrics weigh each
  // site's leaf; cpu weighs the CPU sample stacks, which need not be allocation sites.
  function weights(m) {
    if (m === 'cpu') return {node: D.cpu.node, value: D.cpu.count};
    return {node: D.sites.node, value: colOf(m)};
  }
  for (const m of METRICS) m.total = weights(m.id).value.reduce((a, b) => a + b, 0);
  const fmtMetric = (m, v) => (m.bytes ? fmtBytes(v) : fmtInt(v));

  function siteFrame(i) { return nodeFrame[D.sites.name[i]]; }
  function siteFn(i) { const f = siteFrame(i); return f < 0 ? '[root]' : S[frameFn[f]]; }
  function siteLoc(i) { const f = siteFrame(i); return f < 0 ? '' : S[frameLoc[f]]; }
  // frames of site i, innermost first
  function siteStack(i) {
    const out = [];
    for (let n = D.sites.node[i]; n > 0; n = nodeParent[n]) out.push(n);
    return out;
  }

  // ---- tabs and keyboard ----
  const views = ['summary', 'flame', 'time', 'sites', 'growth'];
  const rendered = {};
  const renderers = {};
  let current = null;
  function show(name) {
    if (!views.includes(name)) name = 'summary';
    current = name;
    for (const b of document.querySelectorAll('#tabs button')) {
      b.setAttribute('aria-selected', String(b.dataset.view === name));
      b.tabIndex = b.dataset.view === name ? 0 : -1;
    }
    for (const v of views) document.getElementById('view-' + v).classList.toggle('active', v === name);
    if (!rendered[name]) { rendered[name] = true; renderers[name](); }
    else if (renderers[name + 'Resize']) renderers[name + 'Resize']();
    if (location.hash !== '#' + name) history.replaceState(null, '', '#' + name);
  }
  for (const b of document.querySelectorAll('#tabs button')) b.addEventListener('click', () => show(b.dataset.view));
  document.getElementById('tabs').addEventListener('keydown', (e) => {
    if (e.key !== 'ArrowRight' && e.key !== 'ArrowLeft') return;
    const i = views.indexOf(current) + (e.key === 'ArrowRight' ? 1 : -1);
    show(views[(i + views.length) % views.length]);
    document.querySelector('#tabs button[aria-selected="true"]').focus();
  });
  document.addEventListener('keydown', (e) => {
    const t = e.target;
    const typing = t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA');
    if (typing) {
      if (e.key === 'Escape') { t.value = ''; t.dispatchEvent(new Event('input')); t.blur(); }
      return;
    }
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.key >= '1' && e.key <= '5') { show(views[Number(e.key) - 1]); e.preventDefault(); }
    else if (e.key === '/') {
      const s = current === 'flame' ? 'flame-search' : current === 'sites' ? 'sites-filter' : null;
      if (s) { document.getElementById(s).focus(); e.preventDefault(); }
    } else if (e.key === 'Escape' && current === 'flame') flame.zoomTo(-1);
  });

  // ---- header and summary ----
  const programText = (D.argv.length ? D.argv.join(' ') : (D.exe || '')) || '(unknown program)';
  document.getElementById('program').textContent = programText + '   \u2014   pid ' + D.pid;
  document.title = 'heapprof: ' + (D.argv.length ? D.argv[0].split('/').pop() : 'trace');

  function card(k, v, s, warn) {
    return el('div', {class: 'card' + (warn ? ' warn' : '')}, el('div', {class: 'k'}, k), el('div', {class: 'v'}, v), s ? el('div', {class: 's'}, s) : null);
  }
  // A site's name and place; the name opens the site in the sites table, sorted by col.
  function siteLabel(i, col) {
    const loc = siteLoc(i);
    const b = el('button', {class: 'link', title: 'show this site and its stack in the sites table'}, siteFn(i));
    b.addEventListener('click', () => table.reveal(i, col || 'bytes'));
    return el('div', null, b, loc ? el('div', {class: 'loc'}, loc) : null);
  }
  renderers.summary = function () {
    const v = clear(document.getElementById('view-summary'));
    v.appendChild(el('h2', null, 'Program'));
    v.appendChild(el('div', {class: 'kv'},
      el('div', {class: 'k'}, 'command'), el('div', {class: 'mono', id: 'sum-program'}, programText),
      el('div', {class: 'k'}, 'executable'), el('div', {class: 'mono'}, D.exe || 'unknown'),
      el('div', {class: 'k'}, 'trace'), el('div', {class: 'mono'}, D.trace + '  (pid ' + D.pid + ')')));
    v.appendChild(el('h2', null, 'Totals'));
    const cpu = D.cpu.samples > 0 ? card('CPU samples', fmtInt(D.cpu.samples), D.cpu.source)
      : card('CPU samples', 'not recorded', D.cpu.source);
    const d = D.damage;
    v.appendChild(el('div', {class: 'cards', id: 'sum-cards'},
      card('duration', fmtDur(T.duration_ns), fmtInt(T.events) + ' events, ' + fmtInt(T.threads) + ' thread' + (T.threads === 1 ? '' : 's')),
      card('allocated', fmtBytes(T.bytes), fmtInt(T.blocks) + ' blocks (' + fmtInt(T.bytes) + ' bytes)'),
      card('freed', fmtInt(T.frees) + ' blocks', pct(T.frees, T.blocks) + ' of the blocks'),
      card('peak', fmtBytes(T.peak_bytes), fmtInt(T.peak_blocks) + ' blocks at ' + fmtDur(T.peak_time_ns)),
      card('leaked at exit', fmtBytes(T.end_bytes), fmtInt(T.end_blocks) + ' blocks still live', T.end_bytes > 0),
      card('sites', fmtInt(T.sites), fmtInt(T.stacks) + ' distinct stacks'),
      D.timeline && D.timeline.rss_peak ? card('peak RSS', fmtBytes(D.timeline.rss_peak), 'the resident set, sampled at each flush') : null,
      cpu,
      d.clean_exit ? null : card('trace', 'incomplete', 'no trailer: the process did not exit cleanly', true),
      d.chunks_damaged || d.chunks_missing ? card('damage', fmtInt(d.chunks_damaged) + ' chunks', fmtInt(d.chunks_missing) + ' missing by sequence number', true) : null,
      d.lost_events ? card('lost', fmtInt(d.lost_events) + ' events', 'the shim could not record them', true) : null));
    // allocations by requested size, power-of-two buckets: [min, blocks, bytes, ...]
    const sz = D.sizes || [];
    if (sz.length) {
      let most = 0;
      for (let i = 0; i < sz.length; i += 3) most = Math.max(most, sz[i + 1]);
      const tb = el('tbody');
      for (let i = 0; i < sz.length; i += 3) {
        const lo = sz[i], range = lo === 0 ? '0 B' : lo === 1 ? '1 B' : '[' + fmtBytes(lo) + ', ' + fmtBytes(lo * 2) + ')';
        const bar = el('div', {class: 'bar'});
        bar.style.width = Math.max(1, Math.round(sz[i + 1] / most * 100)) + '%';
        tb.appendChild(el('tr', null, el('td', {class: 'mono'}, range), el('td', {class: 'num'}, fmtInt(sz[i + 1])),
          el('td', {class: 'num'}, pct(sz[i + 1], T.blocks)), el('td', {class: 'num'}, fmtBytes(sz[i + 2])),
          el('td', {class: 'num'}, pct(sz[i + 2], T.bytes)), el('td', {class: 'barcell'}, bar)));
      }
      v.appendChild(el('h2', null, 'Allocation sizes'));
      v.appendChild(el('table', {class: 'grid', id: 'sum-sizes'}, el('thead', null, el('tr', null,
        el('th', null, 'requested size'), el('th', {class: 'num'}, 'blocks'), el('th', {class: 'num'}, 'share'),
        el('th', {class: 'num'}, 'bytes'), el('th', {class: 'num'}, 'share'), el('th', null, ''))), tb));
    }
    const tops = [['bytes', 'Top sites by bytes allocated'], ['peak', 'Top sites at the peak'], ['leaked', 'Top leaks (live at exit)']];
    for (const [m, title] of tops) {
      const c = colOf(m), idx = [];
      for (let i = 0; i < nSites; i++) if (c[i] > 0) idx.push(i);
      idx.sort((a, b) => c[b] - c[a]);
      if (!idx.length) continue;
      const met = METRICS.find((x) => x.id === m);
      v.appendChild(el('h2', null, title));
      const tb = el('tbody');
      for (const i of idx.slice(0, 5)) {
        tb.appendChild(el('tr', null, el('td', null, siteLabel(i, m)), el('td', {class: 'num'}, fmtMetric(met, c[i])),
          el('td', {class: 'num'}, pct(c[i], met.total))));
      }
      v.appendChild(el('table', {class: 'grid'}, el('thead', null, el('tr', null, el('th', null, 'site'), el('th', {class: 'num'}, met.what), el('th', {class: 'num'}, 'share'))), tb));
    }
  };

  // ---- flamegraph ----
  // A flame tree merges the prefix tree's nodes by function name under each parent (two lines
  // of one function are one frame, as in every flamegraph). Built once top-down; bottom-up is
  // built per metric from the sites with a value.
  function newTree() {
    return {parent: [-1], fn: [-1], kind: [5], loc: [0], multi: [0], kids: [new Map()], self: null, total: null, count: 1};
  }
  function treeChild(t, p, fn, kind, loc) {
    let c = t.kids[p].get(fn);
    if (c === undefined) {
      c = t.count++;
      t.parent.push(p); t.fn.push(fn); t.kind.push(kind); t.loc.push(loc); t.multi.push(0); t.kids.push(new Map());
      t.kids[p].set(fn, c);
    } else if (t.loc[c] !== loc) t.multi[c] = 1; // several lines of one function
    return c;
  }
  let topDown = null, topDownOf = null;
  function buildTopDown() {
    const t = newTree();
    topDownOf = new Int32Array(nNodes);
    for (let i = 1; i < nNodes; i++) {
      const f = nodeFrame[i];
      topDownOf[i] = treeChild(t, topDownOf[nodeParent[i]], frameFn[f], frameKind[f], frameLoc[f]);
    }
    return t;
  }
  function fillValues(t, w) {
    const total = new Float64Array(t.count), self = new Float64Array(t.count);
    for (let i = 0; i < w.node.length; i++) { const v = w.value[i]; if (v) self[topDownOf[w.node[i]]] += v; }
    for (let n = 0; n < t.count; n++) total[n] = self[n];
    for (let n = t.count - 1; n > 0; n--) total[t.parent[n]] += total[n];
    t.self = self; t.total = total;
  }
  function buildBottomUp(w) {
    const t = newTree();
    const total = [0];
    for (let i = 0; i < w.node.length; i++) {
      const v = w.value[i];
      if (!v) continue;
      let p = 0;
      total[0] += v;
      for (let n = w.node[i]; n > 0; n = nodeParent[n]) {
        const f = nodeFrame[n];
        p = treeChild(t, p, frameFn[f], frameKind[f], frameLoc[f]);
        total[p] = (total[p] || 0) + v;
      }
    }
    t.total = Float64Array.from({length: t.count}, (_, k) => total[k] || 0);
    t.self = new Float64Array(t.count);
    return t;
  }

  const flame = {
    metric: METRICS[0], inverted: false, tree: null, zoom: 0, rects: [], search: null, kidsCache: new Map(),
    canvas: document.getElementById('flame'), rowH: 18, hover: -1, matchedShare: 0,
  };
  // children with a value, widest first; cached until the next rebuild, since every hover redraws
  flame.sortedKids = function (n) {
    let k = this.kidsCache.get(n);
    if (k) return k;
    const t = this.tree;
    k = Array.from(t.kids[n].values()).filter((c) => t.total[c] > 0);
    k.sort((a, b) => t.total[b] - t.total[a] || (S[t.fn[a]] < S[t.fn[b]] ? -1 : 1));
    this.kidsCache.set(n, k);
    return k;
  };
  flame.rebuild = function () {
    const w = weights(this.metric.id);
    this.kidsCache = new Map();
    if (this.inverted) this.tree = buildBottomUp(w);
    else {
      if (!topDown) topDown = buildTopDown();
      fillValues(topDown, w);
      this.tree = topDown;
    }
    this.zoom = 0;
    this.draw();
  };
  flame.nameOf = function (n) { return n === 0 ? 'all' : S[this.tree.fn[n]]; };
  flame.locOf = function (n) {
    const t = this.tree;
    return n === 0 ? '' : S[t.loc[n]] + (t.multi[n] ? (S[t.loc[n]] ? ' and other lines' : 'several lines') : '');
  };
  flame.zoomTo = function (n) { this.zoom = n < 0 ? 0 : n; this.draw(); this.details(n < 0 ? -1 : n); };
  flame.matches = function (n) { return this.search !== null && n > 0 && this.search.test(S[this.tree.fn[n]]); };
  flame.color = function (n) {
    const t = this.tree;
    const kind = t.kind[n] & 7;
    if (n === 0) return '#c9ced4';
    const name = S[t.fn[n]];
    let h = 0;
    for (let i = 0; i < name.length && i < 24; i++) h = (h * 31 + name.charCodeAt(i)) | 0;
    const j = ((h >>> 0) % 1000) / 1000;
    const base = {0: [22, 80, 58], 1: [35, 55, 55], 2: [212, 45, 60], 3: [135, 35, 55], 4: [265, 22, 68], 5: [210, 6, 66]}[kind];
    return 'hsl(' + (base[0] + (j - 0.5) * 18) + ',' + base[1] + '%,' + (base[2] + (j - 0.5) * 10) + '%)';
  };
  flame.draw = function () {
    const t = this.tree;
    if (!t) return;
    const wrap = document.getElementById('flame-wrap');
    const W = Math.max(300, wrap.clientWidth - 2);
    const rowH = this.rowH;
    const rects = [];
    // ancestors of the zoomed frame, full width, above it
    const chain = [];
    for (let n = this.zoom; n >= 0; n = t.parent[n]) chain.unshift(n);
    chain.forEach((n, d) => rects.push({n, x: 0, w: W, d, anc: n !== this.zoom}));
    const base = chain.length - 1;
    const rootTotal = t.total[this.zoom] || 1;
    const minW = 0.35;
    let maxD = base;
    const stack = [[this.zoom, 0, base]];
    while (stack.length) {
      const [n, x0, d] = stack.pop();
      let x = x0;
      for (const c of this.sortedKids(n)) {
        const w = t.total[c] / rootTotal * W;
        if (w >= minW) {
          rects.push({n: c, x, w, d: d + 1});
          if (d + 1 > maxD) maxD = d + 1;
          stack.push([c, x, d + 1]);
        }
        x += w;
      }
    }
    const H = (maxD + 1) * rowH + 2;
    const dpr = window.devicePixelRatio || 1;
    const cv = this.canvas;
    cv.width = Math.floor(W * dpr); cv.height = Math.floor(Math.min(H, 30000) * dpr);
    cv.style.width = W + 'px'; cv.style.height = Math.min(H, 30000) + 'px';
    const g = cv.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, W, H);
    g.font = '12px ' + getComputedStyle(document.body).getPropertyValue('--mono');
    g.textBaseline = 'middle';
    const searching = this.search !== null;
    for (const r of rects) {
      const y = r.d * rowH;
      const hit = searching && this.matches(r.n);
      g.globalAlpha = r.anc ? 0.55 : searching && !hit ? 0.35 : 1;
      g.fillStyle = hit ? '#d946ef' : this.color(r.n);
      g.fillRect(r.x + 0.5, y + 0.5, Math.max(r.w - 1, 0.5), rowH - 1);
      if (r.n === this.hover) { g.strokeStyle = '#111827'; g.lineWidth = 1; g.strokeRect(r.x + 0.5, y + 0.5, Math.max(r.w - 1, 0.5), rowH - 1); }
      if (r.w > 28) {
        g.fillStyle = hit ? '#fff' : '#111';
        let label = this.nameOf(r.n);
        const room = Math.floor((r.w - 6) / 7.2);
        if (label.length > room) label = room > 2 ? label.slice(0, room - 1) + '\u2026' : '';
        if (label) g.fillText(label, r.x + 3, y + rowH / 2 + 0.5);
      }
    }
    g.globalAlpha = 1;
    this.rects = rects;
    this.crumbs(chain);
    this.updateMatch();
  };
  flame.crumbs = function (chain) {
    const c = clear(document.getElementById('flame-crumbs'));
    c.appendChild(document.createTextNode((this.inverted ? 'bottom-up' : 'top-down') + ' \u00b7 ' + this.metric.what + ': '));
    chain.forEach((n, i) => {
      if (i) c.appendChild(document.createTextNode(' \u203a '));
      const b = el('button', {title: 'zoom to this frame'}, this.nameOf(n).slice(0, 60));
      b.addEventListener('click', () => this.zoomTo(n));
      c.appendChild(b);
    });
    c.appendChild(document.createTextNode('  ' + fmtMetric(this.metric, this.tree.total[this.zoom]) + ' (' + pct(this.tree.total[this.zoom], this.tree.total[0]) + ')'));
  };
  flame.updateMatch = function () {
    const m = document.getElementById('flame-match');
    if (this.search === null) { m.textContent = ''; return; }
    // each matched frame counts once, with what is under it; a match inside a match adds nothing
    const t = this.tree;
    let sum = 0, frames = 0;
    const stack = [this.zoom];
    while (stack.length) {
      const n = stack.pop();
      if (this.matches(n)) { sum += t.total[n]; frames++; continue; }
      for (const c of t.kids[n].values()) if (t.total[c] > 0) stack.push(c);
    }
    this.matchedShare = t.total[this.zoom] ? sum / t.total[this.zoom] : 0;
    m.textContent = 'matched ' + fmtMetric(this.metric, sum) + ' (' + pct(sum, t.total[this.zoom]) + ')' + (frames ? '' : ' \u2014 no frame matches');
  };
  flame.at = function (ev) {
    const r = this.canvas.getBoundingClientRect();
    const x = ev.clientX - r.left, y = ev.clientY - r.top;
    const d = Math.floor(y / this.rowH);
    for (const q of this.rects) if (q.d === d && x >= q.x && x < q.x + q.w) return q.n;
    return -1;
  };
  flame.describe = function (n) {
    const t = this.tree;
    const v = t.total[n];
    const kind = t.kind[n];
    return {
      fn: this.nameOf(n), loc: this.locOf(n),
      line: fmtMetric(this.metric, v) + ' \u00b7 ' + pct(v, t.total[0]) + ' of all' +
        (this.zoom ? ' \u00b7 ' + pct(v, t.total[this.zoom]) + ' of zoom' : '') +
        (t.self[n] ? ' \u00b7 self ' + fmtMetric(this.metric, t.self[n]) : '') +
        (n ? ' \u00b7 ' + D.kinds[kind & 7] + (kind & KIND_INLINED ? ', inlined' : '') : ''),
    };
  };
  flame.details = function (n) {
    const box = clear(document.getElementById('flame-details'));
    if (!this.tree.total[0]) { box.appendChild(el('span', {class: 'muted'}, 'Nothing to draw: ' + this.metric.what + ' is 0 in this trace.')); return; }
    if (n < 0) { box.appendChild(el('span', {class: 'muted'}, 'Hover a frame (or move with the arrow keys) for its figures; click it (or Enter) to zoom in; Esc, Backspace or a crumb zooms out.')); return; }
    const d = this.describe(n);
    box.appendChild(el('div', {class: 'fn mono', id: 'flame-details-fn'}, d.fn));
    if (d.loc) box.appendChild(el('div', {class: 'loc mono muted'}, d.loc));
    box.appendChild(el('div', null, d.line));
  };
  const tip = document.getElementById('tooltip');
  flame.canvas.addEventListener('mousemove', (ev) => {
    const n = flame.at(ev);
    if (n !== flame.hover) { flame.hover = n; flame.draw(); if (n >= 0) flame.details(n); }
    if (n < 0) { tip.style.display = 'none'; return; }
    const d = flame.describe(n);
    clear(tip).appendChild(el('div', {class: 'fn'}, d.fn));
    if (d.loc) tip.appendChild(el('div', {class: 'loc'}, d.loc));
    tip.appendChild(el('div', null, d.line));
    tip.style.display = 'block';
    const tx = Math.min(ev.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
    const ty = ev.clientY + 16 + tip.offsetHeight > window.innerHeight ? ev.clientY - tip.offsetHeight - 8 : ev.clientY + 16;
    tip.style.left = tx + 'px'; tip.style.top = ty + 'px';
  });
  // keyboard: the arrows move the highlighted frame (down: widest child, up: parent, left and
  // right: siblings), Enter zooms into it, Backspace zooms out
  flame.canvas.addEventListener('keydown', (ev) => {
    const t = flame.tree;
    let h = flame.hover;
    if (ev.key === 'Enter' && h >= 0) { flame.zoomTo(h); ev.preventDefault(); return; }
    if (ev.key === 'Backspace') { if (flame.zoom > 0) flame.zoomTo(t.parent[flame.zoom]); ev.preventDefault(); return; }
    if (ev.key === 'ArrowDown') { const k = flame.sortedKids(h < 0 ? flame.zoom : h); if (k.length) h = k[0]; }
    else if (ev.key === 'ArrowUp') h = h < 0 ? flame.zoom : h > 0 ? t.parent[h] : h;
    else if (ev.key === 'ArrowLeft' || ev.key === 'ArrowRight') {
      if (h <= 0) return;
      const sib = flame.sortedKids(t.parent[h]), i = sib.indexOf(h) + (ev.key === 'ArrowRight' ? 1 : -1);
      if (i >= 0 && i < sib.length) h = sib[i];
    } else return;
    ev.preventDefault();
    if (h !== flame.hover) { flame.hover = h; flame.draw(); flame.details(h); }
  });
  flame.canvas.addEventListener('mouseleave', () => { tip.style.display = 'none'; flame.hover = -1; flame.draw(); });
  flame.canvas.addEventListener('click', (ev) => {
    const n = flame.at(ev);
    if (n >= 0) flame.zoomTo(n === flame.zoom ? flame.tree.parent[n] : n);
  });
  renderers.flame = function () {
    const seg = document.getElementById('metrics');
    for (const m of METRICS) {
      const b = el('button', {role: 'radio', 'aria-checked': String(m === flame.metric), 'data-metric': m.id,
        title: m.total > 0 ? m.what + ': ' + fmtMetric(m, m.total) : m.id === 'cpu' ? 'CPU samples: not recorded (' + D.cpu.source + ')' : 'nothing to show: ' + m.what + ' is 0'}, m.label);
      if (!(m.total > 0)) b.disabled = true;
      b.addEventListener('click', () => {
        flame.metric = m;
        for (const x of seg.children) x.setAttribute('aria-checked', String(x === b));
        flame.rebuild();
        flame.details(-1);
      });
      seg.appendChild(b);
    }
    const legend = el('span', {class: 'legend'});
    D.kinds.forEach((k, i) => legend.appendChild(el('span', null, el('i', {style: 'background:' + KIND_COLORS[i]}), k)));
    document.querySelector('#view-flame .toolbar').appendChild(legend);
    document.getElementById('inverted').addEventListener('change', (e) => { flame.inverted = e.target.checked; flame.rebuild(); flame.details(-1); });
    document.getElementById('flame-reset').addEventListener('click', () => flame.zoomTo(-1));
    document.getElementById('flame-search').addEventListener('input', (e) => {
      const q = e.target.value;
      if (!q) flame.search = null;
      else {
        try { flame.search = new RegExp(q, 'i'); } catch (err) { flame.search = new RegExp(q.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'i'); }
      }
      flame.draw();
    });
    flame.rebuild();
    flame.details(-1);
  };
  renderers.flameResize = () => flame.draw();

  // ---- heap over time ----
  const TL = D.timeline;
  const time = {canvas: document.getElementById('timeline'), sel: -1, pad: {l: 70, r: 34, t: 18, b: 30}};
  function niceStep(range, n) {
    const raw = range / n, p = Math.pow(10, Math.floor(Math.log10(raw || 1)));
    const f = raw / p;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * p;
  }
  function niceBytesStep(max) {
    let unit = 1;
    while (max / unit >= 1024 * 4 && unit < 1024 ** 4) unit *= 1024;
    return niceStep(max / unit, 4) * unit;
  }
  time.draw = function () {
    const wrap = document.getElementById('time-wrap');
    const W = Math.max(300, wrap.clientWidth - 2), H = 320;
    const dpr = window.devicePixelRatio || 1;
    const cv = this.canvas;
    cv.width = Math.floor(W * dpr); cv.height = Math.floor(H * dpr);
    cv.style.width = W + 'px'; cv.style.height = H + 'px';
    const g = cv.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, W, H);
    const p = this.pad, pw = W - p.l - p.r, ph = H - p.t - p.b;
    const tEnd = Math.max(T.duration_ns, 1);
    // the resident set (sampled at every flush) shares the axis: the gap is what the allocator
    // keeps and what the rest of the process maps
    const rss = TL.rss || [];
    const vMax = Math.max(T.peak_bytes, TL.rss_peak || 0, 1) * 1.08;
    const X = (t) => p.l + t / tEnd * pw, Y = (v) => p.t + ph - v / vMax * ph;
    this.X = X; this.tEnd = tEnd; this.pw = pw;
    g.font = '11px ' + getComputedStyle(document.body).getPropertyValue('--sans');
    g.fillStyle = '#68717a'; g.strokeStyle = '#eceff2'; g.lineWidth = 1;
    const ys = niceBytesStep(vMax);
    g.textAlign = 'right'; g.textBaseline = 'middle';
    for (let v = 0; v <= vMax; v += ys) {
      g.beginPath(); g.moveTo(p.l, Y(v) + 0.5); g.lineTo(W - p.r, Y(v) + 0.5); g.stroke();
      g.fillText(fmtBytes(v), p.l - 6, Y(v));
    }
    const xs = niceStep(tEnd, Math.max(2, Math.floor(pw / 110)));
    g.textAlign = 'center'; g.textBaseline = 'top';
    for (let t = 0; t <= tEnd; t += xs) g.fillText(fmtDur(t), X(t), H - p.b + 6);
    // the maximum per bucket as an area, the value at each bucket's end as a line
    const n = TL.t.length;
    const bw = TL.bucket_ns;
    g.beginPath(); g.moveTo(X(0), Y(0));
    for (let i = 0; i < n; i++) { g.lineTo(X(TL.t[i]), Y(TL.max[i])); g.lineTo(X(Math.min(TL.t[i] + bw, tEnd)), Y(TL.max[i])); }
    g.lineTo(X(n ? Math.min(TL.t[n - 1] + bw, tEnd) : 0), Y(0)); g.closePath();
    g.fillStyle = 'rgba(234, 88, 12, 0.22)'; g.fill();
    g.beginPath();
    for (let i = 0; i < n; i++) { const x = X(Math.min(TL.t[i] + bw, tEnd)), y = Y(TL.last[i]); i ? g.lineTo(x, y) : g.moveTo(x, y); }
    g.strokeStyle = '#c2410c'; g.lineWidth = 1.5; g.stroke();
    if (rss.length >= 2) {
      g.beginPath();
      for (let i = 0; i + 1 < rss.length; i += 2) {
        const x = X(Math.min(rss[i], tEnd)), y = Y(rss[i + 1]);
        i ? g.lineTo(x, y) : g.moveTo(x, y);
      }
      g.strokeStyle = '#2563eb'; g.lineWidth = 1.25; g.setLineDash([5, 3]); g.stroke(); g.setLineDash([]);
      g.fillStyle = '#2563eb'; g.textAlign = 'left'; g.textBaseline = 'top';
      g.fillText('resident set (RSS), peak ' + fmtBytes(TL.rss_peak), p.l + 6, p.t + 2);
      g.fillStyle = '#c2410c';
      g.fillText('heap: live bytes', p.l + 6, p.t + 16);
    }
    // the global peak, exact
    const px = X(T.peak_time_ns), py = Y(T.peak_bytes);
    g.setLineDash([4, 3]); g.strokeStyle = '#b91c1c'; g.lineWidth = 1;
    g.beginPath(); g.moveTo(px + 0.5, p.t); g.lineTo(px + 0.5, p.t + ph); g.stroke(); g.setLineDash([]);
    g.fillStyle = '#b91c1c'; g.beginPath(); g.arc(px, py, 4, 0, 2 * Math.PI); g.fill();
    const label = 'peak ' + fmtBytes(T.peak_bytes) + ' at ' + fmtDur(T.peak_time_ns);
    g.textBaseline = 'bottom'; g.textAlign = px > W / 2 ? 'right' : 'left';
    g.fillText(label, px + (px > W / 2 ? -8 : 8), Math.max(py - 4, p.t + 12));
    if (this.selT !== undefined) {
      const sx = X(this.selT);
      g.strokeStyle = '#2563eb'; g.lineWidth = 1.5;
      g.beginPath(); g.moveTo(sx, p.t); g.lineTo(sx, p.t + ph); g.stroke();
    }
    g.strokeStyle = '#9aa3ad'; g.lineWidth = 1;
    g.beginPath(); g.moveTo(p.l + 0.5, p.t); g.lineTo(p.l + 0.5, p.t + ph + 0.5); g.lineTo(W - p.r, p.t + ph + 0.5); g.stroke();
  };
  // Picks what to show for a clicked time: the exact peak or end figures when the click is
  // closest to them, else the nearest snapshot (docs/viewer.md#heap-over-time).
  time.moments = function () {
    if (this._m) return this._m;
    const m = TL.snaps.map((s, k) => ({t: s[0], live: s[1], kind: 'snap', k}));
    m.push({t: T.peak_time_ns, live: T.peak_bytes, kind: 'peak'});
    m.push({t: T.duration_ns, live: T.end_bytes, kind: 'end'});
    m.sort((a, b) => a.t - b.t);
    return (this._m = m);
  };
  time.select = function (idx) {
    const ms = this.moments();
    idx = Math.max(0, Math.min(ms.length - 1, idx));
    this.sel = idx;
    const mo = ms[idx];
    this.selT = mo.t;
    this.draw();
    const box = clear(document.getElementById('time-details'));
    let rows = [];
    if (mo.kind === 'snap') {
      const s = TL.snaps[mo.k];
      for (let j = 2; j + 1 < s.length; j += 2) rows.push([s[j], s[j + 1]]);
    } else {
      const c = colOf(mo.kind === 'peak' ? 'peak' : 'leaked');
      for (let i = 0; i < nSites; i++) if (c[i] > 0) rows.push([i, c[i]]);
      rows.sort((a, b) => b[1] - a[1]);
      rows = rows.slice(0, TL.top);
    }
    const what = mo.kind === 'peak' ? 'at the global peak' : mo.kind === 'end' ? 'at exit' : 'at ' + fmtDur(mo.t);
    box.appendChild(el('h2', {id: 'time-title'}, 'Live ' + what + ': ' + fmtBytes(mo.live) + (mo.kind === 'snap' ? '' : ' (exact)')));
    if (!rows.length) { box.appendChild(el('div', {class: 'empty'}, 'Nothing was live then.')); return; }
    const tb = el('tbody');
    let shown = 0;
    for (const [i, b] of rows) {
      shown += b;
      tb.appendChild(el('tr', null, el('td', null, siteLabel(i, 'max_bytes')), el('td', {class: 'num'}, fmtBytes(b)),
        el('td', {class: 'num', style: 'width:160px'}, pct(b, mo.live), el('div', {class: 'bar', style: 'width:' + (mo.live ? Math.max(1, 100 * b / mo.live) : 0) + '%'}))));
    }
    if (mo.live > shown) tb.appendChild(el('tr', null, el('td', {class: 'muted'}, 'other sites'), el('td', {class: 'num muted'}, fmtBytes(mo.live - shown)), el('td', {class: 'num muted'}, pct(mo.live - shown, mo.live))));
    box.appendChild(el('table', {class: 'grid', id: 'time-table'}, el('thead', null, el('tr', null, el('th', null, 'site (top ' + TL.top + ')'), el('th', {class: 'num'}, 'live bytes'), el('th', {class: 'num'}, 'share'))), tb));
  };
  time.canvas.addEventListener('click', (ev) => {
    const r = time.canvas.getBoundingClientRect();
    const t = (ev.clientX - r.left - time.pad.l) / time.pw * time.tEnd;
    const ms = time.moments();
    let best = 0;
    for (let i = 1; i < ms.length; i++) if (Math.abs(ms[i].t - t) < Math.abs(ms[best].t - t)) best = i;
    time.select(best);
  });
  // hover: the bucket under the pointer, its time and live bytes
  time.canvas.addEventListener('mousemove', (ev) => {
    const r = time.canvas.getBoundingClientRect();
    const t = (ev.clientX - r.left - time.pad.l) / time.pw * time.tEnd;
    const n = TL.t.length;
    if (!n || t < 0 || t > time.tEnd) { tip.style.display = 'none'; return; }
    const k = Math.min(n - 1, Math.max(0, Math.floor(t / TL.bucket_ns)));
    clear(tip).appendChild(el('div', null, 'at ' + fmtDur(TL.t[k]) + ' (a bucket of ' + fmtDur(TL.bucket_ns) + ')'));
    tip.appendChild(el('div', null, 'live ' + fmtBytes(TL.last[k]) + ' at the end, at most ' + fmtBytes(TL.max[k])));
    tip.appendChild(el('div', {class: 'loc'}, 'click for the sites live then'));
    tip.style.display = 'block';
    tip.style.left = Math.min(ev.clientX + 14, window.innerWidth - tip.offsetWidth - 8) + 'px';
    tip.style.top = (ev.clientY + 16) + 'px';
  });
  time.canvas.addEventListener('mouseleave', () => { tip.style.display = 'none'; });
  time.canvas.addEventListener('keydown', (ev) => {
    if (ev.key === 'ArrowRight' || ev.key === 'ArrowLeft') { time.select((time.sel < 0 ? 0 : time.sel) + (ev.key === 'ArrowRight' ? 1 : -1)); ev.preventDefault(); }
  });
  renderers.time = function () {
    const bar = document.querySelector('#view-time .toolbar');
    const pk = el('button', {id: 'time-peak'}, 'at peak'), end = el('button', {id: 'time-end'}, 'at exit');
    pk.addEventListener('click', () => time.select(time.moments().findIndex((m) => m.kind === 'peak')));
    end.addEventListener('click', () => time.select(time.moments().findIndex((m) => m.kind === 'end')));
    bar.insertBefore(end, bar.firstChild); bar.insertBefore(pk, bar.firstChild);
    time.select(time.moments().findIndex((m) => m.kind === 'peak'));
  };
  renderers.timeResize = () => time.draw();

  // ---- sites table ----
  const COLS = [
    {id: 'site', label: 'site', num: false},
    {id: 'bytes', label: 'bytes', bytes: true}, {id: 'blocks', label: 'blocks', bytes: false},
    {id: 'peak', label: 'at peak', bytes: true}, {id: 'leaked', label: 'leaked', bytes: true},
    {id: 'temporary', label: 'temporary', bytes: true}, {id: 'growth', label: 'growth copied', bytes: true},
    {id: 'max_bytes', label: 'max live', bytes: true}, {id: 'lifetime_us', label: 'avg lifetime', us: true},
  ];
  const table = {sort: 'bytes', desc: true, filter: '', order: null, shown: 0, open: new Set(), page: 200};
  table.compute = function () {
    let idx = [];
    if (this.filter) {
      // a site matches when any frame of its stack does: test each distinct frame once, then
      // spread down the prefix tree (parents come before children)
      const q = this.filter.toLowerCase();
      const fm = new Uint8Array(nFrames);
      for (let f = 0; f < nFrames; f++) fm[f] = S[frameFn[f]].toLowerCase().includes(q) || S[frameLoc[f]].toLowerCase().includes(q) ? 1 : 0;
      const nm = new Uint8Array(nNodes);
      for (let n = 1; n < nNodes; n++) nm[n] = nm[nodeParent[n]] | fm[nodeFrame[n]];
      for (let i = 0; i < nSites; i++) if (nm[D.sites.node[i]]) idx.push(i);
    } else idx = Array.from({length: nSites}, (_, i) => i);
    const dir = this.desc ? -1 : 1;
    if (this.sort === 'site') {
      idx.sort((a, b) => dir * (siteFn(a) < siteFn(b) ? -1 : siteFn(a) > siteFn(b) ? 1 : 0));
    } else {
      const c = D.sites[this.sort];
      idx.sort((a, b) => dir * (c[a] - c[b]) || D.sites.bytes[b] - D.sites.bytes[a]);
    }
    this.order = idx;
  };
  table.head = function () {
    const tr = el('tr');
    for (const c of COLS) {
      const th = el('th', {class: c.id === 'site' ? '' : 'num', 'data-col': c.id});
      if (c.id === this.sort) th.setAttribute('aria-sort', this.desc ? 'descending' : 'ascending');
      const b = el('button', {title: 'sort by ' + c.label}, c.label);
      b.addEventListener('click', () => {
        if (this.sort === c.id) this.desc = !this.desc;
        else { this.sort = c.id; this.desc = c.id !== 'site'; }
        this.refresh();
      });
      th.appendChild(b);
      tr.appendChild(th);
    }
    clear(document.querySelector('#sites-table thead')).appendChild(tr);
  };
  table.stackRow = function (i) {
    const ol = el('ol', {class: 'stack'});
    const nameNode = D.sites.name[i];
    for (const n of siteStack(i)) {
      const f = nodeFrame[n], kind = frameKind[f];
      ol.appendChild(el('li', {class: n === nameNode ? 'name' : ''},
        el('span', {class: 'chip', style: 'background:' + KIND_COLORS[kind & 7], title: D.kinds[kind & 7]}),
        S[frameFn[f]], S[frameLoc[f]] ? el('span', {class: 'loc'}, S[frameLoc[f]]) : null,
        kind & KIND_INLINED ? el('span', {class: 'tag'}, 'inlined') : null,
        n === nameNode ? el('span', {class: 'tag'}, 'names the site') : null));
    }
    return el('tr', {class: 'stack'}, el('td', {colspan: String(COLS.length)}, el('div', {class: 'muted', style: 'font-size:12px;margin-bottom:4px'}, 'stack, innermost first:'), ol));
  };
  table.row = function (i) {
    const open = this.open.has(i);
    const tr = el('tr', {class: 'site' + (open ? ' open' : ''), tabindex: '0', 'aria-expanded': String(open), 'data-site': String(i)});
    for (const c of COLS) {
      if (c.id === 'site') {
        tr.appendChild(el('td', null, el('div', {class: 'fn'}, el('span', {class: 'caret'}, open ? '\u25BE' : '\u25B8'), siteFn(i)), siteLoc(i) ? el('div', {class: 'loc', style: 'margin-left:12px'}, siteLoc(i)) : null));
      } else {
        const v = D.sites[c.id][i];
        tr.appendChild(el('td', {class: 'num'}, v ? (c.bytes ? fmtBytes(v) : c.us ? fmtDur(v * 1000) : fmtInt(v)) : '\u00b7'));
      }
    }
    const toggle = () => {
      if (this.open.has(i)) this.open.delete(i); else this.open.add(i);
      const fresh = this.row(i);
      const next = tr.nextSibling;
      if (next && next.classList.contains('stack')) next.remove();
      tr.replaceWith(fresh);
      if (this.open.has(i)) fresh.after(this.stackRow(i));
      fresh.focus();
    };
    tr.addEventListener('click', toggle);
    tr.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' || e.key === ' ') { toggle(); e.preventDefault(); }
      else if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
        let s = e.key === 'ArrowDown' ? tr.nextSibling : tr.previousSibling;
        while (s && !s.classList.contains('site')) s = e.key === 'ArrowDown' ? s.nextSibling : s.previousSibling;
        if (s) s.focus();
        e.preventDefault();
      }
    });
    return tr;
  };
  table.more = function () {
    const tb = document.querySelector('#sites-table tbody');
    const end = Math.min(this.order.length, this.shown + this.page);
    const frag = document.createDocumentFragment();
    for (let k = this.shown; k < end; k++) {
      const i = this.order[k];
      frag.appendChild(this.row(i));
      if (this.open.has(i)) frag.appendChild(this.stackRow(i));
    }
    tb.appendChild(frag);
    this.shown = end;
    const left = this.order.length - end;
    const b = document.getElementById('sites-more');
    b.style.display = left > 0 ? '' : 'none';
    b.textContent = 'show ' + fmtInt(Math.min(left, this.page)) + ' more (' + fmtInt(left) + ' left)';
  };
  table.refresh = function () {
    this.compute();
    this.head();
    clear(document.querySelector('#sites-table tbody'));
    this.shown = 0;
    this.more();
    document.getElementById('sites-count').textContent = fmtInt(this.order.length) + ' of ' + fmtInt(nSites) + ' sites' + (this.filter ? ' match' : '') + ' \u00b7 click a row (or Enter) for its stack';
  };
  // Opens the sites table sorted by col with site i expanded, scrolled to and focused.
  table.reveal = function (i, col) {
    this.sort = col; this.desc = true; this.filter = '';
    document.getElementById('sites-filter').value = '';
    this.open.add(i);
    if (rendered.sites) this.refresh();
    show('sites');
    const k = this.order.indexOf(i);
    while (k >= this.shown && this.shown < this.order.length) this.more();
    const row = document.querySelector('#sites-table tr.site[data-site="' + i + '"]');
    if (row) { row.scrollIntoView({block: 'center'}); row.focus({preventScroll: true}); }
  };
  renderers.sites = function () {
    let timer = 0;
    document.getElementById('sites-filter').addEventListener('input', (e) => {
      clearTimeout(timer);
      timer = setTimeout(() => { table.filter = e.target.value.trim(); table.refresh(); }, nSites > 20000 ? 150 : 0);
    });
    document.getElementById('sites-more').addEventListener('click', () => table.more());
    table.refresh();
  };

  // ---- growth hotspots and reserved-but-untouched ----
  // The untouched list comes from D.untouched: null until the trace measures touched bytes.
  function untouchedSection(v) {
    v.appendChild(el('h2', null, 'Reserved but untouched'));
    if (D.untouched === null || D.untouched === undefined) {
      v.appendChild(el('div', {class: 'empty', id: 'untouched-none'}, 'Not measured: this trace has no touched-bytes figures, so memory that was allocated but never written cannot be told apart.'));
      return;
    }
    const U = D.untouched;
    v.appendChild(el('div', {class: 'muted', style: 'margin-bottom:8px'}, 'Of ' + fmtBytes(U.bytes) + ' in ' + fmtInt(U.blocks) + ' measured blocks (freed, or live at exit), ' +
      fmtBytes(U.bytes - U.touched) + ' (' + pct(U.bytes - U.touched, U.bytes) + ') were never touched.'));
    if (!U.sites.length) { v.appendChild(el('div', {class: 'empty'}, 'Every site wrote to all the memory it allocated.')); return; }
    const tb = el('tbody');
    for (const [i, blocks, bytes, touched, byPages] of U.sites) {
      tb.appendChild(el('tr', null, el('td', null, siteLabel(i)), el('td', {class: 'num'}, fmtBytes(bytes - touched)), el('td', {class: 'num'}, pct(bytes - touched, bytes)),
        el('td', {class: 'num'}, fmtBytes(bytes)), el('td', {class: 'num'}, fmtInt(blocks)),
        el('td', {class: 'num'}, fmtBytes(touched / blocks) + ' of ' + fmtBytes(bytes / blocks)),
        el('td', null, byPages === 0 ? 'pattern' : byPages === blocks ? 'resident pages' : 'both')));
    }
    v.appendChild(el('table', {class: 'grid', id: 'untouched-table'}, el('thead', null, el('tr', null, el('th', null, 'site'), el('th', {class: 'num'}, 'never touched'), el('th', {class: 'num'}, 'share'),
      el('th', {class: 'num'}, 'allocated'), el('th', {class: 'num'}, 'blocks'), el('th', {class: 'num'}, 'avg touched'), el('th', null, 'measured by'))), tb));
  }
  renderers.growth = function () {
    const v = clear(document.getElementById('view-growth'));
    v.appendChild(el('h2', null, 'Growth hotspots'));
    v.appendChild(el('div', {class: 'muted', style: 'margin-bottom:8px'}, 'Sites whose blocks keep being replaced by larger ones (realloc, or allocate-copy-free as vectors and hash maps grow), by bytes copied.'));
    if (!D.growth.length) v.appendChild(el('div', {class: 'empty'}, 'No growth chains: no block was repeatedly replaced by a larger one.'));
    else {
      const tb = el('tbody');
      for (const g of D.growth) {
        const [i, chains, steps, reallocSteps, moves, copied, finalMax] = g;
        tb.appendChild(el('tr', null, el('td', null, siteLabel(i, 'growth'), el('div', {class: 'advice'}, g[8])),
          el('td', {class: 'num'}, fmtBytes(copied)), el('td', {class: 'num'}, fmtInt(steps)),
          el('td', {class: 'num'}, fmtInt(reallocSteps)), el('td', {class: 'num'}, fmtInt(moves)),
          el('td', {class: 'num'}, fmtInt(chains)), el('td', {class: 'num'}, fmtBytes(finalMax))));
      }
      v.appendChild(el('table', {class: 'grid', id: 'growth-table'}, el('thead', null, el('tr', null, el('th', null, 'site and advice'), el('th', {class: 'num'}, 'bytes copied'),
        el('th', {class: 'num'}, 'growth steps'), el('th', {class: 'num'}, 'by realloc'), el('th', {class: 'num'}, 'moves'), el('th', {class: 'num'}, 'chains'), el('th', {class: 'num'}, 'largest final'))), tb));
    }
    untouchedSection(v);
  };

  let resizeTimer = 0;
  window.addEventListener('resize', () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => { if (renderers[current + 'Resize']) renderers[current + 'Resize'](); }, 100);
  });
  window.addEventListener('hashchange', () => show(location.hash.slice(1)));
  show(location.hash.slice(1) || 'summary');
  // for tests and measurements: the page is interactive from here
  window.heapprofReady = performance.now();
  document.body.setAttribute('data-ready', '1');
})();
