/** Usage: tokens and cost per day (chart) and per profile (table) over 7, 30 or 90 days, with totals. */
import { Alert, EmptyRow } from "../../components/feedback.tsx";
import { THead } from "../../components/table.tsx";
import { useEffect, useState } from "preact/hooks";
import type { UsageReport } from "../../../../src/schema/usage.ts";
import { ApiError, get } from "../../lib/api.ts";
import { int, usd } from "../../lib/format.ts";
import { BarChart } from "./chart.tsx";
import "./usage.css";

const RANGES = [7, 30, 90] as const;
const DAY = 86_400_000;

export function Usage() {
  const [days, setDays] = useState<(typeof RANGES)[number]>(30);
  const [byDay, setByDay] = useState<UsageReport | null>(null);
  const [byProfile, setByProfile] = useState<UsageReport | null>(null);
  const [error, setError] = useState("");

  useEffect(() => {
    // Whole UTC days, today included.
    const to = new Date(Math.floor(Date.now() / DAY) * DAY + DAY);
    const from = new Date(to.getTime() - days * DAY);
    const q = `from=${from.toISOString()}&to=${to.toISOString()}`;
    setError("");
    Promise.all([get<UsageReport>(`/v1/usage?${q}&group_by=day`), get<UsageReport>(`/v1/usage?${q}&group_by=profile`)]).then(
      ([d, p]) => {
        setByDay(d);
        setByProfile(p);
      },
      (e) => setError(e instanceof ApiError ? e.message : String(e)),
    );
  }, [days]);

  const totals = byDay?.totals;
  return (
    <main id="main" tabIndex={-1} class="page usage">
      <h1>Usage</h1>
      <div class="row" role="group" aria-label="Range">
        {RANGES.map((d) => (
          <button type="button" key={d} aria-pressed={d === days} class={d === days ? "primary" : ""} onClick={() => setDays(d)}>
            {d} days
          </button>
        ))}
      </div>
      <Alert text={error} />
      {totals && (
        <dl class="totals-grid card">
          <div>
            <dt>Cost</dt>
            <dd data-testid="usage-cost">{usd(totals.cost_usd)}</dd>
          </div>
          <div>
            <dt>Tasks</dt>
            <dd>{int(totals.tasks)}</dd>
          </div>
          <div>
            <dt>Input tokens</dt>
            <dd>{int(totals.input_tokens)}</dd>
          </div>
          <div>
            <dt>Output tokens</dt>
            <dd>{int(totals.output_tokens)}</dd>
          </div>
        </dl>
      )}
      {byDay && (
        <section class="card" aria-labelledby="per-day">
          <h2 id="per-day">Cost per day</h2>
          <BarChart
            label={`Cost per day over the last ${days} days, ${usd(byDay.totals.cost_usd)} in total`}
            bars={byDay.data.map((b) => ({ label: b.key.slice(5), value: b.cost_usd, title: `${b.key}: ${usd(b.cost_usd)}, ${int(b.tasks)} tasks, ${int(b.input_tokens)} in / ${int(b.output_tokens)} out` }))}
          />
        </section>
      )}
      {byProfile && (
        <table class="card">
          <caption>Per profile</caption>
          <THead columns={["Profile", "Tasks", "Input tokens", "Output tokens", "Cost"]} />
          <tbody>
            {byProfile.data.map((b) => (
              <tr key={b.key}>
                <td>{b.profile_name ?? <span class="muted">deleted profile</span>}</td>
                <td>{int(b.tasks)}</td>
                <td>{int(b.input_tokens)}</td>
                <td>{int(b.output_tokens)}</td>
                <td>{usd(b.cost_usd)}</td>
              </tr>
            ))}
            {byProfile.data.length === 0 && (
              <EmptyRow cols={5}>No tasks in this range.</EmptyRow>
            )}
          </tbody>
        </table>
      )}
    </main>
  );
}
