// The console's colours as style.css sets them, light and dark: text readable on what it is
// drawn on (WCAG 2 contrast 4.5:1), the cluster map's cells visible on their card (3:1, WCAG's
// bar for graphics that carry meaning; cells have no text, their words are in the tooltip), and
// the team colours far enough apart (CIEDE2000) that two teams never look alike, nor a team like
// a free GPU, another team's work or an unavailable GPU.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { contrast, deltaE2000, deltaE2000Lab } from './colour.mjs';
import { TEAM_SLOTS, teamSlots, teamColor } from '../src/format.js';

const css = readFileSync(join(import.meta.dirname, '..', 'src', 'style.css'), 'utf8');

// The custom properties of the first `:root { ... }` in `text`.
function rootVars(text) {
  const body = text.match(/:root\s*\{([^}]*)\}/)?.[1];
  assert.ok(body, 'a :root block');
  const vars = {};
  for (const m of body.matchAll(/(--[\w-]+)\s*:\s*([^;]+);/g)) vars[m[1]] = m[2].trim();
  return vars;
}

const light = rootVars(css);
const darkBlock = css.slice(css.indexOf('@media (prefers-color-scheme: dark)'));
assert.notEqual(darkBlock, css, 'style.css has a prefers-color-scheme: dark block');
// Dark sets what differs; the rest is light's.
const dark = { ...light, ...rootVars(darkBlock) };

// A property's colour, following var(--x) references.
function colour(vars, name) {
  let v = vars[name];
  for (let i = 0; i < 5 && v?.startsWith('var('); i++) v = vars[v.slice(4, -1).trim()];
  assert.ok(v, `${name} is set`);
  return v;
}

const THEMES = { light, dark };
const teams = (vars) => Array.from({ length: TEAM_SLOTS }, (_, i) => colour(vars, `--team-${i}`));

// Sharma, Wu and Dalal's test pairs: the difference formula itself is right.
test('CIEDE2000 matches the published test data', () => {
  const pairs = [
    [[50, 2.6772, -79.7751], [50, 0, -82.7485], 2.0425],
    [[50, 0, 0], [50, -1, 2], 2.3669],
    [[50, 2.5, 0], [73, 25, -18], 27.1492],
    [[60.2574, -34.0099, 36.2677], [60.4626, -34.1751, 39.4387], 1.2644],
    [[22.7233, 20.0904, -46.694], [23.0331, 14.973, -42.5619], 2.0373],
    [[90.8027, -2.0831, 1.441], [91.1528, -1.6435, 0.0447], 1.4441],
  ];
  for (const [a, b, want] of pairs) assert.ok(Math.abs(deltaE2000Lab(a, b) - want) < 1e-4);
  assert.equal(contrast('#000000', '#ffffff').toFixed(2), '21.00');
});

for (const [theme, vars] of Object.entries(THEMES)) {
  test(`${theme}: every team colour stands out on a host card (3:1)`, () => {
    for (const [i, c] of teams(vars).entries()) {
      for (const card of ['--card', '--card-down']) {
        const r = contrast(c, colour(vars, card));
        assert.ok(r >= 3, `--team-${i} ${c} on ${card}: ${r.toFixed(2)}:1`);
      }
    }
  });

  test(`${theme}: two team colours never look alike (CIEDE2000 >= 15)`, () => {
    const list = teams(vars);
    assert.equal(new Set(list).size, TEAM_SLOTS);
    let closest = Infinity;
    for (let i = 0; i < list.length; i++) {
      for (let j = i + 1; j < list.length; j++) {
        const d = deltaE2000(list[i], list[j]);
        closest = Math.min(closest, d);
        assert.ok(d >= 15, `--team-${i} ${list[i]} and --team-${j} ${list[j]}: ${d.toFixed(1)}`);
      }
    }
    assert.ok(closest < Infinity);
  });

  // (--shared, the grey of a cell whose team is unknown, is a fallback never drawn beside teams.)
  test(`${theme}: a team colour is not free, another team's or unavailable`, () => {
    for (const [i, c] of teams(vars).entries()) {
      for (const other of ['--free', '--other', '--danger']) {
        const d = deltaE2000(c, colour(vars, other));
        assert.ok(d >= 15, `--team-${i} ${c} vs ${other}: ${d.toFixed(1)}`);
      }
    }
  });

  test(`${theme}: the map's other cells are visible on a card (3:1)`, () => {
    for (const [fg, bg] of [
      ['--other', '--card'],
      ['--free-line', '--card'],
      ['--free-line', '--card-down'],
      ['--accent', '--card'], // a dedicated GPU's dashed border
    ]) {
      const r = contrast(colour(vars, fg), colour(vars, bg));
      assert.ok(r >= 3, `${fg} on ${bg}: ${r.toFixed(2)}:1`);
    }
  });

  test(`${theme}: text is readable on what it is drawn on (4.5:1)`, () => {
    const pairs = [
      ['--text', '--bg'],
      ['--text', '--panel'],
      ['--text', '--hover'],
      ['--text', '--input-bg'],
      ['--text', '--free'], // a plain badge
      ['--text', '--card-down'],
      ['--text', '--secret-bg'],
      ['--muted', '--panel'],
      ['--muted', '--bg'],
      ['--muted', '--card-down'],
      ['--accent', '--panel'],
      ['--accent', '--bg'],
      ['--accent', '--input-bg'], // a secondary button
      ['--accent', '--info-bg'],
      ['--danger', '--panel'],
      ['--danger', '--danger-bg'],
      ['--warn', '--panel'],
      ['--warn', '--bg'], // a note on the page
      ['--warn', '--warn-bg'],
      ['--ok', '--panel'],
      ['--ok', '--ok-bg'],
      ['--purple', '--purple-bg'],
      ['--on-fill', '--button'],
      ['--on-fill', '--button-danger'],
      ['--on-fill', '--fill-ok'],
      ['--tooltip-text', '--tooltip-bg'],
    ];
    const low = [];
    for (const [fg, bg] of pairs) {
      const r = contrast(colour(vars, fg), colour(vars, bg));
      if (r < 4.5) low.push(`${fg} on ${bg}: ${r.toFixed(2)}:1`);
    }
    assert.deepEqual(low, []);
  });
}

test('the dark theme sets every team colour, and changes them for its dark cards', () => {
  const own = rootVars(darkBlock);
  for (let i = 0; i < TEAM_SLOTS; i++) assert.ok(own[`--team-${i}`], `--team-${i} in dark`);
  assert.equal(light[`--team-${TEAM_SLOTS}`], undefined, 'no slot beyond TEAM_SLOTS');
});

test('teams in view get different slots, and keep them as long as the set does', () => {
  const names = ['ml', 'cv', 'nlp', 'vision', 'speech', 'robotics', 'infra', 'research', 'a', 'b'];
  const slots = teamSlots(names);
  assert.equal(new Set(slots.values()).size, names.length, 'ten teams, ten colours');
  // The order the teams come in does not matter.
  assert.deepEqual([...teamSlots([...names].reverse())].sort(), [...slots].sort());
  assert.equal(teamColor('ml', slots), `var(--team-${slots.get('ml')})`);
  assert.equal(teamColor(null), 'var(--shared)');
  // Beyond ten, slots repeat rather than fail.
  const many = teamSlots([...names, 'eleven']);
  assert.equal(many.size, 11);
});
