// SPDX-License-Identifier: MIT
// The script of the flamegraph SVG that `heapprof flame` and `heapprof diff -o` write
// (analyzer/out_svg.c puts it, embedded by viewer/embed.cmake, into a CDATA section at the end
// of the SVG): hover details, click to zoom, reset, and a regex search with the matched share.
// Written for heapprof (flamegraph.pl's and inferno's scripts are CDDL; nothing is copied).
// It never parses markup: names come from each frame's <title> text and go into its <text>
// via textContent. These opening `//` lines are not embedded (the script starts at the first
// line that is not one), so a change to them leaves the SVG as it was; `]]>` may not appear.
(function () {
'use strict';
var root = document.querySelector('svg[data-total]') || document.documentElement;
var W = +root.getAttribute('data-width'), T = +root.getAttribute('data-total');
var PAD = 10, CW = 7.2;
var frames = [], byEl = new Map(), zoomed = null, timer = null;
var status = document.getElementById('status'), matched = document.getElementById('matched');
var reset = document.getElementById('reset'), search = document.getElementById('search');
var idle = status.textContent;
var gs = root.getElementsByClassName('f');
for (var i = 0; i < gs.length; i++) {
  var g = gs[i], t = g.getElementsByTagName('title')[0].textContent, nl = t.indexOf('\n');
  var fr = {g: g, r: g.getElementsByTagName('rect')[0], t: g.getElementsByTagName('text')[0],
    name: nl < 0 ? t : t.slice(0, nl), info: nl < 0 ? '' : t.slice(nl + 1),
    x: +g.getAttribute('data-x'), w: +g.getAttribute('data-w'), d: +g.getAttribute('data-d')};
  fr.fill = fr.r.getAttribute('fill');
  frames.push(fr);
  byEl.set(g, fr);
}
function frameOf(e) {
  for (var n = e.target; n && n !== root; n = n.parentNode)
    if (byEl.has(n)) return byEl.get(n);
  return null;
}
function label(fr, wp) {
  var fit = Math.floor((wp - 6) / CW), s = fr.name;
  if (fit < 3) return '';
  var cs = Array.from(s);
  return cs.length <= fit ? s : cs.slice(0, fit - 2).join('') + '..';
}
function place(fr, x, w) {
  var xp = PAD + x * (W - 2 * PAD), wp = w * (W - 2 * PAD);
  fr.r.setAttribute('x', xp.toFixed(2));
  fr.r.setAttribute('width', wp.toFixed(2));
  fr.t.setAttribute('x', (xp + 3).toFixed(2));
  fr.t.textContent = label(fr, wp);
}
function zoom(z) {
  if (!T) return;
  zoomed = z;
  var x0 = z ? z.x : 0, w0 = z ? z.w : T, d0 = z ? z.d : 0;
  for (var k = 0; k < frames.length; k++) {
    var f = frames[k], c = f.g.classList;
    if (f.d >= d0 && f.x >= x0 && f.x + f.w <= x0 + w0) {
      c.remove('hide'); c.remove('anc'); place(f, (f.x - x0) / w0, f.w / w0);
    } else if (f.d < d0 && f.x <= x0 && f.x + f.w >= x0 + w0) {
      c.remove('hide'); c.add('anc'); place(f, 0, 1);
    } else {
      c.add('hide');
    }
  }
  reset.classList.toggle('hide', !z);
}
function find() {
  var q = search.value, re = null, iv = [];
  if (q) {
    try { re = new RegExp(q); }
    catch (err) { re = new RegExp(q.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')); }
  }
  for (var k = 0; k < frames.length; k++) {
    var f = frames[k], hit = re !== null && f.d > 0 && re.test(f.name);
    f.r.setAttribute('fill', hit ? 'rgb(230,0,230)' : f.fill);
    if (hit) iv.push([f.x, f.x + f.w]);
  }
  if (!re) { matched.textContent = ''; return; }
  iv.sort(function (a, b) { return a[0] - b[0]; });
  var sum = 0, s = 0, e = 0;
  for (var j = 0; j < iv.length; j++) {
    if (iv[j][0] >= e) { sum += e - s; s = iv[j][0]; e = iv[j][1]; }
    else if (iv[j][1] > e) e = iv[j][1];
  }
  sum += e - s;
  matched.textContent = 'Matched: ' + (T ? (100 * sum / T).toFixed(2) : '0') + '%';
}
root.addEventListener('mouseover', function (e) {
  var f = frameOf(e);
  status.textContent = f ? f.name + '  \u2014  ' + f.info : idle;
});
root.addEventListener('mouseout', function () { status.textContent = idle; });
root.addEventListener('click', function (e) {
  var f = frameOf(e);
  if (f) zoom(f.d === 0 ? null : f);
});
reset.addEventListener('click', function () { zoom(null); });
search.addEventListener('input', function () {
  clearTimeout(timer); timer = setTimeout(find, 120);
});
root.addEventListener('keydown', function (e) {
  if ((e.ctrlKey || e.metaKey) && e.key === 'f') { e.preventDefault(); search.focus(); }
  else if (e.key === 'Escape') { search.value = ''; find(); zoom(null); }
});
})();
