// The overview: the cluster map (every host the user may see, a cell per GPU), totals and open
// alerts. One request, GET /cluster/map, brings every visible host with each GPU's holders and
// current utilisation; it is refetched (at most once a second) when the live stream says hosts,
// jobs or telemetry changed. Host cards re-render only when their cells change.
import { Component } from 'preact';
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { useLocation } from 'preact-iso';
import { useResource } from '../live.js';
import { useSession } from '../session.js';
import { teamColor } from '../format.js';
import { ErrorNote, Loading, Empty, StateBadge, TextInput } from '../components/ui.jsx';
import './overview.css';

// Whether new work can be placed on the host (only `available` hosts take placements): otherwise
// its cells read as unavailable, and its free GPUs are not counted as free.
function hostDown(host) {
  return host.state !== 'online' || (host.admin_state ?? 'available') !== 'available';
}

// One GPU's cell, as plain data (so a host card can tell cheaply whether it changed). Holders of
// another team's work come without job, team or user: "in use (other team)".
function cellOf(host, gpu, myName) {
  const holders = gpu.holders ?? [];
  const util = gpu.utilization_pct;
  const first = holders[0];
  let kind = 'free';
  if (holders.length) kind = first.team ? 'team' : 'other';
  const dedicated = gpu.dedicated_to ?? null;
  const mine = holders.find((h) => h.user === myName && h.job_id != null);
  const parts = [`${host.name} GPU ${gpu.index}`, gpu.model];
  if (!holders.length) parts.push(hostDown(host) ? 'unavailable' : 'free');
  for (const h of holders) {
    if (h.job_id == null) parts.push('in use (other team)');
    else {
      const frac = h.gpu_milli && h.gpu_milli < 1000 ? ` ×${h.gpu_milli / 1000}` : '';
      parts.push(`job ${h.job_id}${frac} · ${h.team} · ${h.user}`);
    }
  }
  if (dedicated) parts.push(`dedicated to ${dedicated}`);
  if (gpu.shared) parts.push('shared (fractions)');
  parts.push(util == null ? 'utilisation unknown' : `utilisation ${Math.round(util)}%`);
  return {
    index: gpu.index,
    kind,
    team: first?.team ?? null,
    job: first?.job_id ?? null,
    mine: mine?.job_id ?? null,
    dedicated,
    shared: !!gpu.shared,
    down: hostDown(host),
    util: util == null ? null : Math.round(util),
    title: parts.join('\n'),
  };
}

// A host card. Re-renders only when its signature changes: with 1,000 hosts a refresh touches
// only the cards whose cells or state moved.
// Which host cards are on screen (or near it), so that a live refresh re-renders only those: a
// card off screen that changed is marked stale and catches up when it scrolls into view.
class Visibility {
  cards = new Map(); // element -> card
  observer =
    typeof IntersectionObserver === 'undefined'
      ? null
      : new IntersectionObserver(
          (entries) => {
            for (const e of entries) this.cards.get(e.target)?.setVisible(e.isIntersecting);
          },
          { rootMargin: '400px' },
        );

  watch(el, card) {
    if (!this.observer) return card.setVisible(true);
    this.cards.set(el, card);
    this.observer.observe(el);
  }

  unwatch(el) {
    this.cards.delete(el);
    this.observer?.unobserve(el);
  }

  stop() {
    this.observer?.disconnect();
  }
}

// A host card. Re-renders only when its signature changes and it is on screen.
class HostCard extends Component {
  visible = false;
  stale = false;
  el = null;
  setEl = (el) => {
    this.el = el;
  };

  componentDidMount() {
    this.props.visibility.watch(this.el, this);
  }

  componentWillUnmount() {
    this.props.visibility.unwatch(this.el);
  }

  setVisible(visible) {
    this.visible = visible;
    if (visible && this.stale) {
      this.stale = false;
      this.forceUpdate();
    }
  }

  shouldComponentUpdate(next) {
    if (next.sig === this.props.sig) return false;
    if (this.visible) return true;
    this.stale = true; // Preact keeps the new props: forceUpdate() draws them later
    return false;
  }

  onClick = (ev) => {
    // Cells that are not links (not one of my jobs) lead to the host.
    if (ev.target.closest('a')) return;
    if (ev.target.classList.contains('gpu')) this.props.route(`/hosts/${this.props.host.name}`);
  };

