/* howtostep: one video's timeline. Lanes: the ASR narrations, each LLM step's Stage-1 window, its final (Stage-2 or
   MPTVA) window, one lane per MPTVA pathway shaded by that pathway's score; below, the steps without a Stage-1
   window and the dropped steps (greyed, with their reason). Blocks that overlap in a lane are stacked in rows. */
(function () {
  'use strict';
  var V = window.ExplorerViews = window.ExplorerViews || {};
  var ROW = 20;

  /* greedy interval packing: the row of each [s, e) so that blocks in one row never overlap */
  function pack(spans) {
    var ends = [], rows = [];
    spans.forEach(function (sp) {
      var r = 0;
      while (r < ends.length && ends[r] > sp[0] + 1e-6) r++;
      ends[r] = Math.max(sp[1], sp[0] + 0.001);
      rows.push(r);
    });
    return {rows: rows, n: Math.max(1, ends.length)};
  }

  V.howtostep = function (item, root, X) {
    var dur = item.duration || 1;
    var pct = function (t) { return Math.max(0, Math.min(100, 100 * (t || 0) / dur)) + '%'; };
    var width = function (s, e) { return Math.max(0.35, 100 * ((e || 0) - (s || 0)) / dur) + '%'; };
    var byNarr = {};
    var narrBlocks = {};
    item.narrations.forEach(function (n) { byNarr[n.i] = n; });

    root.appendChild(X.el('h2', {text: item.id}));
    var p = item.provenance || {};
    root.appendChild(X.meta([['task', item.task], ['task id', item.task_id], ['split', item.split],
      ['duration', X.time(item.duration)], ['language', item.language], ['transcript', item.transcript_source],
      ['labeler', p.labeler], ['LLM', p.llm], ['features', p.visual_features],
      ['ε1', p.epsilon1], ['ε2', p.epsilon2], ['LLM steps', item.num_raw_steps]]));
    if (p.visual_features === 'simulated') {
      root.appendChild(X.el('p', {class: 'placeholder-note', text: 'visual features were simulated from the narrations in this build: the Stage-2 windows say nothing about real grounding'}));
    }

    var tl = X.el('div', {class: 'timeline', 'data-kind': 'timeline', 'data-video': item.id});
    var axis = X.el('div', {class: 'axis'});
    for (var k = 0; k <= 10; k++) {
      axis.appendChild(X.el('span', {style: {left: (10 * k) + '%', transform: k === 10 ? 'translateX(-100%)' : (k ? '' : 'none')},
        text: X.time(dur * k / 10)}));
    }
    tl.appendChild(axis);

    function lane(label, kind, entries, make) {
      var spans = entries.map(function (en) { return [en.s, en.e]; });
      var pk = pack(spans);
      var track = X.el('div', {class: 'track', style: {height: (pk.n * ROW + 2) + 'px'}});
      entries.forEach(function (en, j) {
        var b = make(en);
        b.classList.add('blk', kind);
        b.setAttribute('data-kind', kind);
        b.style.left = pct(en.s);
        b.style.width = width(en.s, en.e);
        b.style.top = (1 + pk.rows[j] * ROW) + 'px';
        track.appendChild(b);
      });
      tl.appendChild(X.el('div', {class: 'lane', 'data-lane': kind}, X.el('div', {class: 'lbl', text: label}), track));
    }

    function highlight(step) {
      Array.prototype.forEach.call(tl.querySelectorAll('.hl'), function (e) { e.classList.remove('hl'); });
      Array.prototype.forEach.call(tl.querySelectorAll('[data-step="' + step.i + '"]'), function (e) { e.classList.add('hl'); });
      if (step.m !== null && narrBlocks[step.m]) narrBlocks[step.m].classList.add('hl');
    }
    function stepDetail(step) {
      var n = step.m !== null ? byNarr[step.m] : null;
      return ['Step ' + step.i + ' (chunk ' + X.fmt(step.c) + ')', [
        ['text', step.t],
        ['final window', step.s === null ? 'none' : X.span(step.s, step.e)], ['final score', X.fmt(step.sc, 3)],
        ['Stage-1 window', step.s1s === null ? 'none (below ε1)' : X.span(step.s1s, step.s1e)],
        ['Stage-1 score', X.fmt(step.s1sc, 3)],
        ['MPTVA pathways', step.pw.length ? step.pw.map(function (v, j) { return DATA_PW[j] + ' ' + X.fmt(v, 3); }).join(' · ') : ''],
        ['matched narration', n ? '#' + n.i + ' [' + X.span(n.s, n.e) + '] ' + n.t : 'none'],
      ]];
    }
    var DATA_PW = X.data.pathways || [];
    function stepBlock(step, label) {
      var b = X.el('div', {'data-step': step.i, title: step.t, text: label});
      X.detailOn(b, function () { return stepDetail(step); }, function () { highlight(step); });
      return b;
    }

    lane('ASR narrations (' + item.narrations.length + (item.narrations_total > item.narrations.length ? ' of ' + item.narrations_total : '') + ')',
      'narration', item.narrations, function (n) {
        var b = X.el('div', {'data-narration': n.i, title: n.t, text: n.t});
        narrBlocks[n.i] = b;
        X.detailOn(b, function () { return ['Narration #' + n.i, [['text', n.t], ['time', X.span(n.s, n.e)]]]; });
        return b;
      });
    var s1 = item.steps.filter(function (s) { return s.s1s !== null && s.s1e !== null; })
      .map(function (s) { return {s: s.s1s, e: s.s1e, step: s}; });
    lane('Stage 1: step → narration', 'stage1', s1, function (en) { return stepBlock(en.step, en.step.i + ' ' + en.step.t); });
    var fin = item.steps.filter(function (s) { return s.s !== null && s.e !== null; })
      .map(function (s) { return {s: s.s, e: s.e, step: s}; });
    lane('final: ' + (p.labeler || 'Stage 2'), 'step', fin, function (en) { return stepBlock(en.step, en.step.i + ' ' + en.step.t); });
    var npw = fin.reduce(function (m, en) { return Math.max(m, en.step.pw.length); }, 0);
    for (var q = 0; q < npw; q++) {
      (function (q) {
        lane('pathway ' + (DATA_PW[q] || q), 'pathway', fin, function (en) {
          var v = en.step.pw[q];
          var b = stepBlock(en.step, v === null || v === undefined ? '' : X.fmt(v, 2));
          b.style.opacity = String(0.15 + 0.85 * Math.max(0, Math.min(1, v || 0)));
          b.setAttribute('data-pathway', DATA_PW[q] || q);
          return b;
        });
      })(q);
    }
    var zoom = X.el('select', {'aria-label': 'zoom', onchange: function () { tl.style.width = (100 * zoom.value) + '%'; }},
      [1, 2, 4, 8, 16].map(function (z) { return X.el('option', {value: z, text: z + '×'}); }));
    root.appendChild(X.el('div', {class: 'legend'}, 'zoom ', zoom, '  (scroll sideways when zoomed in)'));
    root.appendChild(X.el('div', {class: 'scroller'}, tl));

    var noS1 = item.steps.filter(function (s) { return s.s1s === null; });
    if (noS1.length) {
      root.appendChild(X.el('h3', {text: 'Steps without a Stage-1 window (below ε1)'}));
      root.appendChild(X.el('div', {class: 'chips'}, noS1.map(function (s) {
        var c = X.el('span', {class: 'chip', 'data-kind': 'no-stage1', 'data-step': s.i, text: s.i + ' ' + s.t});
        X.detailOn(c, function () { return stepDetail(s); }, function () { highlight(s); });
        return c;
      })));
    }
    root.appendChild(X.el('h3', {text: 'Dropped steps (' + item.dropped.length + ')'}));
    if (!item.dropped.length) root.appendChild(X.el('p', {class: 'muted', text: 'none'}));
    root.appendChild(X.el('div', {class: 'chips'}, item.dropped.map(function (d) {
      var c = X.el('span', {class: 'chip dropped', 'data-kind': 'dropped', 'data-step': d.i},
        (d.i === null ? '' : d.i + ' ') + d.t,
        X.el('span', {class: 'r', text: d.r}));
      X.detailOn(c, function () {
        return ['Dropped step ' + X.fmt(d.i) + ' (chunk ' + X.fmt(d.c) + ')',
          [['text', d.t], ['stage', d.st], ['reason', d.r], ['score', X.fmt(d.sc, 3)]]];
      });
      return c;
    })));
    root.appendChild(X.el('h3', {text: 'Steps in LLM order (' + item.steps.length + ')'}));
    root.appendChild(X.el('ol', {class: 'steps-list'}, item.steps.map(function (s) {
      var li = X.el('li', {'data-kind': 'step-row', 'data-step': s.i}, X.el('span', {class: 'n', text: s.s === null ? '–' : X.span(s.s, s.e)}), s.t);
      X.detailOn(li, function () { return stepDetail(s); }, function () { highlight(s); });
      return li;
    })));
  };
})();
