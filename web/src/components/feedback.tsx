/** Small pieces every view shows: an error line, a table's row for "nothing here yet", the page's status. */
import type { ComponentChildren } from "preact";
import { linkTo } from "../lib/router.ts";
import { useStatus } from "../lib/status.ts";

/** API directions in server messages, shown as the dashboard page that does the same. */
const PAGES: [RegExp, string, string][] = [
  [/with PUT \/v1\/secrets\/\S+/, "/secrets", "Secrets"],
  [/with POST \/v1\/integrations \{.*\}/, "/webhook", "Webhook"],
];

/** A server message, with "store it with PUT /v1/secrets/NAME" as "store it on the Secrets page" (a link). */
export function Friendly({ text }: { text: string }) {
  for (const [re, href, page] of PAGES) {
    const m = re.exec(text);
    if (!m) continue;
    return (
      <>
        {text.slice(0, m.index)}on the{" "}
        <a href={href} onClick={linkTo(href)}>
          {page} page
        </a>
        {text.slice(m.index + m[0].length)}
      </>
    );
  }
  return <>{text}</>;
}

/** The error line of a view or a form (nothing when there is no error). */
export const Alert = ({ text }: { text: string }) =>
  text ? (
    <p class="error" role="alert">
      <Friendly text={text} />
    </p>
  ) : null;

/** A table body's only row when the list is empty. */
export const EmptyRow = ({ cols, children }: { cols: number; children: ComponentChildren }) => (
  <tr>
    <td colSpan={cols} class="muted">
      {children}
    </td>
  </tr>
);

/** The page's line while the server's rate limit slows it down (requests wait and are sent again). */
export function SlowDown() {
  const { slowFor } = useStatus(true);
  return slowFor > 0 ? (
    <p class="slowdown" role="status">
      Too many requests: the server slowed this page down. Retrying in {slowFor} s…
    </p>
  ) : null;
}