  render({ host, cells }) {
    const name = host.name;
    return (
      <article
        ref={this.setEl}
        class={`hostcard${hostDown(host) ? ' down' : ''}`}
        data-testid={`host-${name}`}
      >
        <header>
          <a href={`/hosts/${encodeURIComponent(name)}`} class="hostname">
            {name}
          </a>
          <StateBadge state={host.state} />
          {host.admin_state && host.admin_state !== 'available' && (
            <span class={`badge state-${host.admin_state}`}>{host.admin_state}</span>
          )}
          {host.simulated && (
            <span class="badge simulated" title="simulated GPUs, not real hardware">
              simulated
            </span>
          )}
          {host.dedicated_to && (
            <span class="badge dedicated" title="dedicated host">
              {host.dedicated_to}
            </span>
          )}
        </header>
        <div class="gpus" onClick={this.onClick}>
          {cells.map((c) => {
            const cls = `gpu k-${c.kind}${c.dedicated ? ' ded' : ''}${c.down ? ' off' : ''}${
              c.shared ? ' shr' : ''
            }`;
            const style = `--c:${c.kind === 'team' ? teamColor(c.team) : ''};--u:${c.util ?? 0}%`;
            const props = {
              class: cls,
              style,
              title: c.title,
              'aria-label': c.title.replace(/\n/g, ', '),
              'data-testid': `gpu-${name}-${c.index}`,
              'data-job': c.job ?? undefined,
            };
            return c.mine != null ? (
              <a href={`/work/${c.mine}`} {...props} />
            ) : (
              <span {...props} role="img" />
            );
          })}
        </div>
      </article>
    );
  }
}

function Totals({ hosts, cells }) {
  let gpus = 0;
  let used = 0;
  let free = 0;
  let other = 0;
  const byTeam = new Map();
  for (const h of hosts) {
    for (const c of cells.get(h.name) ?? []) {
      gpus++;
      if (c.kind === 'free') {
        if (!c.down) free++;
      } else used++;
      if (c.kind === 'other') other++;
      if (c.kind === 'team') byTeam.set(c.team, (byTeam.get(c.team) ?? 0) + 1);
    }
  }
  const teams = [...byTeam.entries()].sort((a, b) => b[1] - a[1]);
  return (
    <dl class="totals" data-testid="totals">
      <div>
        <dt>Hosts</dt>
        <dd>{hosts.length}</dd>
      </div>
      <div>
        <dt>GPUs</dt>
        <dd>{gpus}</dd>
      </div>
      <div>
        <dt>In use</dt>
        <dd>{used}</dd>
      </div>
      <div>
        <dt>Free</dt>
        <dd>{free}</dd>
      </div>
      {teams.map(([team, n]) => (
        <div>
          <dt>
            <i class="swatch" style={`background:${teamColor(team)}`} /> {team}
          </dt>
          <dd>{n}</dd>
        </div>
      ))}
      {other > 0 && (
        <div>
          <dt>
            <i class="swatch k-other" /> other teams
          </dt>
          <dd>{other}</dd>
        </div>
      )}
    </dl>
  );
}

function Alerts({ hosts, idle }) {
  const items = [];
  for (const h of hosts) {
    if (h.state !== 'online') {
      items.push(['danger', h.name, `host ${h.name} is ${h.state}`, `/hosts/${h.name}`]);
    }
    if (h.admin_state === 'failed') {
      const why = h.admin_reason ? `: ${h.admin_reason}` : '';
      items.push(['danger', h.name, `host ${h.name} failed${why}`, `/hosts/${h.name}`]);
    }
    if (h.admin_state === 'draining') {
      const why = h.admin_reason ? `: ${h.admin_reason}` : '';
      items.push(['warn', h.name, `host ${h.name} is draining${why}`, `/hosts/${h.name}`]);
    }
  }
  for (const a of idle ?? []) {
    const reclaim = a.reclaim_at ? `, reclaimed at ${new Date(a.reclaim_at).toLocaleString()}` : '';
    items.push([
      'warn',
      `idle-${a.job}`,
      `job ${a.job} (${a.team}, ${a.user}) idle on ${a.host} since ${new Date(
        a.idle_since,
      ).toLocaleString()}${reclaim}`,
      `/work/${a.job}`,
    ]);
  }
  return (
    <section class="alerts panel" data-testid="alerts" aria-label="Open alerts">
      <h2>Open alerts</h2>
      {items.length === 0 ? (
        <p class="muted">No open alerts.</p>
      ) : (
        <ul>
          {items.slice(0, 50).map(([sev, key, text, href]) => (
            <li key={key} class={sev}>
              <a href={href}>{text}</a>
            </li>
          ))}
          {items.length > 50 && <li class="muted">and {items.length - 50} more</li>}
        </ul>
      )}
    </section>
  );
}

