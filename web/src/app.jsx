// The console's shell: the login gate, the navigation and the pages. Pages are separate chunks
// (lazy) so that the first load only fetches the shell and the overview.
import { useEffect, useState } from 'preact/hooks';
import { LocationProvider, Router, Route, lazy, useLocation } from 'preact-iso';
import { onUnauthorized, whoami, logout } from './api.js';
import { startLive, stopLive, useLiveStatus } from './live.js';
import { SessionContext, isAdmin, sessionLinkToFollow } from './session.js';
import { LoginPage } from './pages/login.jsx';
import { OverviewPage } from './pages/overview.jsx';

const WorkPage = lazy(() => import('./pages/work.jsx').then((m) => m.WorkPage));
const QueuePage = lazy(() => import('./pages/queue.jsx').then((m) => m.QueuePage));
const TeamsPage = lazy(() => import('./pages/teams.jsx').then((m) => m.TeamsPage));
const UsagePage = lazy(() => import('./pages/usage.jsx').then((m) => m.UsagePage));
const HostsPage = lazy(() => import('./pages/hosts.jsx').then((m) => m.HostsPage));
const AdminPage = lazy(() => import('./pages/admin.jsx').then((m) => m.AdminPage));

const NAV = [
  ['/', 'Overview'],
  ['/work', 'My work'],
  ['/queue', 'Queue'],
  ['/teams', 'Teams'],
  ['/usage', 'Usage'],
  ['/hosts', 'Hosts'],
  ['/admin', 'Admin'],
];

function Nav({ me }) {
  const { path } = useLocation();
  const live = useLiveStatus();
  const current = (href) => (href === '/' ? path === '/' : path.startsWith(href));
  return (
    <header class="top">
      <a class="skip" href="#main">
        Skip to content
      </a>
      <span class="brand">Allot</span>
      <nav aria-label="Main">
        {NAV.map(([href, label]) => (
          <a href={href} aria-current={current(href) ? 'page' : undefined}>
            {label}
          </a>
        ))}
      </nav>
      <span class="spacer" />
      <span class={`live ${live ? 'on' : 'off'}`} title={live ? 'live updates on' : 'reconnecting'}>
        {live ? '● live' : '○ reconnecting'}
      </span>
      <span class="who" data-testid="whoami">
        {me.name}
        {isAdmin(me) ? ' (platform admin)' : ''}
      </span>
      <button type="button" class="link" onClick={() => logout()}>
        Log out
      </button>
    </header>
  );
}

function NotFound() {
  return (
    <section>
      <h1>Not found</h1>
      <p>
        No such page. <a href="/">Back to the overview</a>.
      </p>
    </section>
  );
}

export function App() {
  // undefined: asking the server; null: no session (the login page); else the /whoami answer.
  const [me, setMe] = useState(undefined);
  const [expired, setExpired] = useState(false);

  // Logged in (already, or just now): on to a session link that led here, else the console;
  // null (no login) shows the login page.
  function enter(who) {
    const next = who && sessionLinkToFollow();
    if (next) window.location.assign(next);
    else setMe(who);
  }

  useEffect(() => {
    whoami()
      .then(enter)
      .catch(() => setMe(null));
    return onUnauthorized(() => {
      stopLive();
      setMe((prev) => {
        if (prev) setExpired(true);
        return null;
      });
    });
  }, []);

  useEffect(() => {
    if (me) startLive();
  }, [me]);

  if (me === undefined) return <p class="loading">Loading…</p>;
  if (me === null) {
    return (
      <LoginPage
        expired={expired}
        onLogin={(who) => {
          setExpired(false);
          enter(who);
        }}
      />
    );
  }
  return (
    <SessionContext.Provider value={{ me, setMe }}>
      <LocationProvider>
        <Nav me={me} />
        <main id="main" tabIndex={-1}>
          <Router>
            <Route path="/" component={OverviewPage} />
            <Route path="/work" component={WorkPage} />
            <Route path="/work/:id" component={WorkPage} />
            <Route path="/queue" component={QueuePage} />
            <Route path="/teams" component={TeamsPage} />
            <Route path="/teams/:team" component={TeamsPage} />
            <Route path="/usage" component={UsagePage} />
            <Route path="/hosts" component={HostsPage} />
            <Route path="/hosts/:name" component={HostsPage} />
            <Route path="/admin" component={AdminPage} />
            <Route default component={NotFound} />
          </Router>
        </main>
      </LocationProvider>
    </SessionContext.Provider>
  );
}
