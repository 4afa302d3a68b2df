/* showhowto: one sequence's keyframes in step order with the step text under each; a placeholder (saying why) where
   no image exists; the task and the LLM filter's answer above. */
(function () {
  'use strict';
  var V = window.ExplorerViews = window.ExplorerViews || {};
  var IMG = /^data:image\/(jpeg|png);base64,[A-Za-z0-9+\/=]+$/;

  V.showhowto = function (item, root, X) {
    var f = X.data.filter || {};
    root.appendChild(X.el('h2', {text: item.task || item.id}));
    root.appendChild(X.meta([['sequence', item.id], ['video', item.video_id], ['title', item.title],
      ['wikiHow task', item.wikihow_title], ['split', item.split], ['duration', X.time(item.duration)],
      ['aligner', item.aligner], ['mean score', X.fmt(item.mean_score, 3)], ['images', item.image_source]]));
    var counts = f.counts || {};
    var ctext = Object.keys(counts).map(function (k) { return k + ' ' + counts[k]; }).join(', ');
    root.appendChild(X.el('p', {class: 'filter', 'data-kind': 'filter'}, X.el('b', {text: 'LLM filter (instructional?): '}),
      f.text || 'unknown', ctext ? X.el('span', {class: 'muted', text: '  (this build: ' + ctext + ')'}) : null));
    if (item.steps.every(function (s) { return !s.img; })) {
      root.appendChild(X.el('p', {class: 'placeholder-note', 'data-kind': 'no-images', text: item.placeholder}));
    }
    root.appendChild(X.el('div', {class: 'frames'}, item.steps.map(function (s, i) {
      var pic = s.img && IMG.test(s.img) ? X.el('img', {src: s.img, alt: 'keyframe of step ' + (i + 1), 'data-kind': 'thumb'})
        : X.el('div', {class: 'ph', 'data-kind': 'placeholder', text: 'no image'});
      var fig = X.el('figure', {class: 'frame', 'data-kind': 'frame', 'data-step': i}, pic,
        X.el('figcaption', {}, X.el('span', {class: 'n', text: (i + 1) + '.'}), s.t));
      X.detailOn(fig, function () {
        return ['Step ' + (i + 1), [['instruction', s.t], ['step window', X.span(s.s, s.e)],
          ['keyframe time', X.time(s.ft)], ['alignment score', X.fmt(s.sc, 3)]]];
      });
      return fig;
    })));
  };
})();
