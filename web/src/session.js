// Who is logged in, for every page: the /whoami answer, shared through a context.
import { createContext } from 'preact';
import { useContext, useMemo } from 'preact/hooks';
import { useResource } from './live.js';
import { teamColor, teamSlots } from './format.js';

export const SessionContext = createContext(null);

// { me, setMe } where me is the /whoami answer: name, platform_admin, teams {"ml": "member"}, ...
export function useSession() {
  return useContext(SessionContext);
}

// The teams the user belongs to, as names.
export function teamNames(me) {
  return Object.keys(me?.teams ?? {}).sort();
}

// The user's role in `team` ("viewer", "member", "team-admin"), or null.
export function roleIn(me, team) {
  return me?.teams?.[team] ?? null;
}

export function isAdmin(me) {
  return !!me?.platform_admin;
}

// May `me` change team `team`'s settings (members, projects, quota split, leases)?
export function canManageTeam(me, team) {
  return isAdmin(me) || roleIn(me, team) === 'team-admin';
}

// May `me` submit work in `team`?
export function canSubmit(me, team) {
  const role = roleIn(me, team);
  return isAdmin(me) || role === 'member' || role === 'team-admin';
}

// The user's teams whose settings `me` may change.
export function managedTeams(me) {
  return teamNames(me).filter((t) => canManageTeam(me, t));
}

// The user's teams `me` may submit work in.
export function submittableTeams(me) {
  return teamNames(me).filter((t) => canSubmit(me, t));
}

// The teams `me` may pick in a form or filter: every team for platform admins (the server lists
// them), else `mine`.
export function useTeamChoices(me, mine) {
  const all = useResource(isAdmin(me) ? '/teams' : null, ['teams']);
  return isAdmin(me) ? (all.data ?? []).map((t) => t.name) : mine;
}

// A team's colour for `me`: slots (format.js, teamSlots) over every team `me` may see (every
// team for platform admins), and `extra` (teams a page shows that may not be among them yet),
// so that two teams on one page never share a colour and a team keeps its colour across pages.
export function useTeamColors(me, extra = []) {
  const teams = useTeamChoices(me, teamNames(me));
  const key = [...teams, ...extra].join(',');
  return useMemo(() => {
    const slots = teamSlots(key.split(','));
    return (team) => teamColor(team, slots);
  }, [key]);
}

const TEAM_KEY = 'allot.team';

// The team a user in several teams picked last (in the launch form or on the Usage page), when
// it is still one of `teams`; else the first of them. Kept in this browser only.
export function preferredTeam(teams) {
  try {
    const t = localStorage.getItem(TEAM_KEY);
    if (t && teams.includes(t)) return t;
  } catch {
    // Storage may be off (private windows); the first team then.
  }
  return teams[0] ?? '';
}

export function rememberTeam(team) {
  try {
    localStorage.setItem(TEAM_KEY, team);
  } catch {
    // Not remembered, as above.
  }
}

// A session link opened before logging in comes back as /?next=/sessions/N/... (allotd's
// session proxy sends it here): once logged in, the browser goes on to it. Only a session path
// of this origin is followed, never another site.
export function sessionLinkToFollow(search = window.location.search) {
  const next = new URLSearchParams(search).get('next');
  return next && /^\/sessions\/[1-9][0-9]*\//.test(next) ? next : null;
}
