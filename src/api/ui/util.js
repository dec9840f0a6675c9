// util.js: small helpers the console's views share: HTML escaping (every
// name a user or an agent chose goes through esc before it meets
// innerHTML), colours, number formats, and tiny SVG line charts.

const ESC = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function esc(s) {
  return String(s == null ? '' : s).replace(/[&<>"']/g, (c) => ESC[c]);
}

// Palette classes c0..c(n-1) (app.css). Neighbouring job ids get far-apart
// hues; a queue's colour comes from its name, so it is the same everywhere.
export function jobColour(id, n) {
  return 'c' + ((Number(id) * 7) % n);
}

export function queueColour(name, n) {
  let h = 2166136261;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619) >>> 0;
  return 'c' + (h % n);
}

export function fmtBytes(b) {
  if (b == null || b < 0) return '-';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let i = 0;
  while (b >= 1024 && i < u.length - 1) {
    b /= 1024;
    i++;
  }
  return (b >= 100 || i === 0 ? Math.round(b) : b.toFixed(1)) + ' ' + u[i];
}

export function fmtRate(b) {
  return b == null ? '-' : fmtBytes(b) + '/s';
}

export function pct(x) {
  return x == null ? '-' : Math.round(x * 100) + '%';
}

// A GPU count as the API gives it (fractions for shared GPUs).
export function gpus(x) {
  if (x == null) return '-';
  return Number.isInteger(x) ? String(x) : x.toFixed(2);
}

const SVG = 'http://www.w3.org/2000/svg';

// A small line chart: series [{values: [number|null], cls}], drawn over
// the same x range (samples oldest first); max: the top of the y axis
// (null: the largest value). Returns an <svg> element.
export function chart(series, max, label) {
  const w = 230,
    h = 44;
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('viewBox', `0 0 ${w} ${h}`);
  svg.setAttribute('class', 'chart');
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', label);
  let top = max;
  if (top == null) {
    top = 0;
    for (const s of series) for (const v of s.values) if (v != null && v > top) top = v;
  }
  if (!(top > 0)) top = 1;
  const frame = document.createElementNS(SVG, 'rect');
  frame.setAttribute('x', '0.5');
  frame.setAttribute('y', '0.5');
  frame.setAttribute('width', String(w - 1));
  frame.setAttribute('height', String(h - 1));
  frame.setAttribute('class', 'frame');
  svg.appendChild(frame);
  for (const s of series) {
    const n = s.values.length;
    const pts = [];
    s.values.forEach((v, i) => {
      if (v == null) return;
      const x = n > 1 ? (i / (n - 1)) * (w - 4) + 2 : w / 2;
      const y = h - 2 - (Math.min(v, top) / top) * (h - 4);
      pts.push(x.toFixed(1) + ',' + y.toFixed(1));
    });
    if (!pts.length) continue;
    if (pts.length === 1) {
      // one sample so far: a dot where the line will start
      const [x, y] = pts[0].split(',');
      const dot = document.createElementNS(SVG, 'circle');
      dot.setAttribute('cx', x);
      dot.setAttribute('cy', y);
      dot.setAttribute('r', '2');
      dot.setAttribute('class', 'dot ' + (s.cls || ''));
      svg.appendChild(dot);
      continue;
    }
    const line = document.createElementNS(SVG, 'polyline');
    line.setAttribute('points', pts.join(' '));
    line.setAttribute('class', 'line ' + (s.cls || ''));
    svg.appendChild(line);
  }
  return svg;
}
