// The overview: the cluster map (every host the user may see, a cell per GPU), totals, the
// number of jobs queued and open alerts. One request, GET /cluster/map, brings every visible host
// with each GPU's holders and current utilisation; it is refetched (at most once a second) when
// the live stream says hosts, jobs or telemetry changed. Host cards re-render only when their
// cells change. Hovering or focusing a GPU shows who holds it in one tooltip for the whole map.
import { Component } from 'preact';
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { useLocation } from 'preact-iso';
import { useResource } from '../live.js';
import { useSession, useTeamColors } from '../session.js';
import { gpuSummary } from '../format.js';
import { ErrorNote, Loading, Empty, StateBadge, TextInput } from '../components/ui.jsx';
import './overview.css';

// Whether new work can be placed on the host (only `available` hosts take placements): otherwise
// its cells read as unavailable, and its free GPUs are not counted as free.
function hostDown(host) {
  return host.state !== 'online' || (host.admin_state ?? 'available') !== 'available';
}

// Why a host takes no work, in words, for a free GPU's tooltip.
function whyDown(host) {
  if (host.state !== 'online') return `unavailable: host ${host.state}`;
  const why = host.admin_reason ? ` (${host.admin_reason})` : '';
  return `unavailable: host ${host.admin_state}${why}`;
}

// One GPU's cell, as plain data (so a host card can tell cheaply whether it changed). Holders of
// another team's work come without job, team or user: "in use by another team". `tip` is what
// the tooltip (and, on one line, a screen reader) says: the GPU, then who holds it.
function cellOf(host, gpu, myName, colorOf) {
  const holders = gpu.holders ?? [];
  const util = gpu.utilization_pct;
  const first = holders[0];
  let kind = 'free';
  if (holders.length) kind = first.team ? 'team' : 'other';
  const dedicated = gpu.dedicated_to ?? null;
  const mine = holders.find((h) => h.user === myName && h.job_id != null);
  const lines = [`${host.name} · GPU ${gpu.index} · ${gpu.model}`];
  if (!holders.length) lines.push(hostDown(host) ? whyDown(host) : 'free');
  for (const h of holders) {
    if (h.job_id == null) lines.push('in use by another team');
    else {
      const frac = h.gpu_milli && h.gpu_milli < 1000 ? ` (${h.gpu_milli / 1000} GPU)` : '';
      lines.push(`job ${h.job_id}${frac} · ${h.user} · team ${h.team}`);
    }
  }
  if (dedicated) lines.push(`dedicated to ${dedicated}`);
  if (gpu.shared) lines.push('shared (fractions)');
  const mem = gpu.memory_used_mib == null ? '' : ` · ${fmtGib(gpu.memory_used_mib)} used`;
  lines.push(util == null ? 'utilisation unknown' : `utilisation ${Math.round(util)}%${mem}`);
  if (mine) lines.push(`click to open job ${mine.job_id}`);
  return {
    index: gpu.index,
    model: gpu.model,
    kind,
    team: first?.team ?? null,
    color: kind === 'team' ? colorOf(first.team) : '',
    job: first?.job_id ?? null,
    mine: mine?.job_id ?? null,
    dedicated,
    shared: !!gpu.shared,
    down: hostDown(host),
    util: util == null ? null : Math.round(util),
    tip: lines.join('\n'),
  };
}

function fmtGib(mib) {
  return `${(mib / 1024).toFixed(mib < 10240 ? 1 : 0)} GiB`;
}

