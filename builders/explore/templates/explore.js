/* The explorer's shell: reads the embedded JSON, builds the list on the left (search by id or task), renders the
   chosen item with the corpus view and fills the detail panel. Every text from the data goes into the DOM as a text
   node (textContent / createTextNode), never as markup. */
(function () {
  'use strict';
  var DATA = JSON.parse(document.getElementById('explorer-data').textContent);
  var X = window.Explorer = {data: DATA, views: window.ExplorerViews || {}, current: null};

  /* el('div', {class: 'x', 'data-k': 1}, child, 'text', ...): text children become text nodes */
  X.el = function (tag, attrs) {
    var svg = tag.indexOf('svg:') === 0;
    var e = svg ? document.createElementNS('http://www.w3.org/2000/svg', tag.slice(4)) : document.createElement(tag);
    attrs = attrs || {};
    Object.keys(attrs).forEach(function (k) {
      var v = attrs[k];
      if (v === null || v === undefined || v === false) return;
      if (k === 'text') e.textContent = String(v);
      else if (k === 'style' && typeof v === 'object') Object.keys(v).forEach(function (s) { e.style[s] = v[s]; });
      else if (k.indexOf('on') === 0) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, String(v));
    });
    for (var i = 2; i < arguments.length; i++) X.add(e, arguments[i]);
    return e;
  };
  X.add = function (parent, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) { child.forEach(function (c) { X.add(parent, c); }); return; }
    parent.appendChild(typeof child === 'object' ? child : document.createTextNode(String(child)));
  };
  X.clear = function (e) { while (e.firstChild) e.removeChild(e.firstChild); return e; };
  X.fmt = function (x, d) {
    if (x === null || x === undefined) return '–';
    return typeof x === 'number' ? (Number.isInteger(x) ? String(x) : x.toFixed(d === undefined ? 2 : d)) : String(x);
  };
  X.time = function (s) {
    if (s === null || s === undefined) return '–';
    var m = Math.floor(s / 60), r = s - 60 * m;
    return m + ':' + (r < 10 ? '0' : '') + r.toFixed(1);
  };
  X.span = function (a, b) { return X.time(a) + '–' + X.time(b); };
  /* only http(s) links from data become hrefs (no javascript: or data: URLs) */
  X.safeHref = function (u) { return /^https?:\/\//i.test(String(u || '')) ? String(u) : null; };
  X.meta = function (pairs) {
    return X.el('div', {class: 'meta'}, pairs.filter(function (p) { return p[1] !== null && p[1] !== undefined && p[1] !== ''; })
      .map(function (p) { return X.el('span', {}, X.el('b', {text: p[0]}), String(p[1])); }));
  };

  /* the detail panel: a title and [label, value] rows; pinned by a click, previewed by hover */
  var detail = document.getElementById('detail');
  var pinned = null;
  X.show = function (title, rows, pin) {
    if (!pin && pinned) return;
    X.clear(detail);
    detail.appendChild(X.el('h2', {text: title}));
    rows.forEach(function (r) {
      if (r[1] === null || r[1] === undefined || r[1] === '') return;
      detail.appendChild(X.el('div', {class: 'k', text: r[0]}));
      detail.appendChild(X.el('div', {class: 'v', 'data-field': r[0], text: String(r[1])}));
    });
  };
  /* wire an element: hover previews, click pins (and calls onPick) */
  X.detailOn = function (node, make, onPick) {
    node.addEventListener('mouseenter', function () { var d = make(); X.show(d[0], d[1], false); });
    node.addEventListener('click', function (ev) {
      ev.stopPropagation();
      pinned = node;
      var d = make(); X.show(d[0], d[1], true);
      if (onPick) onPick();
    });
  };
  X.unpin = function () { pinned = null; };

  var list = document.getElementById('items');
  var search = document.getElementById('search');
  var count = document.getElementById('count');
  var buttons = [];
  var view = document.getElementById('view');

  function hashId() {
    try { return decodeURIComponent(location.hash.slice(1)); } catch (e) { return ''; }
  }

  function pick(i) {
    var item = DATA.items[i];
    if (!item) return;
    buttons.forEach(function (b, j) { b.classList.toggle('on', j === i); });
    X.current = item;
    X.unpin();
    X.clear(view);
    X.clear(detail).appendChild(X.el('p', {class: 'muted', text: 'hover or click an element to see its details'}));
    X.views[DATA.corpus](item, view, X);
    try {
      if (hashId() !== item.id) history.replaceState(null, '', '#' + encodeURIComponent(item.id));
    } catch (e) { /* a sandboxed file:// page may refuse: the hash is a convenience */ }
  }
  X.pick = pick;

  DATA.items.forEach(function (item, i) {
    var b = X.el('button', {type: 'button', class: 'pick', 'data-id': item.id, onclick: function () { pick(i); }},
      X.el('span', {class: 'i', text: item.id}),
      X.el('span', {class: 't', text: [item.task, item.split].filter(Boolean).join(' · ')}));
    b._key = (item.id + ' ' + (item.task || '') + ' ' + (item.task_id || '') + ' ' + (item.title || '') + ' ' + (item.video_id || '')).toLowerCase();
    buttons.push(b);
    list.appendChild(X.el('li', {}, b));
  });
  function filter() {
    var q = search.value.trim().toLowerCase(), n = 0;
    buttons.forEach(function (b) { var ok = !q || b._key.indexOf(q) >= 0; b.parentNode.hidden = !ok; if (ok) n++; });
    count.textContent = n + ' of ' + buttons.length + ' shown';
  }
  search.addEventListener('input', filter);
  filter();
  var want = hashId();
  var start = DATA.items.findIndex(function (it) { return it.id === want; });
  if (DATA.items.length) pick(start >= 0 ? start : 0);
  document.body.setAttribute('data-ready', '1');
})();
