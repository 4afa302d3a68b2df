/* marc: a recipe pair side by side. Each instruction of A is linked to its most probable instruction of B (a_to_b,
   solid) and each of B to its most probable of A (b_to_a, dashed); a link's opacity is its posterior. */
(function () {
  'use strict';
  var V = window.ExplorerViews = window.ExplorerViews || {};
  var NS = 'http://www.w3.org/2000/svg';

  function valid(link, n) { return link.t !== null && link.t !== undefined && link.t >= 0 && link.t < n; }

  V.marc = function (item, root, X) {
    root.appendChild(X.el('h2', {text: (item.task || item.dish_id) + ': ' + item.config.replace('pairwise_', '').replace('_', ' – ')}));
    root.appendChild(X.meta([['pair', item.id], ['dish', item.dish_id], ['split', item.split],
      ['ingredient match', X.fmt(item.ingredient_match, 2)], ['model', item.model]]));
    var show = {a_to_b: true, b_to_a: true};
    var legend = X.el('div', {class: 'legend'});
    ['a_to_b', 'b_to_a'].forEach(function (d) {
      var cb = X.el('input', {type: 'checkbox', checked: 'checked', 'data-dir': d,
        onchange: function () { show[d] = cb.checked; draw(); }});
      legend.appendChild(X.el('label', {}, cb, ' ', X.el('span', {class: 'sw' + (d === 'b_to_a' ? ' ba' : '')}),
        d === 'a_to_b' ? 'A → B (each step of A to its most probable step of B)' : 'B → A'));
    });
    root.appendChild(legend);

    var boxes = {a: [], b: []};
    function side(key, recipe, steps, links, other) {
      var href = X.safeHref(recipe.url);
      var col = X.el('div', {class: 'col', 'data-side': key},
        X.el('h3', {}, key.toUpperCase() + ' · ' + recipe.kind + ' · ', href ? X.el('a', {href: href, rel: 'noreferrer noopener', text: recipe.title || recipe.id}) : (recipe.title || recipe.id)));
      steps.forEach(function (s, i) {
        var box = X.el('div', {class: 'pstep', 'data-kind': 'pstep', 'data-side': key, 'data-index': i},
          X.el('span', {class: 'n', text: (i + 1) + '.'}), s.t, s.s !== null ? X.el('span', {class: 'tm', text: X.span(s.s, s.e)}) : null);
        var l = links[i];
        X.detailOn(box, function () {
          var tgt = l && valid(l, other.length) ? other[l.t] : null;
          return [key.toUpperCase() + ' step ' + (i + 1), [['text', s.t], ['time', s.s !== null ? X.span(s.s, s.e) : ''],
            ['aligned to', tgt ? (key === 'a' ? 'B' : 'A') + ' step ' + (l.t + 1) + ': ' + tgt.t : 'nothing'],
            ['posterior', l ? X.fmt(l.p, 3) : ''],
            ['top 3', l ? l.top.map(function (tp) { return (tp[0] + 1) + ' (' + X.fmt(tp[1], 3) + ')'; }).join(', ') : '']]];
        }, function () {
          Array.prototype.forEach.call(root.querySelectorAll('.pstep.hl'), function (e) { e.classList.remove('hl'); });
          box.classList.add('hl');
          if (l && valid(l, other.length)) boxes[key === 'a' ? 'b' : 'a'][l.t].classList.add('hl');
        });
        boxes[key].push(box);
        col.appendChild(box);
      });
      return col;
    }
    var svg = document.createElementNS(NS, 'svg');
    svg.setAttribute('data-kind', 'links');
    var pair = X.el('div', {class: 'pair'}, side('a', item.a, item.a_steps, item.a_to_b, item.b_steps), X.el('div'),
      side('b', item.b, item.b_steps, item.b_to_a, item.a_steps));
    pair.appendChild(svg);
    root.appendChild(pair);

    function draw() {
      while (svg.firstChild) svg.removeChild(svg.firstChild);
      var base = pair.getBoundingClientRect();
      svg.setAttribute('width', String(base.width));
      svg.setAttribute('height', String(base.height));
      function line(from, to, link, dir) {
        var f = from.getBoundingClientRect(), t = to.getBoundingClientRect();
        var ab = dir === 'a_to_b';
        var x1 = (ab ? f.right : f.left) - base.left, y1 = f.top + f.height / 2 - base.top + (ab ? -3 : 3);
        var x2 = (ab ? t.left : t.right) - base.left, y2 = t.top + t.height / 2 - base.top + (ab ? -3 : 3);
        var mx = (x1 + x2) / 2;
        var p = document.createElementNS(NS, 'path');
        p.setAttribute('d', 'M' + x1 + ',' + y1 + ' C' + mx + ',' + y1 + ' ' + mx + ',' + y2 + ' ' + x2 + ',' + y2);
        p.setAttribute('fill', 'none');
        p.setAttribute('stroke', ab ? '#4c72b0' : '#dd8452');
        p.setAttribute('stroke-width', '2');
        if (!ab) p.setAttribute('stroke-dasharray', '5 3');
        p.setAttribute('stroke-opacity', String(0.25 + 0.75 * Math.max(0, Math.min(1, link.p || 0))));
        p.setAttribute('data-kind', 'link');
        p.setAttribute('data-dir', dir);
        svg.appendChild(p);
      }
      if (show.a_to_b) item.a_to_b.forEach(function (l, i) { if (boxes.a[i] && valid(l, boxes.b.length)) line(boxes.a[i], boxes.b[l.t], l, 'a_to_b'); });
      if (show.b_to_a) item.b_to_a.forEach(function (l, i) { if (boxes.b[i] && valid(l, boxes.a.length)) line(boxes.b[i], boxes.a[l.t], l, 'b_to_a'); });
    }
    draw();
    if (V._marcResize) window.removeEventListener('resize', V._marcResize);
    V._marcResize = draw;
    window.addEventListener('resize', draw);
  };
})();