// "4× H100 · 3 free": what the host has, and how much of it could take work now.
function hostSummary(host, cells) {
  const free = hostDown(host) ? 0 : cells.filter((c) => c.kind === 'free').length;
  return `${gpuSummary(cells)} · ${free} free`;
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
    const summary = cells.length ? hostSummary(host, cells) : 'no GPUs you may see';
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
        <p class="hostgpus" data-testid={`hostgpus-${name}`}>
          {summary}
        </p>
        <div class="gpus" onClick={this.onClick}>
          {cells.map((c) => {
            const cls = `gpu k-${c.kind}${c.dedicated ? ' ded' : ''}${c.down ? ' off' : ''}${
              c.shared ? ' shr' : ''
            }`;
            const style = `--c:${c.color};--u:${c.util ?? 0}%`;
            // No title: the map's own tooltip (GpuTooltip) shows the same lines, styled and in
            // screenshots; a native one would show on top of it.
            const props = {
              class: cls,
              style,
              'data-tip': c.tip,
              'aria-label': c.tip.replace(/\n/g, ', '),
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

function Totals({ hosts, cells, colorOf, queued }) {
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
      <Queued queued={queued} />
      {(teams.length > 0 || other > 0) && (
        // GPUs in use by team, on a line of their own under the totals.
        <div class="totals-teams">
          <dt>In use by team</dt>
          <dd>
            {teams.map(([team, n]) => (
              <span class="team-count" key={team}>
                <i class="swatch" style={`background:${colorOf(team)}`} />
                {team} <b>{n}</b>
              </span>
            ))}
            {other > 0 && (
              <span class="team-count">
                <i class="swatch k-other" />
                other teams <b>{other}</b>
              </span>
            )}
          </dd>
        </div>
      )}
    </dl>
  );
}

// The jobs waiting for GPUs, as far as the user may see them (every job for platform admins,
// else their teams'), with the way to the queue. A long queue shows as "1000+": counting past
// one page of the list is the queue page's work.
const QUEUED_PAGE = 1000;

function Queued({ queued }) {
  const n = queued.data?.length;
  const held = (queued.data ?? []).filter((j) => j.held_by).length;
  return (
    <div data-testid="queued-count">
      <dt>
        <a href="/queue">Queued</a>
      </dt>
      <dd title={held ? `${held} of them held` : undefined}>
        {n == null ? '—' : n >= QUEUED_PAGE ? `${QUEUED_PAGE}+` : n}
      </dd>
    </div>
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

function Legend({ teams, colorOf }) {
  return (
    <ul class="legend" aria-label="Legend" data-testid="map-legend">
      {teams.map((t) => (
        <li data-team={t}>
          <i class="swatch" style={`background:${colorOf(t)}`} /> {t}
        </li>
      ))}
      <li>
        <i class="swatch k-free" /> free
      </li>
      <li>
        <i class="swatch k-other" /> in use by another team
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

// The map's tooltip: the lines of the GPU under the pointer or with the keyboard focus (its
// data-tip), under it. One element for the whole map, moved from cell to cell, so that a map of
// thousands of cells adds no element per cell; it re-reads the cell's lines whenever the page
// renders, so a live refresh updates an open tooltip. Screen readers get the same words from the
// cell's aria-label, so the tooltip itself is hidden from them.
function GpuTooltip({ mapRef }) {
  const [at, setAt] = useState(null); // { cell, x, y } or null
  useEffect(() => {
    const map = mapRef.current;
    if (!map) return undefined;
    const show = (ev) => {
      const cell = ev.target.closest?.('.gpu[data-tip]');
      if (!cell) return;
      const box = cell.getBoundingClientRect();
      const outer = map.getBoundingClientRect();
      // Centred under the cell, kept inside the map (the tooltip is at most 280px wide).
      const x = Math.min(Math.max(box.left - outer.left + box.width / 2, 140), outer.width - 140);
      setAt({ cell, x, y: box.bottom - outer.top + 6 });
    };
    const hide = (ev) => {
      if (!ev.relatedTarget?.closest?.('.gpu[data-tip]')) setAt(null);
    };
    const escape = (ev) => ev.key === 'Escape' && setAt(null);
    map.addEventListener('pointerover', show);
    map.addEventListener('focusin', show);
    map.addEventListener('pointerout', hide);
    map.addEventListener('focusout', hide);
    document.addEventListener('keydown', escape);
    return () => {
      map.removeEventListener('pointerover', show);
      map.removeEventListener('focusin', show);
      map.removeEventListener('pointerout', hide);
      map.removeEventListener('focusout', hide);
      document.removeEventListener('keydown', escape);
    };
    // The map is there: the tooltip is rendered inside it, so it mounts (and this runs) after.
  }, []);
  if (!at || !at.cell.isConnected) return null;
  const [head, ...rest] = at.cell.dataset.tip.split('\n');
  return (
    <div
      class="gpu-tip"
      data-testid="gpu-tooltip"
      aria-hidden="true"
      style={`left:${at.x}px;top:${at.y}px`}
    >
      <strong>{head}</strong>
      {rest.map((l) => (
        <span>{l}</span>
      ))}
    </div>
  );
}

export function OverviewPage() {
  const { me } = useSession();
  const { route } = useLocation();
  const map = useResource('/cluster/map', ['hosts', 'jobs', 'telemetry']);
  // Only for its idle_allocations (the list of jobs flagged idle now, whatever the window); a
  // short window keeps the report cheap.
  const usage = useResource('/usage?by=team&from=-1h', ['usage', 'jobs']);
  const queued = useResource(`/jobs?state=queued&limit=${QUEUED_PAGE}`, ['jobs'], {
    minIntervalMs: 3000,
  });
  const [filter, setFilter] = useState('');
  const mapRef = useRef(null);

  const hostList = map.data?.hosts ?? [];
  // Per host, the cells and their signature; a card whose signature did not change since the
  // last answer is not re-rendered.
  const cache = useRef(new Map());
  const visibility = useMemo(() => new Visibility(), []);
  useEffect(() => () => visibility.stop(), [visibility]);
  // The teams holding GPUs on the map; their colours are slots over every team the user may
  // see, these included, so no two of them look alike.
  const teams = useMemo(() => {
    const s = new Set();
    for (const h of hostList)
      for (const g of h.gpus ?? [])
        for (const x of g.holders ?? []) {
          if (x.team) s.add(x.team);
        }
    return [...s].sort();
  }, [hostList]);
  const colorOf = useTeamColors(me, teams);
  const cells = useMemo(() => {
    const out = new Map();
    const next = new Map();
    for (const h of hostList) {
      const list = (h.gpus ?? []).map((g) => cellOf(h, g, me.name, colorOf));
      const sig = `${h.state}|${h.admin_state}|${h.dedicated_to}|${JSON.stringify(list)}`;
      next.set(h.name, { list, sig });
      out.set(h.name, list);
    }
    cache.current = next;
    return out;
  }, [hostList, me.name, colorOf]);

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
            <Totals hosts={hostList} cells={cells} colorOf={colorOf} queued={queued} />
            <Alerts hosts={hostList} idle={usage.data?.idle_allocations} />
          </div>
          <div class="map-tools">
            <Legend teams={teams} colorOf={colorOf} />
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
            <div
              class="cluster-map"
              data-testid="cluster-map"
              aria-label="Cluster map"
              ref={mapRef}
            >
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
              <GpuTooltip mapRef={mapRef} />
            </div>
          )}
        </>
      )}
    </section>
  );
}
