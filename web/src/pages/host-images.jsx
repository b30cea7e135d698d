// A host's image cache (docs/environments.md, "The cache"): what it holds, how much disk that
// takes against its budget, the prepulls under way, and for those who may run it a prune. What a
// shared host caches may be any team's, so the server answers only platform admins (and, for a
// host dedicated to a team, its members); for anyone else this panel is not there at all.
import { api } from '../api.js';
import { useResource } from '../live.js';
import { fmtBytes, fmtTime } from '../format.js';
import { ErrorNote } from '../components/ui.jsx';
import { useAction, ActionButton } from '../components/action.jsx';
import { ResourceTable } from '../components/table.jsx';

const COLS = ['Image', 'Digest', ['Size', 'num'], 'Last used', 'In use', 'Needs CUDA'];

export function ImageCachePanel({ name, mayRun }) {
  const n = encodeURIComponent(name);
  const cache = useResource(`/hosts/${n}/images`, ['hosts', 'jobs']);
  const prune = useAction(() => cache.reload());
  if (cache.error && [403, 404].includes(cache.error.status)) return null;
  const c = cache.data;
  const prepulls = c?.prepulls ?? [];
  return (
    <section class="panel" aria-labelledby="images-h" data-testid="host-images">
      <h2 id="images-h">Image cache</h2>
      {c && (
        <p class="muted" data-testid="host-images-disk">
          {c.reported_at === null
            ? 'Its agent has not reported its cache yet.'
            : `${fmtBytes(c.disk_bytes ?? 0)} on disk` +
              (c.budget_bytes ? ` of a ${fmtBytes(c.budget_bytes)} budget` : ', no budget') +
              ` · reported ${fmtTime(c.reported_at)}`}
        </p>
      )}
      <ResourceTable
        res={cache}
        rows={c?.images ?? []}
        empty="No images cached."
        testid="host-images-table"
        cols={COLS}
        row={(i) => (
          <tr key={i.ref}>
            <td>
              <code>{i.ref}</code>
            </td>
            <td>
              <code title={i.digest}>{i.digest?.slice(0, 19)}</code>
            </td>
            <td class="num">{fmtBytes(i.bytes)}</td>
            <td>{i.last_used_at ? fmtTime(i.last_used_at) : '—'}</td>
            <td>{i.in_use ? 'yes' : 'no'}</td>
            <td>{i.min_cuda ?? '—'}</td>
          </tr>
        )}
      />
      {prepulls.length > 0 && (
        <ul data-testid="host-images-prepulls">
          {prepulls.map((p) => (
            <li key={p.ref}>
              <code>{p.ref}</code>: {p.state}
              {p.total ? ` (${fmtBytes(p.bytes)} of ${fmtBytes(p.total)})` : ''}
              {p.message ? ` · ${p.message}` : ''}
            </li>
          ))}
        </ul>
      )}
      {mayRun && (
        <>
          <ErrorNote error={prune.error} />
          <ActionButton
            act={prune}
            class="secondary"
            confirm={`Remove every image no job uses from ${name}'s cache?`}
            run={() => api.post(`/hosts/${n}/images/prune`, {})}
          >
            Prune unused images
          </ActionButton>
        </>
      )}
    </section>
  );
}
