/**
 * A bar chart in SVG (cost per day): scales to its container, an accessible table equivalent
 * next to it (role="img" with a label naming the total). No chart library: uPlot would be a
 * quarter of the dashboard's 80 KB budget for one chart of at most 90 bars.
 */
export interface Bar {
  label: string;
  value: number;
  title: string;
}

export function BarChart({ bars, label, height = 180 }: { bars: Bar[]; label: string; height?: number }) {
  const max = Math.max(...bars.map((b) => b.value), 0);
  const width = 600;
  const pad = { top: 8, bottom: 22, left: 4, right: 4 };
  const inner = height - pad.top - pad.bottom;
  const step = (width - pad.left - pad.right) / Math.max(bars.length, 1);
  const every = Math.ceil(bars.length / 8);
  return (
    <svg class="chart" viewBox={`0 0 ${width} ${height}`} role="img" aria-label={label} preserveAspectRatio="none">
      <line x1={pad.left} x2={width - pad.right} y1={height - pad.bottom} y2={height - pad.bottom} class="axis" />
      {bars.map((b, i) => {
        const h = max > 0 ? (b.value / max) * inner : 0;
        const x = pad.left + i * step;
        return (
          <g key={b.label}>
            <rect x={x + step * 0.1} y={height - pad.bottom - h} width={step * 0.8} height={Math.max(h, b.value > 0 ? 1 : 0)} class="bar" data-value={b.value}>
              <title>{b.title}</title>
            </rect>
            {i % every === 0 && (
              <text x={x + step / 2} y={height - 6} text-anchor="middle" class="tick">
                {b.label}
              </text>
            )}
          </g>
        );
      })}
    </svg>
  );
}
