// Tabs as the WAI-ARIA tabs pattern has them: a tablist of buttons, one tabpanel shown. The tab
// is in the address (?tab=users), so a reload, a link or the back button lands on it; arrow keys,
// Home and End move between tabs (and select them: automatic activation), Tab goes on into the
// panel. Only the chosen panel is rendered, so a tab's requests wait until it is opened.
import { useRef } from 'preact/hooks';
import { useLocation } from 'preact-iso';

// `tabs`: [{ id, label, render }]; the first is the default. `label` names the tablist.
export function Tabs({ tabs, label, testid }) {
  const { path, query, route } = useLocation();
  const list = useRef(null);
  const current = tabs.find((t) => t.id === query.tab) ?? tabs[0];

  // Each tab is its own history entry: back returns to the tab before.
  const select = (tab, focus) => {
    const q = new URLSearchParams(query);
    if (tab.id === tabs[0].id) q.delete('tab');
    else q.set('tab', tab.id);
    const s = q.toString();
    route(`${path}${s ? `?${s}` : ''}`);
    if (focus) requestAnimationFrame(() => list.current?.querySelector(`#tab-${tab.id}`)?.focus());
  };

  const onKeyDown = (ev) => {
    const i = tabs.indexOf(current);
    const to = {
      ArrowRight: (i + 1) % tabs.length,
      ArrowLeft: (i - 1 + tabs.length) % tabs.length,
      Home: 0,
      End: tabs.length - 1,
    }[ev.key];
    if (to === undefined) return;
    ev.preventDefault();
    select(tabs[to], true);
  };

  return (
    <div class="tabs" data-testid={testid}>
      <div role="tablist" aria-label={label} ref={list} onKeyDown={onKeyDown}>
        {tabs.map((t) => {
          const selected = t === current;
          return (
            <button
              type="button"
              role="tab"
              id={`tab-${t.id}`}
              aria-selected={selected ? 'true' : 'false'}
              aria-controls={`tabpanel-${t.id}`}
              tabIndex={selected ? 0 : -1}
              data-testid={`tab-${t.id}`}
              onClick={() => !selected && select(t, false)}
            >
              {t.label}
            </button>
          );
        })}
      </div>
      <div
        role="tabpanel"
        id={`tabpanel-${current.id}`}
        aria-labelledby={`tab-${current.id}`}
        tabIndex={0}
        data-testid={`tabpanel-${current.id}`}
      >
        {current.render()}
      </div>
    </div>
  );
}
