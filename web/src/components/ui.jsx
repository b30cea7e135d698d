// Small pieces every page uses.

// `testid` marks a form's own error for the tests.
export function ErrorNote({ error, testid }) {
  if (!error) return null;
  return (
    <p class="error" role="alert" data-testid={testid}>
      {error.message ?? String(error)}
      {error.field ? ` (field: ${error.field})` : ''}
    </p>
  );
}

export function Loading({ what = '' }) {
  return <p class="loading">Loading{what ? ` ${what}` : ''}…</p>;
}

export function Empty({ children }) {
  return <p class="empty">{children}</p>;
}

export function StateBadge({ state }) {
  return <span class={`badge state-${state}`}>{state}</span>;
}

// A labelled form field: <Field label="GPUs"><input .../></Field>
export function Field({ label, hint, children }) {
  return (
    <label class="field">
      <span>{label}</span>
      {children}
      {hint && <small>{hint}</small>}
    </label>
  );
}

// An input bound to a state setter: <TextInput name="reason" value={reason} set={setReason} />.
export function TextInput({ set, ...props }) {
  return <input {...props} onInput={(e) => set(e.currentTarget.value)} />;
}

// A <select> bound to a state setter; `options` are values, or [value, label] pairs.
export function Select({ set, options, ...props }) {
  return (
    <select {...props} onChange={(e) => set(e.currentTarget.value)}>
      {options.map((o) => {
        const [value, label] = Array.isArray(o) ? o : [o, o];
        return <option value={value}>{label}</option>;
      })}
    </select>
  );
}

// A checkbox with its label after it, bound to a state setter.
export function Checkbox({ set, cls = 'inline', children, ...props }) {
  return (
    <label class={cls}>
      <input type="checkbox" {...props} onChange={(e) => set(e.currentTarget.checked)} /> {children}
    </label>
  );
}

// No server error to show (a form without fieldErrors).
const NO_ERRORS = { aria: () => ({}), note: () => null };

// A control (TextInput, Select) in a labelled Field; `errors` (fieldErrors in
// components/form-fields.jsx) shows the server's refusal of the field under it.
function labelled(Control) {
  return function LabelledField({ label, hint, errors = NO_ERRORS, ...props }) {
    return (
      <Field label={label} hint={hint}>
        <Control {...props} {...errors.aria(props.name)} />
        {errors.note(props.name)}
      </Field>
    );
  };
}

// <InputField label="Reason" name="reason" value={reason} set={setReason} />
export const InputField = labelled(TextInput);
export const SelectField = labelled(Select);
