// Tables as the pages draw them: a header row from the column names, and for a fetched list the
// usual run of the fetch's error, "Loading…", an empty note or the table itself.
import { ErrorNote, Loading, Empty } from './ui.jsx';

// `cols`: a name, [name, class] (['GPUs', 'num']), or false for a column left out
// (`manage && 'Actions'`).
export function TableHead({ cols }) {
  return (
    <thead>
      <tr>
        {cols
          .filter((c) => c !== false)
          .map((c) => (Array.isArray(c) ? <th class={c[1]}>{c[0]}</th> : <th>{c}</th>))}
      </tr>
    </thead>
  );
}

// A table of `rows`, a `row` each; with `empty`, a table with nothing to list says so in a row.
export function Table({ testid, cols, rows, row, empty }) {
  const shown = cols.filter((c) => c !== false);
  return (
    <table data-testid={testid}>
      <TableHead cols={shown} />
      <tbody>
        {empty && !rows.length && (
          <tr>
            <td colSpan={shown.length} class="empty">
              {empty}
            </td>
          </tr>
        )}
        {rows.map(row)}
      </tbody>
    </table>
  );
}

// A useResource answer as a table of `rows` (its data unless given), a `row` each. "Loading…"
// shows only where `loading` is given (true, or what is loading) and the empty note only where
// `empty` is: panels differ in what they say before and after the first answer. `children` are
// notes shown under the fetch's error (an action's error).
export function ResourceTable({
  res,
  rows = res.data ?? [],
  loading,
  empty,
  testid,
  cols,
  row,
  children,
}) {
  return (
    <>
      <ErrorNote error={res.error} />
      {children}
      {loading && res.loading && !res.data && (
        <Loading what={loading === true ? undefined : loading} />
      )}
      {empty && res.data && !rows.length && <Empty>{empty}</Empty>}
      {rows.length > 0 && <Table testid={testid} cols={cols} rows={rows} row={row} />}
    </>
  );
}
