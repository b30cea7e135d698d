// A form's state, and the server's refusal shown next to the input it names (InputField and
// SelectField in ui.jsx take `errors`): a 400 names the API's field, which `fieldOf` maps to the
// form's input.
import { useState } from 'preact/hooks';

// For `error` (null: none): aria(name) marks the input it names, note(name) is the message under
// it, and inForm says whether any input of the form showed it (else the form shows it itself).
// `id` prefixes the note's element id; `testid` marks the note for the tests.
export function fieldErrors(error, fieldOf, { id = 'err-', testid } = {}) {
  const field = error?.field ? (fieldOf[error.field] ?? error.field) : null;
  const at = (name) => field === name;
  return {
    inForm: field !== null && Object.values(fieldOf).includes(field),
    aria: (name) => (at(name) ? { 'aria-invalid': 'true', 'aria-describedby': id + name } : {}),
    note: (name) =>
      at(name) ? (
        <small class="error" id={id + name} role="alert" data-testid={testid}>
          {error.message}
        </small>
      ) : null,
  };
}

// The props that bind a field to `name` in a form's state `f`, for the form's setter factory `set`
// and its `errors` (none: undefined): <InputField {...bind('cpus')} label="CPU cores" />.
export function binder(f, set, errors) {
  return (name) => ({ name, value: f[name], set: set(name), errors });
}

// A form's values in one state object, its inputs named as its keys: f, setF, set(name) (a
// setter of one value) and bind(name) (the props of its input).
export function useFields(initial) {
  const [f, setF] = useState(initial);
  const set = (k) => (v) => setF((prev) => ({ ...prev, [k]: v }));
  return { f, setF, set, bind: binder(f, set) };
}

// A number field's value in the API's unit (cores -> millicores: 1000), or the text as typed when
// it is not a number, so that the server names the field in its answer.
export function scaled(text, unit) {
  const n = Number(text);
  return Number.isFinite(n) ? Math.round(n * unit) : text;
}