function Legend({ teams }) {
  return (
    <ul class="legend" aria-label="Legend">
      {teams.map((t) => (
        <li>
          <i class="swatch" style={`background:${teamColor(t)}`} /> {t}
        </li>
      ))}
      <li>
        <i class="swatch k-free" /> free
      </li>
      <li>
        <i class="swatch k-other" /> in use (other team)
      </li>
      <li>
        <i class="swatch k-free ded" /> dedicated to a team
      </li>
      <li>
        <i class="swatch k-free shr" /> shared (fractions)
      </li>
      <li>
        <i class="swatch k-free off" /> unavailable
      </li>
      <li>
        <i class="swatch k-team util" style="--c:#888;--u:60%" /> fill: utilisation
      </li>
    </ul>
  );
}

export function OverviewPage() {
  const { me } = useSession();
  const { route } = useLocation();
  const map = useResource('/cluster/map', ['hosts', 'jobs', 'telemetry']);
  // Only for its idle_allocations (the list of jobs flagged idle now, whatever the window); a
  // short window keeps the report cheap.
  const usage = useResource('/usage?by=team&from=-1h', ['usage', 'jobs']);
  const [filter, setFilter] = useState('');

  const hostList = map.data?.hosts ?? [];
  // Per host, the cells and their signature; a card whose signature did not change since the
  // last answer is not re-rendered.
  const cache = useRef(new Map());
  const visibility = useMemo(() => new Visibility(), []);
  useEffect(() => () => visibility.stop(), [visibility]);
  const cells = useMemo(() => {
    const out = new Map();
    const next = new Map();
    for (const h of hostList) {
      const list = (h.gpus ?? []).map((g) => cellOf(h, g, me.name));
      const sig = `${h.state}|${h.admin_state}|${h.dedicated_to}|${JSON.stringify(list)}`;
      next.set(h.name, { list, sig });
      out.set(h.name, list);
    }
    cache.current = next;
    return out;
  }, [hostList, me.name]);

  const teams = useMemo(() => {
    const s = new Set();
    for (const list of cells.values()) for (const c of list) if (c.team) s.add(c.team);
    return [...s].sort();
  }, [cells]);

  const shown = filter
    ? hostList.filter((h) => h.name.toLowerCase().includes(filter.toLowerCase()))
    : hostList;

  return (
    <section class="overview">
      <h1>Cluster</h1>
      <ErrorNote error={map.error} />
      {map.loading && !map.data ? (
        <Loading what="hosts" />
      ) : (
        <>
          <div class="overview-top">
            <Totals hosts={hostList} cells={cells} />
            <Alerts hosts={hostList} idle={usage.data?.idle_allocations} />
          </div>
          <div class="map-tools">
            <Legend teams={teams} />
            {hostList.length > 8 && (
              <label class="map-filter">
                <span>Find host</span>
                <TextInput type="search" value={filter} set={setFilter} placeholder="name" />
              </label>
            )}
          </div>
          {hostList.length === 0 ? (
            <Empty>No hosts you may see have joined yet.</Empty>
          ) : (
            <div class="cluster-map" data-testid="cluster-map" aria-label="Cluster map">
              {shown.map((h) => {
                const entry = cache.current.get(h.name);
                return (
                  <HostCard
                    key={h.name}
                    host={h}
                    cells={entry?.list ?? []}
                    sig={entry?.sig ?? ''}
                    route={route}
                    visibility={visibility}
                  />
                );
              })}
            </div>
          )}
        </>
      )}
    </section>
  );
}
