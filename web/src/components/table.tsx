/** A table's header row: one column header per label; an empty label is the unlabelled actions column (named for screen readers). */
export const THead = ({ columns }: { columns: string[] }) => (
  <thead>
    <tr>
      {columns.map((c, i) => (
        <th scope="col" key={i}>
          {c || <span class="sr-only">Actions</span>}
        </th>
      ))}
    </tr>
  </thead>
);
