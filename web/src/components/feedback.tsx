/** Small pieces every view shows: an error line, and a table's row for "nothing here yet". */
import type { ComponentChildren } from "preact";

/** The error line of a view or a form (nothing when there is no error). */
export const Alert = ({ text }: { text: string }) =>
  text ? (
    <p class="error" role="alert">
      {text}
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
