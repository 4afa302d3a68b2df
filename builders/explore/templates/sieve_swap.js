/* sieve_swap: one video's ASR segments in time order. A kept segment (possibly several merged ASR segments) shows
   the RecipeNLG step swapped in for it and its cosine similarity; a discarded segment is greyed. Above: the recipe
   the video matched best (highest token IoU) and the other matched recipe ids. */
(function () {
  'use strict';
  var V = window.ExplorerViews = window.ExplorerViews || {};

  V.sieve_swap = function (item, root, X) {
    root.appendChild(X.el('h2', {text: item.title || item.id}));
    root.appendChild(X.meta([['video', item.id], ['task', item.task], ['task id', item.task_id], ['split', item.split],
      ['duration', X.time(item.duration)], ['similarity threshold', item.threshold], ['encoder', item.model],
      ['kept', item.kept.length + ' segments'], ['ASR segments', item.raw_total]]));

    var rec = item.recipe;
    var box = X.el('div', {class: 'recipe', 'data-kind': 'recipe'});
    if (rec) {
      var href = X.safeHref(rec.link);
      box.appendChild(X.el('h3', {}, 'Matched recipe: ', href ? X.el('a', {href: href, rel: 'noreferrer noopener', text: rec.title}) : rec.title,
        ' (id ' + rec.rid + ')'));
      if (item.recipes.length) {
        box.appendChild(X.el('div', {class: 'muted', text: 'recipes kept by the sieve (token IoU, recall): ' + item.recipes.map(function (r) {
          return r.rid + ' (' + X.fmt(r.iou, 3) + ', ' + X.fmt(r.recall, 2) + ')';
        }).join(', ')}));
      }
      box.appendChild(X.el('ol', {}, rec.directions.map(function (d) { return X.el('li', {text: d}); })));
    } else {
      box.appendChild(X.el('p', {class: 'muted', text: 'the matched recipe is not in this release\'s recipes config'}));
    }
    root.appendChild(box);

    var rows = item.kept.map(function (k, j) { return {s: k.s, kept: k, j: j}; })
      .concat(item.raw.filter(function (r) { return r.k === null; }).map(function (r) { return {s: r.s, raw: r}; }));
    rows.sort(function (a, b) { return (a.s || 0) - (b.s || 0) || (a.kept ? -1 : 1); });
    var tbody = X.el('tbody');
    rows.forEach(function (r) {
      if (r.kept) {
        var k = r.kept;
        var tr = X.el('tr', {class: 'kept', 'data-kind': 'kept', 'data-segment': r.j},
          X.el('td', {class: 'n', text: X.span(k.s, k.e)}),
          X.el('td', {text: k.asr}),
          X.el('td', {text: k.t}),
          X.el('td', {class: 'n'}, X.el('span', {class: 'sim', style: {width: Math.round(60 * Math.max(0, k.sim || 0)) + 'px'}}), X.fmt(k.sim, 3)),
          X.el('td', {class: 'n', text: k.rid + ' / ' + k.si + (k.m > 1 ? ' · ×' + k.m : '')}));
        X.detailOn(tr, function () {
          return ['Kept segment ' + X.span(k.s, k.e), [['ASR text', k.asr], ['swapped-in step', k.t],
            ['similarity', X.fmt(k.sim, 3)], ['recipe id / step', k.rid + ' / ' + k.si], ['ASR segments merged', k.m],
            ['candidates', k.cand.map(function (c) { return X.fmt(c.sim, 3) + '  ' + c.rid + '/' + c.si + '  ' + c.t; }).join('\n')]]];
        });
        tbody.appendChild(tr);
      } else {
        var x = r.raw;
        tbody.appendChild(X.el('tr', {class: 'discarded', 'data-kind': 'discarded'},
          X.el('td', {class: 'n', text: X.span(x.s, x.e)}), X.el('td', {text: x.t}),
          X.el('td', {class: 'why', text: 'discarded (no step above the threshold)'}), X.el('td'), X.el('td')));
      }
    });
    if (item.raw_total > item.raw.length) {
      tbody.appendChild(X.el('tr', {}, X.el('td', {colspan: 5, class: 'muted', text: (item.raw_total - item.raw.length) + ' more ASR segments not shown'})));
    }
    root.appendChild(X.el('table', {class: 'segs'},
      X.el('thead', {}, X.el('tr', {}, ['time', 'ASR segment', 'swapped-in recipe step', 'similarity', 'recipe / step'].map(function (h) {
        return X.el('th', {text: h});
      }))), tbody));
  };
})();
